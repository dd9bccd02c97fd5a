"""Hardening (issue 10): nothing a repository ships can hang or kill the run, no fix breaks a file.

FIFOs named ``*.py``; expressions too deep or too long for libcst; a worker process that dies;
codemod writes (identity of the file, temp files, SIGTERM/SIGINT/SIGKILL mid-run); bytes libcst
does not reproduce (CR-only line ends, form feeds); comments of multi-item ``with`` statements.
"""
from __future__ import annotations

import ast
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import libcst as cst
import pytest
import torch

from lints.file_fixes import FixOptions, fix_text
from lints.options import Config
from lints import forked_work
from lints.sources import NOT_REGULAR, decode_source, read_source
from lints.walk import discover
from lints.workers import run_jobs
from lints.writes import FileChangedError, sweep_stale_temps, write_file
from lints.limits import MAX_BRACKET_DEPTH, MAX_CHAIN_TOKENS, measure, source_limits_error
from lints.model import FileError

from .helpers import FIXTURES, ROOT

SGLANG_IN = (FIXTURES / "fix" / "sglang.in.py").read_text()
SGLANG_OUT = (FIXTURES / "fix" / "sglang.out.py").read_text()
TEMP_GLOB = ".gradmode-*.tmp"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                GRADMODE_CACHE_DIR=str(ROOT / ".gradmode_cache_test"))


def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m ARGS`` with a time limit: a hang fails the test instead of stopping the suite."""
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=_env(),
                          timeout=timeout)


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if ": error: " in line]


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr


def sum_of(terms: int) -> str:
    return "import torch\n# no_grad inference_mode capture\nx = " + " + ".join(["1"] * terms) + "\n"


# --------------------------------------------------------------------------------------------------
# 1. FIFOs, sockets and devices named *.py are not read
# --------------------------------------------------------------------------------------------------
@pytest.fixture()
def fifo_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    os.mkfifo(root / "pipe.py")  # nobody ever writes to it: opening or reading it blocks forever
    (root / "bad.py").write_text(SGLANG_IN)
    return root


def test_read_source_refuses_what_is_not_a_regular_file(fifo_tree: Path, tmp_path: Path) -> None:
    result = read_source(str(fifo_tree / "pipe.py"))
    assert result == FileError(str(fifo_tree / "pipe.py"), NOT_REGULAR)
    assert read_source("/dev/null") == FileError("/dev/null", NOT_REGULAR)
    sock_path = tmp_path / "sock.py"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert read_source(str(sock_path)) == FileError(str(sock_path), NOT_REGULAR)
    files, errors = discover([str(fifo_tree)], exclude=())
    assert files == [str(fifo_tree / "bad.py")]
    assert errors == [FileError(str(fifo_tree / "pipe.py"), NOT_REGULAR)]


def test_discover_looks_through_links_the_listing_cannot_type(fifo_tree: Path) -> None:
    # the listing's entry types decide plain files; a link is followed where the walk's files are taken
    (fifo_tree / "to_pipe.py").symlink_to("pipe.py")
    (fifo_tree / "to_bad.py").symlink_to("bad.py")
    (fifo_tree / "dangling.py").symlink_to("nowhere.py")
    files, errors = discover([str(fifo_tree)], exclude=())
    assert files == [str(fifo_tree / name) for name in ("bad.py", "dangling.py", "to_bad.py")]
    assert errors == [FileError(str(fifo_tree / name), NOT_REGULAR) for name in ("pipe.py", "to_pipe.py")]


@pytest.mark.parametrize("given", ["folder", "file"])
def test_codemod_does_not_hang_on_a_fifo(fifo_tree: Path, given: str) -> None:
    target = fifo_tree if given == "folder" else fifo_tree / "pipe.py"
    proc = run("lints.codemod", str(target), str(fifo_tree / "bad.py"), "--jobs", "1", cwd=fifo_tree, timeout=60)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc) == [f"{fifo_tree / 'pipe.py'}: error: {NOT_REGULAR}"], proc.stderr
    assert (fifo_tree / "bad.py").read_text() == SGLANG_OUT
    assert stat.S_ISFIFO((fifo_tree / "pipe.py").lstat().st_mode)


@pytest.mark.parametrize("given", ["folder", "file"])
def test_linter_does_not_hang_on_a_fifo(fifo_tree: Path, given: str) -> None:
    target = fifo_tree if given == "folder" else fifo_tree / "pipe.py"
    proc = run("lints", str(target), str(fifo_tree / "bad.py"), "--no-cache", "--jobs", "1", cwd=fifo_tree,
               timeout=60)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc) == [f"{fifo_tree / 'pipe.py'}: error: {NOT_REGULAR}"], proc.stderr
    assert "GM101" in proc.stdout  # the bad file next to it is still linted


@pytest.mark.xfail(strict=True, raises=subprocess.TimeoutExpired,
                   reason="flake8 opens every file itself (FileProcessor) before any plugin runs; "
                          "the plugin cannot prevent the hang (see the hardening report)")
@pytest.mark.slow
def test_flake8_does_not_hang_on_a_fifo(fifo_tree: Path) -> None:
    # flake8's workers hang on the FIFO too: they are stopped with their group, not left behind
    proc = subprocess.Popen([sys.executable, "-m", "flake8", "--select", "GM", str(fifo_tree)], cwd=fifo_tree,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert "GM101" in out


# --------------------------------------------------------------------------------------------------
# 2. Deep or long expressions; a worker that dies
# --------------------------------------------------------------------------------------------------
def test_limits_refuse_long_chains_and_deep_nesting() -> None:
    assert source_limits_error(SGLANG_IN) is None
    assert source_limits_error("") is None
    long_sum = source_limits_error(sum_of(20_000))
    assert long_sum is not None and long_sum.startswith("line 3: expression too long") and "\n" not in long_sum
    assert source_limits_error(sum_of(500)) is not None
    assert source_limits_error(sum_of(MAX_CHAIN_TOKENS // 2 - 2)) is None
    deep = "x = " + "[" * (MAX_BRACKET_DEPTH + 1) + "]" * (MAX_BRACKET_DEPTH + 1) + "\n"
    assert source_limits_error(deep).startswith("line 1: brackets nested more than")
    assert source_limits_error("x = " + "[" * MAX_BRACKET_DEPTH + "]" * MAX_BRACKET_DEPTH + "\n") is None
    # Commas keep the tree flat: big data literals are fine, however long.
    assert source_limits_error("x = {" + ", ".join(f"'k{i}': [{i}, -{i}]" for i in range(20_000)) + "}\n") is None
    assert source_limits_error("x = [" + ",\n".join(["(1 + 2) * 3"] * 5000) + "]\n") is None
    # Other chain shapes count too, and a long chain inside brackets adds to the chain around it.
    assert source_limits_error("x = a" + ".b" * 600 + "\n") is not None
    assert source_limits_error("x = f" + "()" * 600 + "\n") is not None
    assert source_limits_error("x = " + "not " * 1100 + "1\n") is not None
    assert source_limits_error("x = g(" + " + ".join(["1"] * 400) + ") + " + " + ".join(["1"] * 200) + "\n")
    # The count restarts at each statement, whatever the layout.
    assert source_limits_error(("y = " + " + ".join(["1"] * 300) + "; ") * 50 + "\n") is None
    assert source_limits_error(("y = (" + " +\n".join(["1"] * 300) + ")\n") * 50) is None
    # What does not tokenize is left to the parser, which reports the syntax error.
    assert source_limits_error("x = 1)\n" + "y = " + " + ".join(["1"] * 2000) + "\n") is None
    assert source_limits_error("if x:\n        a = 1\n    b = 2\n" + "# padding\n" * 200) is None
    assert source_limits_error("x = (" + "1 + " * 2000) is not None  # seen before the tokenizer gives up


@pytest.mark.parametrize("shape", [
    "x = " + " + ".join(["1"] * (MAX_CHAIN_TOKENS // 2 - 2)),
    "x = a" + ".b" * (MAX_CHAIN_TOKENS // 2 - 2),
    "x = f" + "()" * (MAX_CHAIN_TOKENS // 2 - 2),
    "x = " + "lambda: " * (MAX_CHAIN_TOKENS // 2 - 2) + "1",
    "x = " + "a if b else " * (MAX_CHAIN_TOKENS // 4 - 2) + "1",
    "x = " + "-" * (MAX_CHAIN_TOKENS - 4) + "1",
    "x = " + "[" * MAX_BRACKET_DEPTH + "]" * MAX_BRACKET_DEPTH,
    "x = " + "f(" * MAX_BRACKET_DEPTH + ")" * MAX_BRACKET_DEPTH,
], ids=["sum", "attributes", "calls", "lambdas", "conditionals", "unary", "lists", "nested-calls"])
def test_what_passes_the_limits_parses_quickly(shape: str) -> None:
    source = shape + "\n"
    assert source_limits_error(source) is None, measure(source)
    start = time.perf_counter()
    cst.parse_module(source)
    assert time.perf_counter() - start < 1.0  # ~0.1 s measured; 2,000 terms would take 1.3 s, 20,000 minutes


def test_real_code_is_far_below_the_limits() -> None:
    """The deepest nesting and longest chain in torch's nn and optim packages (and in ours)."""
    folders = [Path(torch.__file__).parent / name for name in ("nn", "optim")] + [ROOT / "lints"]
    depth = chain = 0
    for folder in folders:
        for path in folder.rglob("*.py"):
            d, c = measure(path.read_text(encoding="utf-8", errors="replace"))
            depth, chain = max(depth, d), max(chain, c)
    assert depth * 4 < MAX_BRACKET_DEPTH and chain * 4 < MAX_CHAIN_TOKENS, (depth, chain)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_codemod_survives_long_sums(tmp_path: Path, jobs: str) -> None:
    """The analysis reads files with `ast`; only files with a fix are parsed by libcst, after the limits check."""
    (tmp_path / "sum500.py").write_text(sum_of(500))  # no finding: never parsed by libcst, not an error
    (tmp_path / "sum20k.py").write_text(sum_of(20_000))
    (tmp_path / "fixable_sum.py").write_text(SGLANG_IN + "\n" + sum_of(500))
    (tmp_path / "ok.py").write_text(SGLANG_IN)
    names = ("sum500.py", "sum20k.py", "fixable_sum.py")
    before = {name: (tmp_path / name).read_bytes() for name in names}
    proc = run("lints.codemod", str(tmp_path), "--jobs", jobs, cwd=tmp_path, timeout=120)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    errors = error_lines(proc)
    assert len(errors) == 2, proc.stderr
    assert any(line.startswith(f"{tmp_path / 'sum20k.py'}: error: ") for line in errors), errors
    assert any(line.startswith(f"{tmp_path / 'fixable_sum.py'}: error: ") and "expression too long" in line
               for line in errors), errors
    for name in names:
        assert (tmp_path / name).read_bytes() == before[name]
    assert (tmp_path / "ok.py").read_text() == SGLANG_OUT


def _job(item: str) -> str:
    """A per-file job for run_jobs; ``kill*`` items kill their own process, as a native crash would."""
    if item.startswith("kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    if item.startswith("exit"):
        os._exit(3)
    return item.upper()


def test_run_jobs_survives_a_dying_worker() -> None:
    items = [f"file{i}" for i in range(12)] + ["kill-a"] + [f"more{i}" for i in range(12)] + ["exit-b", "last"]
    out = run_jobs(_job, items, 2)
    assert len(out) == len(items)
    for item, result in zip(items, out):
        if item.startswith("kill"):
            assert result == FileError(item, "internal error: the worker process died on this file (killed by SIGKILL)")
        elif item.startswith("exit"):
            assert result == FileError(item, "internal error: the worker process died on this file (exit status 3)")
        else:
            assert result == item.upper()
    seen = []
    out = run_jobs(_job, ["a", "kill", "b"], 3, progress=seen.append, on_crash=lambda item, why: ("crashed", item))
    assert out == ["A", ("crashed", "kill"), "B"] and seen == [1, 1, 1]


def _cyclic(item: str) -> list:
    value: list = [item]
    value.append(value)
    return value


def _shared(item: str) -> list:
    leaf = [item]
    return [leaf, leaf, {"k": leaf}]


def _raises(item: str) -> str:
    if item == "bad":
        raise KeyError(item)
    return item


def test_run_jobs_hands_back_cyclic_and_shared_results_as_they_were() -> None:
    out = run_jobs(_cyclic, ["a", "b", "c"], 2)
    assert [value[0] for value in out] == ["a", "b", "c"]
    assert all(value[1] is value for value in out)
    out = run_jobs(_shared, ["a", "b"], 2)
    assert out == [[["a"], ["a"], {"k": ["a"]}], [["b"], ["b"], {"k": ["b"]}]]
    assert all(value[0] is value[1] is value[2]["k"] for value in out)


def _pid_of(item: str) -> tuple:
    return item, os.getpid()


def _pack_with_pid(value: tuple) -> tuple:
    return ("packed", *value, os.getpid())


def _unpack_with_pid(value: tuple) -> tuple:
    return (*value, os.getpid())


def test_run_jobs_hand_over_packs_in_the_worker_and_unpacks_in_the_main_process_as_results_arrive() -> None:
    from lints.workers import HandOver

    hand_over = HandOver(_pack_with_pid, _unpack_with_pid)
    out = run_jobs(_pid_of, ["a", "b", "c", "d"], 2, hand_over=hand_over)
    me = os.getpid()
    assert [value[:2] for value in out] == [("packed", item) for item in "abcd"]
    for _, _, ran_in, packed_in, unpacked_in in out:
        assert ran_in == packed_in != me and unpacked_in == me
    # in process, results are used as they are
    assert run_jobs(_pid_of, ["a", "b"], 1, hand_over=hand_over) == [("a", me), ("b", me)]


def test_run_jobs_raises_what_the_job_raises() -> None:
    with pytest.raises(KeyError, match="bad"):
        run_jobs(_raises, ["a", "bad", "c"], 2)


def test_summaries_from_workers_equal_those_made_in_process(monkeypatch) -> None:
    from lints import summary_jobs
    from lints.engine import project_files
    from lints.summary_jobs import collect_summaries

    monkeypatch.setattr(summary_jobs, "PARALLEL_MIN_BYTES", 0)  # the fixtures are small

    entries = project_files(str(FIXTURES), Config(), read_keys=False)
    assert len(entries) > 3
    alone, alone_errors = collect_summaries(project_files(str(FIXTURES), Config(), read_keys=False), 1, None)
    parallel, parallel_errors = collect_summaries(entries, 2, None)
    assert parallel == alone and parallel_errors == alone_errors and alone


def test_run_jobs_in_batches_blames_only_the_item_that_kills_its_worker(monkeypatch) -> None:
    from lints import workers

    items = [f"file{i}" for i in range(40)] + ["kill-a"] + [f"more{i}" for i in range(40)]
    seen: list[int] = []
    started = []
    real_isolated = workers._isolated_round
    monkeypatch.setattr(workers, "_isolated_round", lambda func, items, order, *a: started.extend(order) or
                        real_isolated(func, items, order, *a))
    out = run_jobs(_job, items, 2, progress=seen.append, weight=lambda item: 10, batch_weight=50)
    assert 0 < len(started) <= 3  # after the batch died, its items went one task each: few ran alone
    assert sum(seen) == len(items) and max(seen) > 1  # batches of several items, each item counted once
    for item, result in zip(items, out):
        if item.startswith("kill"):
            assert result == FileError(item, "internal error: the worker process died on this file (killed by SIGKILL)")
        else:
            assert result == item.upper()


def test_no_fork_while_other_threads_run() -> None:
    release = threading.Event()
    helper = threading.Thread(target=release.wait)
    helper.start()
    try:
        assert not forked_work.can_fork(2)  # a lock another thread holds would never be released in the child
    finally:
        release.set()
        helper.join()
    assert forked_work.can_fork(2) == (hasattr(os, "fork") and forked_work._memory_to_spare())
    assert not forked_work.can_fork(1)


def test_when_fork_fails_the_analysis_runs_in_process(tmp_path: Path, monkeypatch) -> None:
    real_fork = os.fork
    asked = []

    def no_fork():  # for the analysis's child only: the process pool forks its workers as usual
        if sys._getframe(1).f_code.co_name == "converse":
            asked.append(True)
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real_fork()

    monkeypatch.setattr(os, "fork", no_fork)
    root = tmp_path / "proj"
    (root / "engine").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    for n in range(4):
        (root / "engine" / f"m{n}.py").write_text(SGLANG_IN)
    from lints.engine import lint_project

    run = lint_project([str(root)], Config(), jobs=2, cache_dir=tmp_path / "cache")
    assert asked and run.findings and len(list((tmp_path / "cache").glob("*/cache.sqlite3"))) == 1


def test_a_forked_child_with_closed_standard_streams(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", None)
    talk = forked_work.converse(lambda: "first", lambda message: message * 2)
    assert talk is not None
    assert forked_work.first_answer(talk, str, lambda: "again") == "first"
    assert forked_work.last_answer(talk, str) == "againagain"


def test_collector_paused_nests_and_leaves_the_hosts_frozen_objects_frozen() -> None:
    import gc

    from lints.gc_pause import collector_paused

    assert gc.isenabled()
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer block still runs
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_exclude_globs_with_a_folder_match_on_windows_paths(monkeypatch) -> None:
    import ntpath

    import functools

    from lints import globs, walk

    monkeypatch.setattr(walk.os, "sep", "\\")
    monkeypatch.setattr(walk.os.path, "normcase", ntpath.normcase)
    monkeypatch.setattr(globs, "_compiled", functools.lru_cache(globs._compiled.__wrapped__))  # a cache of its own
    excluded = functools.partial(walk._excluded, exclude=("tests/fixtures", "pkg/gen*", "*_pb2.py"), anchor="")
    assert excluded("fixtures", "proj\\pkg\\tests\\fixtures")
    assert excluded("gen_a.py", "proj\\pkg\\gen_a.py")
    assert excluded("M_PB2.PY", "proj\\M_PB2.PY")  # Windows paths are case-blind
    assert not excluded("fixtures", "proj\\pkg\\fixtures")


def test_excludes_without_wildcards_match_as_their_globs() -> None:
    # looked up, not matched (``globs.path_matcher``): the same answers as the compiled globs
    import itertools

    from lints.globs import path_match, path_matcher

    patterns = (".git", "build", "a/b", "./top", "./a/b/c", "tests/fixtures", "x/", "*.pyc", "foo*", "[ab]x")
    parts = ("build", "a", "b", "c", "x", "top", "tests", "fixtures", ".git", "foo1", "q.pyc", "ax", "")
    for size in (1, 2, 3):
        for chosen in itertools.product(parts, repeat=size):
            for path in ("/".join(chosen), "/" + "/".join(chosen)):
                for subset in (patterns, patterns[:7], ("build",), ("./top",)):
                    assert path_matcher(subset)(path) == (path_match(path, subset) is not None), (path, subset)



def test_bare_name_excludes_leave_a_file_out_by_its_name_as_the_walk_does() -> None:
    """Where every exclude is a bare name (the defaults), the walk asks a file's name of a set (``globs.bare_names``),
    not the two matchers it asks otherwise: the same answers over every path of up to three parts."""
    import itertools

    from lints.globs import bare_names
    from lints.walk import _exclusion

    parts = ("build", "a", "x.py", ".git", "dist", "q", "")
    for patterns in (("build", "x.py", ".git"), ("dist",), (".", "..", "x.py"), ("x.py", "a/x.py"), ("*.py",)):
        bare = bare_names(patterns)
        assert (bare is None) == any("/" in p or "*" in p for p in patterns)
        if bare is None:
            continue
        for size in (1, 2, 3):
            for chosen in itertools.product(parts, repeat=size):
                relative = "/".join(chosen)
                name = chosen[-1]
                assert (name in bare) == _exclusion(patterns)(name, relative), (patterns, relative)

def test_a_file_given_in_two_spellings_keeps_the_walks_or_the_last_buffers(tmp_path: Path) -> None:
    from lints.engine import project_files

    from .helpers import chdir

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    with chdir(tmp_path):
        def spelt(extra, overrides=None):
            return [e.path for e in project_files(".", Config(), extra, overrides, read_keys=False)]

        assert spelt(["pkg/a.py", "./pkg/a.py", str(tmp_path / "pkg" / "a.py")]) == ["pkg/a.py"]
        assert spelt(["./pkg/a.py", "pkg/a.py"], {"./pkg/a.py": "y = 1\n", "pkg/a.py": "y = 2\n"}) == ["pkg/a.py"]
        assert spelt(["pkg/a.py", "./pkg/a.py"], {"./pkg/a.py": "y = 1\n", "pkg/a.py": "y = 2\n"}) == ["./pkg/a.py"]
        assert spelt(["pkg/b.py", "pkg/b.py"]) == ["pkg/a.py", "pkg/b.py"]  # not walked: joins once


@pytest.mark.skipif(os.sep != "/", reason="a backslash in a folder's name")
def test_a_folder_named_with_a_backslash_is_excluded_as_globs_see_it(tmp_path: Path) -> None:
    # ``relative_to`` writes a backslash as "/": ``tests\fixtures`` is the folder ``tests/fixtures`` names
    from lints.walk import excluded_below

    from .helpers import chdir

    for folder in ("tests\\fixtures", "pkg"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text("x = 1\n")
    with chdir(tmp_path):
        files, _ = discover(["."], exclude=("tests/fixtures",), anchor=str(tmp_path))
        assert files == ["pkg/m.py"]
        assert excluded_below("tests\\fixtures/m.py", ".", ("tests/fixtures",), anchor=str(tmp_path))


def _timed_job(item: str) -> str:
    name, log = item.split("|")
    with open(log, "a") as handle:
        handle.write(name + "\n")
    time.sleep(0.3)
    return name


def test_run_jobs_starts_the_largest_files_first(tmp_path: Path) -> None:
    log = tmp_path / "log"
    sizes = [1, 5, 2, 90, 3, 80, 4]
    items = [f"f{i}|{log}" for i in range(len(sizes))]
    out = run_jobs(_timed_job, items, 2, weight=lambda item: sizes[int(item.split("|")[0][1:])])
    assert out == [f"f{i}" for i in range(len(sizes))]  # input order
    started = log.read_text().split()
    assert set(started[:2]) == {"f3", "f5"}, started  # the two biggest, one per worker
    assert sorted(started) == sorted(out)


def test_run_jobs_weighs_paths_by_size(tmp_path: Path) -> None:
    paths = []
    for i, size in enumerate([10, 5000, 20, 4000]):
        path = tmp_path / f"f{i}.py"
        path.write_text("#" * size)
        paths.append(str(path))
    out = run_jobs(os.path.getsize, paths, 2)
    assert out == [10, 5000, 20, 4000]


# --------------------------------------------------------------------------------------------------
# 3. Writes: identity of the file, changed files, temp files, signals
# --------------------------------------------------------------------------------------------------
def test_fix_keeps_hard_links_and_the_inode(tmp_path: Path) -> None:
    path = tmp_path / "runner.py"
    path.write_text(SGLANG_IN)
    other = tmp_path / "linked.py.orig"
    os.link(path, other)
    inode = path.stat().st_ino
    proc = run("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert path.read_text() == SGLANG_OUT and other.read_text() == SGLANG_OUT
    assert path.stat().st_ino == inode == other.stat().st_ino and path.stat().st_nlink == 2
    assert not list(tmp_path.glob(TEMP_GLOB))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_fix_keeps_owner_group_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "runner.py"
    path.write_text(SGLANG_IN)
    os.chown(path, 4321, 8765)
    path.chmod(0o640)
    proc = run("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 8765, 0o640)
    assert path.read_text() == SGLANG_OUT


def test_write_file_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_bytes(b"edited meanwhile\n")
    with pytest.raises(FileChangedError):
        write_file(str(path), b"new\n", expected=b"old\n")
    os.link(path, tmp_path / "y.py")  # the in-place path checks too
    with pytest.raises(FileChangedError):
        write_file(str(path), b"new\n", expected=b"old\n")
    assert path.read_bytes() == b"edited meanwhile\n"
    assert write_file(str(path), b"new\n", expected=b"edited meanwhile\n") == "in-place"
    assert (tmp_path / "y.py").read_bytes() == b"new\n"
    os.unlink(tmp_path / "y.py")
    assert write_file(str(path), b"newer\n", expected=b"new\n") == "replace"
    assert path.read_bytes() == b"newer\n"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.slow
def test_stale_temp_files_are_swept_from_folders_the_codemod_writes_to(tmp_path: Path) -> None:
    (tmp_path / "runner.py").write_text(SGLANG_IN)
    dead = tmp_path / f".gradmode-{_dead_pid()}-k1ll3d.tmp"  # what a SIGKILL mid-write leaves
    old = tmp_path / ".gradmode-abc_1234.tmp"  # older naming, an hour old
    live = tmp_path / f".gradmode-{os.getpid()}-inflight.tmp"  # another live run is writing it
    other = tmp_path / ".gradmode-notes.txt"
    for path in (dead, old, live, other):
        path.write_text("partial")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    proc = run("lints.codemod", str(tmp_path), "--check", cwd=tmp_path)
    assert proc.returncode == 1 and dead.exists(), proc.stderr  # --check writes nothing, removes nothing
    proc = run("lints.codemod", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not dead.exists() and not old.exists()
    assert live.exists() and other.exists()
    # Seen from this process, whose pid it names but which is not writing it, it is abandoned.
    assert sweep_stale_temps(str(tmp_path)) == [str(live)]


def _fixable_tree(root: Path, folders: int, per_folder: int) -> list[Path]:
    paths = []
    for f in range(folders):
        folder = root / f"pkg{f}"
        folder.mkdir(parents=True)
        for i in range(per_folder):
            path = folder / f"runner_{i:03d}.py"
            path.write_text(SGLANG_IN)
            paths.append(path)
    return paths


def _state(paths: list[Path]) -> tuple[int, int]:
    """(fixed, original) counts; fails on any other content (a half-written file)."""
    fixed = original = 0
    for path in paths:
        data = path.read_text()
        if data == SGLANG_OUT:
            fixed += 1
        else:
            assert data == SGLANG_IN, f"{path} is neither the original nor the fixed file:\n{data}"
            original += 1
    return fixed, original


def _start_and_wait_for_writes(root: Path, paths: list[Path], jobs: str, writes: int,
                               **popen) -> subprocess.Popen:
    # A shell running the suite in the background hands its children SIGINT ignored, which the codemod
    # respects (as under nohup); the test is about the handler, so the child starts with the default.
    popen.setdefault("preexec_fn", lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc = subprocess.Popen([sys.executable, "-m", "lints.codemod", str(root), "--jobs", jobs, "-q"], cwd=root,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if sum(1 for p in paths if p.stat().st_size != len(SGLANG_IN)) >= writes:
            return proc
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"the codemod wrote nothing in time: {proc.communicate()}")


@pytest.mark.parametrize("signum, jobs", [(signal.SIGTERM, "2"), (signal.SIGINT, "2"), (signal.SIGTERM, "1")],
                         ids=["SIGTERM-jobs2", "SIGINT-jobs2", "SIGTERM-jobs1"])
def test_sigterm_and_sigint_stop_the_codemod_cleanly(tmp_path: Path, signum: int, jobs: str) -> None:
    paths = _fixable_tree(tmp_path, 4, 15)
    proc = _start_and_wait_for_writes(tmp_path, paths, jobs, 2)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    assert not list(tmp_path.rglob(TEMP_GLOB))
    fixed, original = _state(paths)
    assert fixed >= 2 and original > 0, (fixed, original)  # it stopped mid-run


@pytest.mark.slow
def test_sigkill_leaves_whole_files_and_the_next_run_sweeps_its_temp_files(tmp_path: Path) -> None:
    paths = _fixable_tree(tmp_path, 3, 8)
    proc = _start_and_wait_for_writes(tmp_path, paths, "2", 3, start_new_session=True)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group, workers included
    proc.communicate(timeout=60)
    fixed, original = _state(paths)
    assert original > 0, (fixed, original)
    planted = tmp_path / "pkg2" / f".gradmode-{_dead_pid()}-k1ll3d.tmp"  # as if killed mid-write there
    planted.write_text(SGLANG_OUT[:100])
    again = run("lints.codemod", str(tmp_path), "--jobs", "2", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    assert _state(paths) == (len(paths), 0)
    assert not list(tmp_path.rglob(TEMP_GLOB))


# --------------------------------------------------------------------------------------------------
# 4. Bytes libcst does not reproduce: CR-only line ends, form feeds
# --------------------------------------------------------------------------------------------------
def _codemod_one(tmp_path: Path, data: bytes) -> tuple[subprocess.CompletedProcess, bytes]:
    path = tmp_path / "runner.py"
    path.write_bytes(data)
    proc = run("lints.codemod", str(path), cwd=tmp_path)
    no_traceback(proc)
    return proc, path.read_bytes()


def test_cr_only_line_ends_are_all_kept(tmp_path: Path) -> None:
    proc, out = _codemod_one(tmp_path, SGLANG_IN.replace("\n", "\r").encode())
    assert proc.returncode == 0, proc.stderr
    assert out == SGLANG_OUT.replace("\n", "\r").encode()


@pytest.mark.parametrize("form_feed", ["\f\n", "\f", "\f\n\f"], ids=["own-line", "before-def", "both"])
def test_form_feed_before_an_unrelated_def_is_kept(tmp_path: Path, form_feed: str) -> None:
    page = "\ndef serve("
    assert SGLANG_IN.count(page) == SGLANG_OUT.count(page) == 1
    proc, out = _codemod_one(tmp_path, SGLANG_IN.replace(page, "\n" + form_feed + "def serve(").encode())
    assert proc.returncode == 0, proc.stderr
    assert out == SGLANG_OUT.replace(page, "\n" + form_feed + "def serve(").encode()


def test_form_feed_inside_the_fixed_lines_is_refused_byte_identical(tmp_path: Path) -> None:
    source = ("import torch\n\n\n\f@torch.inference_mode()\ndef warmup(model):\n    model()\n"
              "\f\ndef serve(model):\n    model()\n")
    proc, out = _codemod_one(tmp_path, source.encode())
    assert proc.returncode == 2, proc.stderr
    assert out == source.encode()
    (line,) = error_lines(proc)
    assert "line 4" in line and "form feed" in line and "left unchanged" in line, line


def test_crlf_and_mixed_files_are_unaffected(tmp_path: Path) -> None:
    proc, out = _codemod_one(tmp_path, SGLANG_IN.replace("\n", "\r\n").encode())
    assert proc.returncode == 0 and out == SGLANG_OUT.replace("\n", "\r\n").encode(), proc.stderr


# --------------------------------------------------------------------------------------------------
# 5. Multi-item with: the kept item's comment stays
# --------------------------------------------------------------------------------------------------
MULTI_ITEM = '''\
import contextlib

import torch

RAN = []


class CudaGraphRunner:
    def capture(self):
        with (contextlib.nullcontext(),  # why
              torch.inference_mode()):
            RAN.append(torch.is_inference_mode_enabled())
        with (
            contextlib.nullcontext(),  # kept: about nullcontext
            torch.inference_mode(),  # dropped with its item
        ):
            RAN.append(torch.is_inference_mode_enabled())
        with (
            torch.inference_mode()  # why inference mode was here
        ):
            RAN.append(torch.is_inference_mode_enabled())
'''


def _fix(text: str) -> str:
    """The fixed text (``text`` itself when nothing changes)."""
    new, _, error = fix_text(decode_source("runner.py", text.encode()), FixOptions(Config(), write=False))
    assert error is None, error
    return text if new is None else new


def test_multi_item_with_keeps_the_kept_items_comment() -> None:
    fixed = _fix(MULTI_ITEM)
    assert "inference_mode()" not in fixed
    assert "        with (contextlib.nullcontext()  # why\n        ):\n" in fixed, fixed
    assert ("        with (\n            contextlib.nullcontext(),  # kept: about nullcontext\n        ):\n"
            in fixed), fixed
    assert "dropped with its item" not in fixed
    assert "        # why inference mode was here\n        RAN.append" in fixed, fixed
    ast.parse(fixed)
    assert fixed != MULTI_ITEM and _fix(fixed) == fixed  # idempotent
    # Run it: before the fix every block runs in inference mode, afterwards none does.
    for text, expected in ((MULTI_ITEM, [True] * 3), (fixed, [False] * 3)):
        namespace: dict = {}
        exec(compile(text, "runner.py", "exec"), namespace)
        with torch.no_grad():
            namespace["CudaGraphRunner"]().capture()
        assert namespace["RAN"] == expected


@pytest.mark.slow
def test_multi_item_fix_through_the_codemod_runs(tmp_path: Path) -> None:
    path = tmp_path / "runner.py"
    path.write_text(MULTI_ITEM + "\nCudaGraphRunner().capture()\nprint(RAN)\n")
    proc = run("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "# why\n" in path.read_text() and "# kept: about nullcontext" in path.read_text()
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "[False, False, False]", ran.stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="zombies are read from /proc (Linux)")
def test_a_killed_but_unreaped_writer_counts_as_gone() -> None:
    from lints.child_processes import pid_alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(child.pid)  # exited, not reaped yet: its temp files may be swept
        assert os.waitpid(child.pid, os.WNOHANG)[0] == child.pid  # it really was a zombie until now
    finally:
        child.returncode = 0
