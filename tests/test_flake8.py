"""The flake8 plugin: the same (whole-project) findings as the CLI, flake8's noqa/select, options and
pyproject config."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from lints.options import ConfigError

from .helpers import FIXTURES, ROOT, cache_fact, cache_rows, run_module, write_package

BUGGY = FIXTURES / "lint" / "sglang_buggy.py"
HEAD = re.compile(r"(?:\./)?(?P<path>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<code>GM\d+) (?P<message>.*)")

# A package whose findings need the other modules: the helper is warm only through warm.py,
# the buffer is poisoned only through warm.py's region.
PACKAGE = {
    "pkg/pool.py":
        "import torch\n"
        "class Pool:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def acquire(self, x):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty_like(x)\n"
        "        return self._buf\n",
    "pkg/layer.py":
        "from pkg.pool import Pool\n"
        "class Layer:\n"
        "    def __init__(self):\n"
        "        self.pool = Pool()\n"
        "    def forward(self, x):\n"
        "        out = self.pool.acquire(x)\n"
        "        out.copy_(x)\n"
        "        return out\n",
    "pkg/kernels.py":
        "import torch\n"
        "def prepare(layer, x):\n"
        "    with torch.inference_mode():\n"
        "        layer(x)\n",
    "pkg/warm.py":
        "import torch\n"
        "from pkg.kernels import prepare\n"
        "from pkg.layer import Layer\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.layer = Layer()\n"
        "    def warmup(self, x):\n"
        "        prepare(self.layer, x)\n"
        "        with torch.inference_mode():\n"
        "            self.layer.forward(x)\n"
        "    def execute_model(self, x):\n"
        "        with torch.no_grad():\n"
        "            return self.layer.forward(x)\n"
        "def start(runner: Runner, x):\n"
        "    with torch.inference_mode():\n"
        "        runner.warmup(x)\n",
}


def heads(stdout: str) -> list[dict]:
    return [m.groupdict() for m in map(HEAD.match, stdout.splitlines()) if m]


def keys(stdout: str) -> set[tuple[str, int, int, str]]:
    return {(h["path"], int(h["line"]), int(h["col"]), h["code"]) for h in heads(stdout)}


def codes(proc):
    return [(h["line"], h["code"]) for h in heads(proc.stdout)]


def test_plugin_reports_same_as_cli_on_a_multi_module_package(tmp_path):
    write_package(tmp_path, PACKAGE)
    cli = run_module("lints", "--select", "GM", "--no-cache", "pkg", cwd=tmp_path)
    assert cli.returncode == 1, cli.stderr
    expected = keys(cli.stdout)
    assert {code for *_, code in expected} >= {"GM101", "GM104", "GM202"}
    assert ("pkg/kernels.py", 3, 10, "GM101") in expected  # warm only through warm.py
    proc = run_module("flake8", "--select", "GM", "pkg", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert keys(proc.stdout) == expected
    # one file at a time: still the whole project as context
    single = run_module("flake8", "--select", "GM", "pkg/kernels.py", cwd=tmp_path)
    assert keys(single.stdout) == {k for k in expected if k[0] == "pkg/kernels.py"}
    cache = tmp_path / ".gradmode_cache_test"  # run_module's cache folder
    shutil.rmtree(cache, ignore_errors=True)
    parallel = run_module("flake8", "--select", "GM", "--jobs", "2", "pkg", cwd=tmp_path)
    assert keys(parallel.stdout) == expected
    # with workers, one background analysis filled the cache (the workers waited on its lock)
    assert len(list(cache.glob("*/flake8-prefetch-*.lock"))) == 1 and len(list(cache.glob("*/cache.sqlite3"))) == 1
    # and wrote its findings for the workers, with this run's token
    (written,) = cache.glob("*/flake8-prefetch-*.json")
    token, _, found = written.read_text().partition("\n")
    assert len(token) == 32 and {os.path.relpath(path, tmp_path) for path, _ in json.loads(found)["findings"]} == \
        {path for path, *_ in expected}
    again = run_module("flake8", "--select", "GM", "--jobs", "2", "pkg", cwd=tmp_path)
    assert keys(again.stdout) == expected


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_cli_and_flake8_on_a_commits_files_share_the_cache_and_its_results(tmp_path, jobs):
    """pre-commit runs both from the top of the checkout: flake8 reads what the CLI left (the same summaries, the
    same results), and neither rewrites the other's (each run would otherwise be a cold one)."""
    write_package(tmp_path, PACKAGE)
    given = ["pkg/layer.py", "pkg/kernels.py"]
    cli = run_module("lints", *given, cwd=tmp_path)
    (cache,) = [path.parent for path in (tmp_path / ".gradmode_cache_test").glob("*/cache.sqlite3")]
    results, rows = cache_fact(cache, "results"), cache_rows(cache)
    flake8 = run_module("flake8", "--select", "GM", "--jobs", jobs, *given, cwd=tmp_path)
    assert keys(flake8.stdout) == keys(cli.stdout) and ("pkg/kernels.py", 3, 10, "GM101") in keys(cli.stdout)
    assert cache_fact(cache, "results") == results and cache_rows(cache) == rows
    assert sorted(rows) == sorted(str(path.relative_to(tmp_path)) for path in (tmp_path / "pkg").glob("*.py"))


def test_a_workers_prefetched_findings_are_this_runs_or_none(tmp_path):
    from lints.flake8_plugin import _prefetch_main, _prefetched

    write_package(tmp_path, PACKAGE)
    victim, results = tmp_path / "victim.txt", tmp_path / "found.json"
    victim.write_text("kept\n")
    results.symlink_to(victim)  # planted where the analysis writes: replaced, not written through
    cwd = os.getcwd()
    os.chdir(tmp_path)
    ready, written = os.pipe()
    try:
        assert _prefetch_main("pkg", json.dumps({}), str(results), "t" * 32, str(written)) == 0
    finally:
        os.chdir(cwd)
    assert os.read(ready, 2) == b"\n" and os.read(ready, 1) == b""  # the workers woken, the write end closed
    os.close(ready)
    assert victim.read_text() == "kept\n" and not results.is_symlink()
    found = _prefetched(str(results), "t" * 32)
    assert {os.path.relpath(p, tmp_path) for p in found} >= {"pkg/kernels.py"}
    assert all(hasattr(item, "code") for items in found.values() for item in items)
    assert _prefetched(str(results), "u" * 32) is None  # another run's
    for planted in ("[]", "t" * 32 + "\n{", "t" * 32 + '\n{"findings": 3, "errors": []}', "t" * 32 + "[]\n{}"):
        results.write_text(planted)
        assert _prefetched(str(results), "t" * 32) is None
    results.unlink()
    results.symlink_to(victim)
    assert _prefetched(str(results), "t" * 32) is None  # through a link: not read


_FORKED_PREFETCH = """
import atexit, fcntl, os, sys, time
from lints import flake8_plugin
from lints.options import Config

def slow_prefetch(*args, **kwargs):
    time.sleep(2)
    return prefetch(*args, **kwargs)

def noted_nice(increment):  # where the analysis lowers its priority: whether its findings were out by then
    with open("niced", "w") as handle:
        handle.write(str(os.path.exists("found.json")))
    return real_nice(increment)

prefetch, flake8_plugin._prefetch = flake8_plugin._prefetch, slow_prefetch
real_nice, os.nice = os.nice, noted_nice
priority, callbacks = real_nice(0), atexit._ncallbacks()
os.close(0)  # flake8 started without stdin: the lock takes descriptor 0, which the analysis points at /dev/null
lock = os.open("found.lock", os.O_RDWR | os.O_CREAT)
assert lock == 0
fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
read_end, write_end = os.pipe()
ready_end, ready_write_end = os.pipe()  # what the workers wait on
kept_stdout = os.dup(1)
os.dup2(write_end, 1)  # flake8's stdout, a pipe pre-commit reads to its end
started = flake8_plugin._forked_prefetch("pkg", Config(), "found.json", "t" * 32, lock, ready_write_end)
os.dup2(kept_stdout, 1)
os.close(write_end)
os.close(ready_write_end)
os.close(lock)
reaped_at_exit = bool(flake8_plugin._forks) and atexit._ncallbacks() == callbacks + 1
flake8_plugin._reap_forks()  # as at flake8's exit: the child that forked the analysis has ended
try:
    os.waitpid(-1, os.WNOHANG)
    zombie = True
except ChildProcessError:  # no child of ours left: the analysis runs as no process's child of flake8
    zombie = False
begun = time.monotonic()
assert os.read(read_end, 1) == b""  # the child holds no end of the pipe
ended = time.monotonic() - begun
lock = os.open("found.lock", os.O_RDONLY)
try:
    fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    held = False
except BlockingIOError:
    held = True
woken = os.read(ready_end, 1) == b"\\n" and os.path.exists("found.json")  # the workers woken once they are out
fcntl.flock(lock, fcntl.LOCK_SH)  # the child's lock: free once it is done
woken = woken and os.read(ready_end, 1) == b""  # the write end closed: the child holds none
found = flake8_plugin._prefetched("found.json", "t" * 32)
niced = open("niced").read() == "True" and real_nice(0) == priority  # the analysis's, after its findings; not ours
print(started, ended < 1, held, zombie, reaped_at_exit, niced and woken, sorted(os.path.relpath(p) for p in found))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forked analysis is Linux's")
def test_the_forked_background_analysis_keeps_the_lock_and_no_pipe_of_flake8s(tmp_path):
    """pre-commit reads flake8's output to its end: a background analysis holding that pipe would make it wait. The
    lock stays held (even on a standard stream's descriptor) until the analysis is done, and no child is left for
    flake8 to reap once the one that forked it is reaped (at exit)."""
    write_package(tmp_path, PACKAGE)
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADMODE_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _FORKED_PREFETCH], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    started, prompt, held, zombie, reaped_at_exit, niced, found = done.stdout.strip().split(" ", 6)
    assert (started, prompt, held, zombie, reaped_at_exit, niced) == ("True", "True", "True", "False", "True", "True")
    assert "pkg/kernels.py" in found


_DEFERRED_REPORTS = """
import functools, sys, time
from lints import flake8_plugin

def slow_prefetch(*args, **kwargs):
    time.sleep(1.5)  # each worker's first file is checked before the findings are known
    return prefetch(*args, **kwargs)

prefetch, flake8_plugin._prefetch = flake8_plugin._prefetch, slow_prefetch
reported = flake8_plugin.report_deferred

@functools.wraps(reported)
def logged(logical_line, filename, line_number):
    found = reported(logical_line, filename, line_number)
    if found:
        with open("deferred.log", "a") as log:
            log.write(f"{filename} {line_number}\\n")
    return found

logged.parse_options = reported.parse_options
flake8_plugin.report_deferred = logged  # before flake8 loads its entry points
from flake8.main.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="the forked analysis is Linux's, and runs beside flake8's workers only on 2 cores or more")
def test_findings_deferred_while_the_background_analysis_runs_are_reported_from_the_last_logical_line(tmp_path):
    """A worker's first file is checked by flake8 while the analysis runs; its findings come from its last logical
    line (here a statement over three lines, then a comment), at their own lines, ``# noqa`` applied: the same
    report as a run of one process, which never defers."""
    files = {**PACKAGE, "pkg/kernels.py": PACKAGE["pkg/kernels.py"] + "VALUES = (\n    1,\n)\n# the end\n\n",
             "pkg/warm.py": PACKAGE["pkg/warm.py"].replace("runner.warmup(x)\n", "runner.warmup(x)  # noqa: GM104\n")}
    write_package(tmp_path, files)
    given = ["pkg/kernels.py", "pkg/warm.py"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADMODE_CACHE_DIR=str(tmp_path / "cache"))
    deferred = subprocess.run([sys.executable, "-c", _DEFERRED_REPORTS, "--select", "GM", "--jobs", "2", *given],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert deferred.returncode == 1, deferred.stderr
    log = sorted((tmp_path / "deferred.log").read_text().splitlines())
    assert log == ["pkg/kernels.py 7", "pkg/warm.py 16"]  # the line each last statement ends on
    alone = run_module("flake8", "--select", "GM", "--jobs", "1", *given, cwd=tmp_path)
    assert sorted(deferred.stdout.splitlines()) == sorted(alone.stdout.splitlines())
    assert keys(deferred.stdout) == {("pkg/kernels.py", 3, 10, "GM101"), ("pkg/warm.py", 9, 14, "GM101")}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flake8's workers inherit the pipe where they fork")
@pytest.mark.parametrize("analysis_ends", [False, True])
def test_a_waiting_worker_is_woken_by_the_analysis_not_by_looking_again(tmp_path, monkeypatch, analysis_ends):
    """The findings written (a byte in the pipe) or the analysis gone without them (the pipe's end closed, the lock
    free): the worker reads them at once, without sleeping between looks while the analysis holds its lock."""
    import fcntl
    import threading
    import time

    from lints.flake8_plugin import GradModeChecker

    lock = tmp_path / "found.lock"
    held = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # the analysis's
    ready, written = os.pipe()
    out: list[str] = []

    pause = time.sleep  # the analysis's own; the worker's is patched below

    def analysis() -> None:
        pause(0.3)
        if analysis_ends:
            fcntl.flock(held, fcntl.LOCK_UN)
        else:
            out.append("findings")
            os.write(written, b"\n")
        os.close(written)

    def no_sleep(seconds):
        raise AssertionError("looked again after a sleep")

    monkeypatch.setattr(time, "sleep", no_sleep)
    threading.Thread(target=analysis).start()
    begun = time.monotonic()
    found = GradModeChecker._wait_for_prefetch(str(lock), lambda: out[0] if out else None, limit_s=10, ready=ready)
    assert found == (None if analysis_ends else "findings") and time.monotonic() - begun < 5
    os.close(ready)
    os.close(held)


def test_without_the_end_of_file_entry_point_a_worker_waits_for_the_findings(monkeypatch):
    """An install whose entry points predate ``report_deferred`` never calls it: nothing may be left for it."""
    from lints import flake8_plugin
    from lints.flake8_plugin import GradModeChecker

    asked = []
    monkeypatch.setattr(GradModeChecker, "enabled", True)
    monkeypatch.setattr(GradModeChecker, "_project_findings",
                        classmethod(lambda cls, filename, wait=True: asked.append(wait) or ({} if wait else None)))
    tree = ast.parse("x = 1\n")
    for loaded, waited in ((False, [True]), (True, [False])):
        monkeypatch.setattr(flake8_plugin, "_DEFERRED_REPORTS_LOADED", loaded)
        asked.clear()
        assert list(GradModeChecker(tree, __file__, ["x = 1\n"]).run()) == []
        assert asked == waited
        assert (__file__ in flake8_plugin._deferred) is loaded
        flake8_plugin._deferred.clear()


def test_a_worker_takes_the_findings_of_this_runs_background_analysis(tmp_path, monkeypatch):
    from lints import engine
    from lints.flake8_plugin import GradModeChecker
    from lints.model import Finding

    write_package(tmp_path, {**PACKAGE, "pyproject.toml": "[tool.gradmode]\n"})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(GradModeChecker, "_wait_for_prefetch",
                        staticmethod(lambda lock, prefetched=lambda: None, **_: prefetched()))  # the lock free
    analysed = []
    monkeypatch.setattr(engine, "lint_project", lambda *a, **k: analysed.append(a) or engine.ProjectRun(
        ".", [], [], [], None))
    kernels = os.path.abspath("pkg/kernels.py")
    sentinel = Finding(kernels, 7, 1, "GM101", "from the background analysis")
    results = tmp_path / "found.json"
    for token, written, from_file in (("t" * 32, "t" * 32, True), ("t" * 32, "u" * 32, False)):
        results.write_text(written + "\n" + json.dumps({"findings": [[kernels, sentinel.to_dict()]], "errors": []}))
        GradModeChecker._by_root, GradModeChecker._locator, GradModeChecker._named = {}, None, ["."]
        GradModeChecker._config_files, GradModeChecker._loose_folders, GradModeChecker._groups = {}, None, None
        key = GradModeChecker._analysis_of(kernels)[0]
        GradModeChecker._prefetching = {key: (str(tmp_path / "lock"), str(results), token, -1)}
        found = GradModeChecker._project_findings(kernels)
        assert (found.get(kernels) == [sentinel]) is from_file and (not analysed) is from_file
        analysed.clear()


def test_the_prefetch_lock_in_a_cache_folder_inside_a_repository_is_ignored_by_git(tmp_path):
    write_package(tmp_path, PACKAGE)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    proc = run_module("flake8", "--select", "GM", "--jobs", "2", "pkg", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert list((tmp_path / ".gradmode_cache_test").glob("*/flake8-prefetch-*.lock"))  # run_module's cache folder
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert status and not [line for line in status if ".gradmode_cache" in line], status


@pytest.mark.parametrize("own_gitignore", [False, True])
def test_a_cache_dir_that_is_the_repository_gets_no_gitignore_of_ours(tmp_path, own_gitignore):
    """$GRADMODE_CACHE_DIR is the user's folder: a `*` written there would hide every new file from git."""
    write_package(tmp_path, PACKAGE)
    if own_gitignore:
        (tmp_path / ".gitignore").write_text("*.pyc\n")  # the user's own, left as it is
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               GRADMODE_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "--jobs", "2", "pkg"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\n" if own_gitignore else not (tmp_path / ".gitignore").exists()
    assert list(tmp_path.glob("*/flake8-prefetch-*.lock"))
    (tmp_path / "new_module.py").write_text("x = 1\n")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert "?? new_module.py" in status and not [line for line in status if ".lock" in line], status


def test_a_buffer_on_stdin_is_linted_in_place_of_the_file_it_stands_for(tmp_path):
    write_package(tmp_path, PACKAGE)
    moved = "\n\n" + PACKAGE["pkg/kernels.py"]  # the editor's buffer: two lines added above the bug
    fixed = PACKAGE["pkg/kernels.py"].replace("    with torch.inference_mode():\n        layer(x)\n",
                                                 "    layer(x)\n")
    on_disk = keys(run_module("flake8", "--select", "GM", "pkg/kernels.py", cwd=tmp_path).stdout)
    assert ("pkg/kernels.py", 3, 10, "GM101") in on_disk
    for buffer in (moved, fixed):
        cli = run_module("lints", "--select", "GM", "--stdin-filename", "pkg/kernels.py", "-", cwd=tmp_path,
                         input=buffer)
        proc = run_module("flake8", "--select", "GM", "--stdin-display-name", "pkg/kernels.py", "-",
                          cwd=tmp_path, input=buffer)
        assert keys(proc.stdout) == keys(cli.stdout), proc.stdout + proc.stderr
    assert ("pkg/kernels.py", 5, 10, "GM101") in keys(run_module(
        "flake8", "--select", "GM", "--stdin-display-name", "pkg/kernels.py", "-", cwd=tmp_path, input=moved).stdout)


def test_a_buffer_on_stdin_in_a_project_with_broken_settings_gets_one_error_line(tmp_path):
    write_package(tmp_path, PACKAGE)
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\nserving-grad-mode = 3\n")
    proc = run_module("flake8", "--select", "GM", "--stdin-display-name", "pkg/kernels.py", "-", cwd=tmp_path,
                      input=PACKAGE["pkg/kernels.py"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pkg/kernels.py:1:1: GM001 ") and "serving-grad-mode" in lines[0]


def test_plugin_messages_equal_cli_messages(tmp_path):
    shutil.copy(BUGGY, tmp_path / "b.py")
    proc = run_module("flake8", "--select", "GM", "b.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    cli = run_module("lints", "--select", "GM", "b.py", cwd=tmp_path)
    # the plugin analyses the project by absolute path: its messages may spell other files' paths so
    strip = lambda h: dict(h, message=h["message"].removesuffix(" [*]").removesuffix(" [unsafe fix]")  # noqa: E731
                           .replace(f"{tmp_path}/", ""))
    assert [strip(h) for h in heads(proc.stdout)] == [strip(h) for h in heads(cli.stdout)]


def test_default_selection_keeps_opt_in_off(tmp_path):
    shutil.copy(BUGGY, tmp_path / "b.py")
    proc = run_module("flake8", "--extend-ignore", "E,W", "b.py", cwd=tmp_path)
    assert sorted({c for _, c in codes(proc)}) == ["GM101", "GM103", "GM202"]
    proc = run_module("flake8", "--extend-ignore", "E,W", "--extend-select", "GM201", "b.py", cwd=tmp_path)
    assert "GM201" in {c for _, c in codes(proc)}


def test_noqa_and_options(tmp_path):
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "def prime(m):\n"
        "    with torch.inference_mode():  # noqa: GM101\n"
        "        m()\n"
        "    with torch.inference_mode():\n"
        "        m()\n"
    )
    assert run_module("flake8", "--select", "GM", "a.py", cwd=tmp_path).stdout == ""
    proc = run_module("flake8", "--select", "GM", "--gradmode-extend-path-patterns", "prime", "a.py", cwd=tmp_path)
    assert codes(proc) == [("5", "GM101")]
    proc = run_module("flake8", "--select", "GM", "--disable-noqa", "--gradmode-path-patterns", "prime",
                      "a.py", cwd=tmp_path)
    assert codes(proc) == [("3", "GM101"), ("5", "GM101")]


def test_pyproject_read_and_flake8_options_override(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\nextend-path-patterns = ['prime']\n")
    (tmp_path / "a.py").write_text("import torch\ndef prime(m):\n    with torch.inference_mode():\n        m()\n")
    assert codes(run_module("flake8", "--select", "GM", "a.py", cwd=tmp_path)) == [("3", "GM101")]
    proc = run_module("flake8", "--select", "GM", "--gradmode-serving-grad-mode", "inference_mode", "a.py",
                      cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""
    (tmp_path / "setup.cfg").write_text("[flake8]\ngradmode-serving-grad-mode = inference_mode\n")
    assert run_module("flake8", "--select", "GM", "a.py", cwd=tmp_path).stdout == ""


def test_entry_grad_mode_option(tmp_path):
    """flake8's --gradmode-entry-grad-mode (and its setup.cfg key): how a host calls what no code here calls."""
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    (tmp_path / "a.py").write_text(
        "import torch\nclass Layer:\n    def generate(self, x):\n        if self._cache is None:\n"
        "            self._cache = torch.zeros_like(x)\n        return self._cache + x\n"
        "    def update(self, x):\n        with torch.inference_mode(False):\n            self._cache.copy_(x)\n")
    assert run_module("flake8", "--select", "GM202", "a.py", cwd=tmp_path).stdout == ""
    proc = run_module("flake8", "--select", "GM202", "--gradmode-entry-grad-mode", "inference_mode", "a.py",
                      cwd=tmp_path)
    assert codes(proc) == [("5", "GM202")]
    (tmp_path / "setup.cfg").write_text("[flake8]\ngradmode-entry-grad-mode = inference_mode\n")
    assert codes(run_module("flake8", "--select", "GM202", "a.py", cwd=tmp_path)) == [("5", "GM202")]
    (tmp_path / "setup.cfg").write_text("[flake8]\ngradmode-entry-grad-mode = eager\n")
    bad = run_module("flake8", "--select", "GM001,GM202", "a.py", cwd=tmp_path)
    assert bad.stdout.startswith("a.py:1:1: GM001 ") and "entry-grad-mode must be one of" in bad.stdout, bad.stdout


def test_plugin_is_registered():
    proc = run_module("flake8", "--version")
    assert "gradmode-lint" in proc.stdout, proc.stdout
    assert sys.version_info >= (3, 9)


def test_a_file_named_through_a_symlinked_folder_is_analysed(tmp_path):
    """The walk does not follow symlinked folders; a file flake8 is given through one used to get no
    finding at all (the CLI lints it). Named, it is linted also where ``exclude`` matches it, as the CLI
    does (``exclude`` is for what a walk finds)."""
    write_package(tmp_path / "ext", {"sub/w.py": "import torch\ndef warmup(model):\n"
                                                "    with torch.inference_mode():\n        model()\n"})
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    (root / "linked").symlink_to(tmp_path / "ext" / "sub", target_is_directory=True)
    proc = run_module("flake8", "--select", "GM", "linked/w.py", cwd=root)
    assert [m.group("code") for m in map(HEAD.match, proc.stdout.splitlines()) if m] == ["GM101"], proc
    (root / "pyproject.toml").write_text('[tool.gradmode]\nexclude = ["linked"]\n')
    for args in (["flake8", "--select", "GM"], ["lints", "--format", "concise"]):
        proc = run_module(*args, "linked/w.py", cwd=root)
        assert [m.group("code") for m in map(HEAD.match, proc.stdout.splitlines()) if m] == ["GM101"], proc
    assert run_module("flake8", "--select", "GM", ".", cwd=root).stdout == ""  # walked: not followed


WARM_LOOSE = "import torch\ndef warmup(model):\n    with torch.inference_mode():\n        model()\n"
SERVE_LOOSE = "import torch\n@torch.inference_mode()\ndef serve(model):\n    return model()\n"


def _loose_folder(tmp_path):
    """No project marker or package: warm.py's inference mode mismatches serving only when serve.py,
    which serves under inference mode, is not part of its project."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    (folder / "warm.py").write_text(WARM_LOOSE)
    (folder / "serve.py").write_text(SERVE_LOOSE)
    return folder


@pytest.mark.parametrize("args, found", [(["warm.py"], ["GM101"]), (["warm.py", "serve.py"], []), (["."], []),
                                         (["-j", "2", "warm.py"], ["GM101"]), (["-j", "2", "."], [])])
def test_plugin_outside_any_project_agrees_with_the_cli(tmp_path, args, found):
    """A file given outside any project is linted alone (with the other files given beside it), a folder
    given is its own project: in flake8 as in the CLI, and no folder is walked for a lone file."""
    folder = _loose_folder(tmp_path)
    flake8 = run_module("flake8", "--select", "GM", *args, cwd=folder)
    cli = run_module("lints", "--format", "concise", *[a for a in args if a not in ("-j", "2")], cwd=folder)
    assert [h["code"] for h in heads(flake8.stdout)] == found, flake8
    assert [h["code"] for h in heads(cli.stdout)] == found, cli


def _without_cache_env(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_without_a_gm_code_selected_analyses_nothing(tmp_path, jobs):
    """flake8 runs every installed plugin whatever --select says: with no GM code selected the plugin
    makes no analysis (pre-commit's flake8 hook for E,F,W pays none), and with one it reports the bug."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("")
    (folder / "warm.py").write_text(WARM_LOOSE)
    off = _without_cache_env("flake8", "-j", jobs, "--select", "E,F,W", "warm.py", cwd=folder)
    assert "E302" in off.stdout and heads(off.stdout) == [], off
    assert not (folder / ".gradmode_cache").exists()
    on = _without_cache_env("flake8", "-j", jobs, "--select", "E,F,W,GM", "warm.py", cwd=folder)
    assert "E302" in on.stdout and [h["code"] for h in heads(on.stdout)] == ["GM101"], on
    assert (folder / ".gradmode_cache").is_dir()


def test_flake8_in_parallel_does_not_prefetch_a_lone_files_folder(tmp_path):
    folder = _loose_folder(tmp_path)
    proc = _without_cache_env("flake8", "-j", "2", "--select", "GM", "warm.py", cwd=folder)
    assert [h["code"] for h in heads(proc.stdout)] == ["GM101"], proc
    assert not (folder / ".gradmode_cache").exists()


@pytest.mark.parametrize("setup, args, found", [
    # a loose file and a folder elsewhere, in both orders: the file stays alone, whatever comes first
    ({"a/warm.py": WARM_LOOSE, "a/serve.py": SERVE_LOOSE, "empty/e.py": "x = 1\n"}, ["a/warm.py", "empty"],
     [("a/warm.py", "GM101")]),
    ({"a/warm.py": WARM_LOOSE, "a/serve.py": SERVE_LOOSE, "empty/e.py": "x = 1\n"}, ["empty", "a/warm.py"],
     [("a/warm.py", "GM101")]),
    # loose files of two folders are two projects
    ({"a/warm.py": WARM_LOOSE, "b/serve.py": SERVE_LOOSE}, ["a/warm.py", "b/serve.py"], [("a/warm.py", "GM101")]),
    # one module per file, however it is spelt
    ({"a/warm.py": WARM_LOOSE}, ["a/warm.py", "ABS/a/warm.py"], [("a/warm.py", "GM101")]),
    # what a loose file imports from its folder is what Python runs with it
    ({"a/warm.py": "from serve import serve\n" + WARM_LOOSE, "a/serve.py": SERVE_LOOSE}, ["a/warm.py"], []),
    ({"a/warm.py": "import tools.serving\n" + WARM_LOOSE, "a/tools/serving.py": SERVE_LOOSE}, ["a/warm.py"], []),
    # other markers of a project's root
    ({"a/warm.py": WARM_LOOSE, "a/serve.py": SERVE_LOOSE, "a/setup.py": ""}, ["a/warm.py"], []),
    ({"a/warm.py": WARM_LOOSE, "a/serve.py": SERVE_LOOSE, "a/.hg/x": ""}, ["a/warm.py"], []),
    # a file given inside a folder given is analysed once, with that folder, whatever its own project
    ({"top.py": "x = 1\n", "proj/pyproject.toml": "", "proj/x.py": WARM_LOOSE}, [".", "proj/x.py"],
     [("proj/x.py", "GM101")]),
    ({"top.py": "x = 1\n", "proj/pyproject.toml": "", "proj/x.py": WARM_LOOSE}, ["proj/x.py", "."],
     [("proj/x.py", "GM101")]),
    # a loose script and the package beside it that it imports: one project
    ({"main.py": "from sub.x import run\ndef warmup(model):\n    run(model)\n", "sub/__init__.py": "",
      "sub/x.py": WARM_LOOSE.replace("warmup", "run")}, ["main.py", "sub/x.py"], [("sub/x.py", "GM101")]),
    ({"main.py": "from sub.x import run\ndef warmup(model):\n    run(model)\n", "sub/__init__.py": "",
      "sub/x.py": WARM_LOOSE.replace("warmup", "run")}, ["sub/x.py", "main.py"], [("sub/x.py", "GM101")]),
    ({"main.py": "from sub.x import run\ndef warmup(model):\n    run(model)\n", "sub/__init__.py": "",
      "sub/x.py": WARM_LOOSE.replace("warmup", "run")}, ["main.py", "sub"], [("sub/x.py", "GM101")]),
    ({"main.py": "from sub.x import run\ndef warmup(model):\n    run(model)\n", "sub/__init__.py": "",
      "sub/x.py": WARM_LOOSE.replace("warmup", "run")}, ["."], [("sub/x.py", "GM101")]),
    # relative imports inside a package a loose script imports are followed
    ({"main.py": "from pkg import serve\n" + WARM_LOOSE, "pkg/__init__.py": "from .server import serve\n",
      "pkg/server.py": SERVE_LOOSE}, ["main.py"], []),
    # a package without a marker is analysed with the scripts beside it that import it
    ({"pkg/__init__.py": "", "pkg/w.py": WARM_LOOSE, "s.py": "from pkg.w import warmup\n" + SERVE_LOOSE},
     ["pkg/w.py"], []),
    # a package folder given beside a loose file does not take the file's run over, in either order
    ({"main.py": WARM_LOOSE, "other.py": "from main import warmup\n" + SERVE_LOOSE, "pkg/__init__.py": ""},
     ["main.py", "pkg"], []),
    ({"main.py": WARM_LOOSE, "other.py": "from main import warmup\n" + SERVE_LOOSE, "pkg/__init__.py": ""},
     ["pkg", "main.py"], []),
    # two packages without a marker, given together: each whole, the same findings in either order
    ({"pkg/__init__.py": "", "pkg/a.py": WARM_LOOSE, "pkg2/__init__.py": "", "pkg2/s.py": SERVE_LOOSE,
      "pkg2/b.py": "x = 1\n"}, ["pkg/a.py", "pkg2/b.py"], []),
    ({"pkg/__init__.py": "", "pkg/a.py": WARM_LOOSE, "pkg2/__init__.py": "", "pkg2/s.py": SERVE_LOOSE,
      "pkg2/b.py": "x = 1\n"}, ["pkg2/b.py", "pkg/a.py"], []),
    ({"pkg/__init__.py": "", "pkg/a.py": WARM_LOOSE, "pkg2/__init__.py": "", "pkg2/s.py": SERVE_LOOSE,
      "pkg2/b.py": "x = 1\n"}, ["pkg/a.py"], [("pkg/a.py", "GM101")]),
    # a folder given that holds a whole project with a marker: analysed with that folder, in flake8 too
    ({"outer/s.py": SERVE_LOOSE, "outer/inner/pyproject.toml": "", "outer/inner/a.py": WARM_LOOSE}, ["outer"], []),
    # a file of a real project listed after a loose one is analysed with its own project
    ({"lz/warm.py": WARM_LOOSE, "proj/.git/x": "", "proj/warm.py": WARM_LOOSE, "proj/serve.py": SERVE_LOOSE},
     ["lz/warm.py", "proj/warm.py"], [("lz/warm.py", "GM101")]),
])
def test_loose_files_beside_folders_and_projects(tmp_path, setup, args, found):
    for name, text in setup.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    args = [str(tmp_path / a[4:]) if a.startswith("ABS/") else a for a in args]
    cli = _without_cache_env("lints", "--format", "concise", *args, cwd=tmp_path)
    assert sorted((os.path.relpath(h["path"], tmp_path) if os.path.isabs(h["path"]) else h["path"], h["code"])
                  for h in heads(cli.stdout)) == found, cli
    flake8 = _without_cache_env("flake8", "--select", "GM", *args, cwd=tmp_path)
    assert sorted({(os.path.relpath(h["path"], tmp_path) if os.path.isabs(h["path"]) else h["path"], h["code"])
                   for h in heads(flake8.stdout)}) == found, flake8
    assert not (tmp_path / "a" / ".gradmode_cache").exists() or (tmp_path / "a" / "setup.py").exists() or (
        tmp_path / "a" / ".hg").exists()


def test_flake8_without_paths_lints_every_file_of_a_loose_folder(tmp_path):
    """flake8 given no path checks `.`: every file of the folder, as `gradmode-lint .` does."""
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(WARM_LOOSE)
    for jobs in ("1", "2"):
        flake8 = _without_cache_env("flake8", "-j", jobs, "--select", "GM", cwd=tmp_path)
        assert sorted(os.path.basename(h["path"]) for h in heads(flake8.stdout)) == ["a.py", "b.py", "c.py"], flake8
    cli = _without_cache_env("lints", "--format", "concise", ".", cwd=tmp_path)
    assert len(heads(cli.stdout)) == 3, cli


def _tree(tmp_path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)


# svc/ is packaged by a pyproject.toml of its own; the repository's serve.py serves under inference mode
PACKAGED_SVC = {".git/x": "", "warm.py": WARM_LOOSE, "serve.py": SERVE_LOOSE, "svc/pyproject.toml": "",
                "svc/warm.py": WARM_LOOSE.replace("warmup", "warmup_svc")}


@pytest.mark.parametrize("args", [["."], ["warm.py", "svc/warm.py", "serve.py"], ["svc/warm.py", "serve.py", "warm.py"],
                                  ["svc/warm.py"], ["svc"], ["svc/warm.py", "svc"]])
def test_cli_a_package_with_its_own_pyproject_inside_a_repository_keeps_its_callers(tmp_path, args):
    """A pyproject.toml that only packages a folder of a repository does not cut that folder off from
    the repository's code: the same findings from `.` and from pre-commit's file lists, in any order,
    also when only the package's files are given (they were analysed alone: a false GM101 and a fix
    that made warmup_svc mismatch the serving code)."""
    _tree(tmp_path, PACKAGED_SVC)
    cli = _without_cache_env("lints", "--format", "concise", *args, cwd=tmp_path)
    assert cli.returncode == 0 and heads(cli.stdout) == [], cli
    diff = _without_cache_env("lints.codemod", "--diff", *args, cwd=tmp_path)
    assert diff.returncode == 0 and diff.stdout == "", diff
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", *args, cwd=tmp_path)
    assert libcst.returncode == 0, libcst
    assert (tmp_path / "svc/warm.py").read_text() == PACKAGED_SVC["svc/warm.py"]


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("args", [["."], ["svc/warm.py"], ["svc"], ["svc/warm.py", "warm.py"]])
def test_flake8_a_package_with_its_own_pyproject_inside_a_repository_keeps_its_callers(tmp_path, jobs, args):
    _tree(tmp_path, PACKAGED_SVC)
    flake8 = _without_cache_env("flake8", "-j", jobs, "--select", "GM", *args, cwd=tmp_path)
    assert flake8.returncode == 0 and heads(flake8.stdout) == [], flake8


# svc/ serves under inference mode by its own config, and keeps gen/ out; the repository does neither
OWN_CONFIG_SVC = {".git/x": "", "pyproject.toml": "[tool.gradmode]\n", "warm.py": WARM_LOOSE,
                  "svc/pyproject.toml": '[tool.gradmode]\nserving-grad-mode = "inference_mode"\nexclude = ["gen"]\n',
                  "svc/warm.py": WARM_LOOSE, "svc/gen/warm.py": WARM_LOOSE.replace("warmup", "warmup_gen"),
                  "gen/warm.py": WARM_LOOSE.replace("warmup", "warmup_top")}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_flake8_a_nested_projects_own_config_stays_its_own(tmp_path, jobs):
    """svc/ serves under inference mode by its own config; the repository's warm.py still mismatches."""
    _tree(tmp_path, OWN_CONFIG_SVC)
    flake8 = _without_cache_env("flake8", "-j", jobs, "--select", "GM", "warm.py", "gen", "svc/warm.py", cwd=tmp_path)
    assert sorted(os.path.normpath(h["path"]) for h in heads(flake8.stdout)) == ["gen/warm.py", "warm.py"], flake8


@pytest.mark.parametrize("args", [["."], ["svc", "warm.py", "gen"], ["svc/warm.py", "warm.py", "gen/warm.py"]])
def test_cli_a_folder_holding_a_project_with_its_own_config_lints_each_file_under_its_own(tmp_path, args):
    """ruff's hierarchical config also for a folder given: svc/'s files under svc/'s config (its serving
    grad mode, its exclude), the others under the repository's. `.` reported svc/warm.py and
    svc/gen/warm.py under the repository's config, and the codemod changed them."""
    _tree(tmp_path, OWN_CONFIG_SVC)
    cli = _without_cache_env("lints", "--format", "concise", *args, cwd=tmp_path)
    assert sorted(os.path.normpath(h["path"]) for h in heads(cli.stdout)) == ["gen/warm.py", "warm.py"], cli
    diff = _without_cache_env("lints.codemod", "--diff", *args, cwd=tmp_path)
    assert sorted(line[4:].split()[0] for line in diff.stdout.splitlines() if line.startswith("+++ ")) == [
        "b/gen/warm.py", "b/warm.py"], diff.stdout


def test_libcst_command_fixes_a_repository_file_given_after_a_nested_packages_file(tmp_path):
    """Both files mismatch (nothing serves under inference mode); the one in svc/ is given first, and
    the analysis of the whole repository still reports (and fixes) both."""
    _tree(tmp_path, {k: v for k, v in PACKAGED_SVC.items() if k != "serve.py"})
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", "svc/warm.py", "warm.py", cwd=tmp_path)
    assert libcst.returncode == 0, libcst
    for name in ("svc/warm.py", "warm.py"):
        assert "inference_mode" not in (tmp_path / name).read_text(), name


# a tree with settings of its own inside a repository (a release downloaded to compare, a service of
# a monorepo): analysed on its own, so the repository's serve.py says nothing of its serving code
DOWNLOADED = {".git/x": "", "serve.py": SERVE_LOOSE, "dl/pyproject.toml": "[tool.gradmode]\n", "dl/warm.py": WARM_LOOSE}


@pytest.mark.parametrize("args", [["dl"], ["dl/warm.py"], ["."], ["serve.py", "dl/warm.py"]])
def test_a_project_with_its_own_settings_inside_a_repository_is_analysed_on_its_own(tmp_path, args):
    _tree(tmp_path, DOWNLOADED)
    cli = _without_cache_env("lints", "--format", "concise", *args, cwd=tmp_path)
    assert [(os.path.normpath(h["path"]), h["code"]) for h in heads(cli.stdout)] == [("dl/warm.py", "GM101")], cli
    flake8 = _without_cache_env("flake8", "-j", "2", "--select", "GM", *args, cwd=tmp_path)
    assert [(os.path.normpath(h["path"]), h["code"]) for h in heads(flake8.stdout)] == [("dl/warm.py", "GM101")], flake8


def _reported(proc) -> list[str]:
    return sorted(os.path.normpath(h["path"]) for h in heads(proc.stdout))


def test_a_project_with_its_own_settings_does_not_decide_the_findings_of_the_project_around_it(tmp_path):
    """The other way round from DOWNLOADED: dl/'s serving code is not the repository's (the walk of
    the repository leaves dl/ out), so warm.py still mismatches."""
    _tree(tmp_path, {".git/x": "", "warm.py": WARM_LOOSE, "dl/pyproject.toml": "[tool.gradmode]\n",
                     "dl/serve.py": SERVE_LOOSE})
    for args in (["."], ["warm.py"]):
        assert _reported(_without_cache_env("lints", "--format", "concise", *args, cwd=tmp_path)) == ["warm.py"]
        assert _reported(_without_cache_env("flake8", "-j", "2", "--select", "GM", *args, cwd=tmp_path)) == ["warm.py"]


@pytest.mark.parametrize("args", [["."], ["svc"], ["svc/gen/warm.py", "warm.py"]])
def test_inside_a_project_with_its_own_settings_only_its_own_exclude_applies(tmp_path, args):
    """The repository excludes gen/; svc/ has settings of its own that do not: svc/gen/ is linted,
    as ruff applies the settings of the nearest config to each folder."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["gen"]\n', "warm.py": WARM_LOOSE,
                     "svc/pyproject.toml": "[tool.gradmode]\n", "svc/gen/warm.py": WARM_LOOSE})
    want = ["svc/gen/warm.py"] + (["warm.py"] if args != ["svc"] else [])
    assert _reported(_without_cache_env("lints", "--format", "concise", *args, cwd=tmp_path)) == want
    for jobs in ("1", "2"):
        assert _reported(_without_cache_env("flake8", "-j", jobs, "--select", "GM", *args, cwd=tmp_path)) == want


def test_command_line_exclude_is_over_an_inner_projects_exclude(tmp_path):
    _tree(tmp_path, OWN_CONFIG_SVC)
    cli = _without_cache_env("lints", "--format", "concise", "--exclude", "nothing", ".", cwd=tmp_path)
    assert _reported(cli) == ["gen/warm.py", "warm.py"], cli  # svc/gen/warm.py: serving inference mode there
    _tree(tmp_path, {"svc/pyproject.toml": '[tool.gradmode]\nexclude = ["gen"]\n'})
    cli = _without_cache_env("lints", "--format", "concise", "--exclude", "nothing", ".", cwd=tmp_path)
    assert _reported(cli) == ["gen/warm.py", "svc/gen/warm.py", "svc/warm.py", "warm.py"], cli


@pytest.mark.parametrize("front_end", [["lints"], ["lints.codemod", "--diff"]])
def test_projects_with_settings_but_no_python_files_or_unreadable_settings_do_not_stop_the_run(tmp_path, front_end):
    """Nested projects with nothing to lint gave an IndexError; a broken pyproject.toml below the folder
    given (a test fixture) stopped the whole run: now it is one error line, and the rest is linted."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": "[tool.gradmode]\n", "empty/pyproject.toml": "[tool.gradmode]\n"})
    proc = _without_cache_env(*front_end, ".", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc
    _tree(tmp_path, {"warm.py": WARM_LOOSE, "tests/fixtures/bad/pyproject.toml": "[project\n"})
    proc = _without_cache_env(*front_end, ".", cwd=tmp_path)  # over no Python file: not ours to report
    assert proc.returncode == 1 and ": error: " not in proc.stderr, proc
    _tree(tmp_path, {"tests/fixtures/bad/case.py": "x = 1\n"})
    proc = _without_cache_env(*front_end, ".", cwd=tmp_path)
    assert proc.returncode == 2 and ("GM101" in proc.stdout or "+++ b/warm.py" in proc.stdout), proc
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(os.path.join("tests", "fixtures", "bad", "pyproject.toml")), proc
    proc = _without_cache_env(*front_end, "warm.py", "tests/fixtures/bad/case.py", cwd=tmp_path)  # as pre-commit
    assert proc.returncode == 2 and ("GM101" in proc.stdout or "+++ b/warm.py" in proc.stdout), proc
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(os.path.join("tests", "fixtures", "bad", "case.py")), proc


def test_libcst_command_gives_each_project_its_own_settings(tmp_path):
    _tree(tmp_path, OWN_CONFIG_SVC)
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", ".", cwd=tmp_path)
    assert libcst.returncode == 0, libcst
    changed = sorted(name for name, text in OWN_CONFIG_SVC.items() if (tmp_path / name).read_text() != text)
    assert changed == ["gen/warm.py", "warm.py"], changed


def test_a_folder_outside_any_project_holding_one_with_its_own_settings(tmp_path):
    """proj/ serves under inference mode by its own settings: the same from flake8 -j1, -j2 and the CLI."""
    _tree(tmp_path, {"warm.py": WARM_LOOSE, "proj/warm.py": WARM_LOOSE,
                     "proj/pyproject.toml": '[tool.gradmode]\nserving-grad-mode = "inference_mode"\n'})
    assert _reported(_without_cache_env("lints", "--format", "concise", ".", cwd=tmp_path)) == ["warm.py"]
    for jobs in ("1", "2"):
        assert _reported(_without_cache_env("flake8", "-j", jobs, "--select", "GM", ".", cwd=tmp_path)) == ["warm.py"]


def test_a_link_to_a_project_with_its_own_settings_is_not_followed(tmp_path):
    """The walks never enter a symlinked folder: one to a sibling project that uses this tool was
    linted, fixed and given a cache outside the repository; one to the repository itself looped 40
    levels deep (41 findings for one file)."""
    _tree(tmp_path, {"repo/.git/x": "", "repo/a.py": WARM_LOOSE, "repo/s.py": SERVE_LOOSE,
                     "outside/pyproject.toml": "[tool.gradmode]\n", "outside/w.py": WARM_LOOSE})
    (tmp_path / "repo" / "link").symlink_to(os.path.join("..", "outside"))
    (tmp_path / "repo" / "loop").symlink_to(".")
    repo = tmp_path / "repo"
    cli = _without_cache_env("lints", "--format", "concise", ".", cwd=repo)
    assert cli.returncode == 0 and heads(cli.stdout) == [] and "in 2 file(s)" in cli.stderr, cli
    fix = _without_cache_env("lints.codemod", ".", cwd=repo)
    assert fix.returncode == 0, fix
    assert (tmp_path / "outside" / "w.py").read_text() == WARM_LOOSE
    assert sorted(os.listdir(tmp_path / "outside")) == ["pyproject.toml", "w.py"]  # no cache there either


def test_libcst_command_leaves_a_project_the_project_around_it_excludes(tmp_path):
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["vendor"]\n', "s.py": SERVE_LOOSE,
                     "vendor/pyproject.toml": "[tool.gradmode]\n", "vendor/w.py": WARM_LOOSE})
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", ".", cwd=tmp_path)
    assert libcst.returncode == 0, libcst
    assert (tmp_path / "vendor" / "w.py").read_text() == WARM_LOOSE
    assert _reported(_without_cache_env("lints", "--format", "concise", ".", cwd=tmp_path)) == []
    command = ["libcst.tool", "codemod", "-x", "--no-format", "-j1", "codemods.gradmode.FixInferenceMode"]
    above = _without_cache_env(*command, "..", cwd=tmp_path / "vendor")  # from inside, the whole repository
    assert above.returncode == 0 and (tmp_path / "vendor" / "w.py").read_text() == WARM_LOOSE, above
    named = _without_cache_env(*command, "vendor", cwd=tmp_path)  # given: as the CLI, it is fixed
    assert named.returncode == 0, named
    assert "inference_mode" not in (tmp_path / "vendor" / "w.py").read_text()


def test_libcst_command_fixes_a_file_given_that_exclude_matches(tmp_path):
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["gen"]\n', "gen/g.py": WARM_LOOSE,
                     "w.py": WARM_LOOSE})
    command = ["libcst.tool", "codemod", "-x", "--no-format", "-j1", "codemods.gradmode.FixInferenceMode"]
    walked = _without_cache_env(*command, ".", cwd=tmp_path)
    assert walked.returncode == 0 and (tmp_path / "gen" / "g.py").read_text() == WARM_LOOSE, walked
    assert "inference_mode" not in (tmp_path / "w.py").read_text()
    for given, cwd in (("gen/g.py", tmp_path), (".", tmp_path / "gen")):  # as the CLI and gradmode-fix do
        (tmp_path / "gen" / "g.py").write_text(WARM_LOOSE)
        fixed = _without_cache_env(*command, given, cwd=cwd)
        assert fixed.returncode == 0 and "inference_mode" not in (tmp_path / "gen" / "g.py").read_text(), fixed


def test_a_huge_pyproject_below_the_folder_given_is_not_parsed(tmp_path):
    """A checkout may plant one: over 1 MiB it is an unreadable config (one error line), not minutes
    of parsing on every walk."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": "[tool.gradmode]\n", "warm.py": WARM_LOOSE,
                     "sub/m.py": "x = 1\n", "sub/pyproject.toml": "k = 1\n" * 300_000})
    cli = _without_cache_env("lints", "--format", "concise", ".", cwd=tmp_path)
    assert cli.returncode == 2 and _reported(cli) == ["warm.py"], cli
    assert "sub/pyproject.toml: error: cannot read config: larger than 1 MiB" in cli.stderr, cli


def test_projects_sharing_one_cache_folder_keep_their_own_caches(tmp_path):
    """With GRADMODE_CACHE_DIR (or --cache-dir) each project's run pruned the others' summaries and
    replaced their results: a rerun of `.` with three projects reused nothing."""
    _tree(tmp_path, OWN_CONFIG_SVC)
    _tree(tmp_path, {"dl/pyproject.toml": "[tool.gradmode]\n", "dl/warm.py": WARM_LOOSE})
    cache = tmp_path.parent / f"{tmp_path.name}-shared-cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADMODE_CACHE_DIR=str(cache))
    first = subprocess.run([sys.executable, "-m", "lints", "--format", "concise", "."], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    results = sorted(cache.glob("*/cache.sqlite3"))
    assert len(results) == 3, first
    kept = [(cache_rows(p.parent), cache_fact(p.parent, "results")) for p in results]
    again = subprocess.run([sys.executable, "-m", "lints", "--format", "concise", "."], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.stdout == first.stdout and _reported(again) == ["dl/warm.py", "gen/warm.py", "warm.py"]
    # each project's summaries and results as they were (the files' stamps may be added: they are not compared)
    assert [(cache_rows(p.parent), cache_fact(p.parent, "results")) for p in results] == kept


def test_flake8_leaves_a_project_the_project_around_it_excludes(tmp_path):
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["fixtures"]\n', "warm.py": WARM_LOOSE,
                     "fixtures/good/pyproject.toml": "[tool.gradmode]\n", "fixtures/good/warm.py": WARM_LOOSE})
    assert _reported(_without_cache_env("lints", "--format", "concise", ".", cwd=tmp_path)) == ["warm.py"]
    for jobs in ("1", "2"):
        assert _reported(_without_cache_env("flake8", "-j", jobs, "--select", "GM", ".", cwd=tmp_path)) == ["warm.py"]


def test_libcst_command_fails_the_files_of_a_project_whose_settings_are_broken(tmp_path):
    """It printed the error and exited 0, as if every file had been checked."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": "[tool.gradmode]\n", "warm.py": WARM_LOOSE,
                     "sub/pyproject.toml": "[tool.gradmode]\nignore = 5\n", "sub/warm.py": WARM_LOOSE})
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", ".", cwd=tmp_path)
    assert libcst.returncode == 1 and "Failed to codemod 1 files" in libcst.stderr, libcst
    assert "ProjectConfigError: " in libcst.stderr and "sub/pyproject.toml" in libcst.stderr, libcst
    assert (tmp_path / "sub" / "warm.py").read_text() == WARM_LOOSE
    assert "inference_mode" not in (tmp_path / "warm.py").read_text()


@pytest.mark.parametrize("front_end", [["lints", "--format", "concise"], ["lints.codemod", "--diff"]])
def test_a_folder_given_whose_own_settings_are_broken_is_one_error_line(tmp_path, front_end):
    """It ended the run before the other folder given was linted; overlapping folders reported one
    broken nested config twice."""
    _tree(tmp_path, {".git/x": "", "good/pyproject.toml": "[tool.gradmode]\n", "good/warm.py": WARM_LOOSE,
                     "bad/pyproject.toml": "[tool.gradmode]\nignore = 5\n", "bad/warm.py": WARM_LOOSE,
                     "mid/pyproject.toml": "[tool.gradmode]\n", "mid/m.py": "x = 1\n",
                     "mid/inner/pyproject.toml": "[project\n", "mid/inner/m.py": "x = 1\n"})
    for order in (["good", "bad"], ["bad", "good"], ["bad/warm.py", "good"]):  # the first path's config was
        proc = _without_cache_env(*front_end, *order, cwd=tmp_path)             # checked before the run
        assert proc.returncode == 2 and ("GM101" in proc.stdout or "+++ b/good/warm.py" in proc.stdout), proc
        errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
        assert len(errors) == 1 and "bad" in errors[0] and errors[0].endswith(
            "[tool.gradmode] ignore must be a list of strings"), proc
    proc = _without_cache_env(*front_end, ".", "mid", str(tmp_path / "mid"), cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 2 and sum("inner" in line for line in errors) == 1, proc
    proc = _without_cache_env(*front_end, "bad", "mid/inner", "bad", cwd=tmp_path)  # nothing to lint: each error
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert proc.returncode == 2 and len(errors) == 2, proc
    assert "ignore must be a list" in errors[0] and "cannot read config" in errors[1], proc


def test_libcst_command_takes_each_files_settings_not_the_cwds(tmp_path):
    """The settings above the cwd filtered every file's findings: an unrelated folder's ignore kept a
    project's file from being fixed, a broken one failed it."""
    _tree(tmp_path, {"proj/.git/x": "", "proj/warm.py": WARM_LOOSE,
                     "quiet/pyproject.toml": '[tool.gradmode]\nignore = ["GM101"]\n',
                     "broken/pyproject.toml": "[tool.gradmode]\nignore = 5\n"})
    for cwd in ("quiet", "broken"):
        target = tmp_path / "proj" / "warm.py"
        target.write_text(WARM_LOOSE)
        libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                    "codemods.gradmode.FixInferenceMode", str(target), cwd=tmp_path / cwd)
        assert libcst.returncode == 0 and "inference_mode" not in target.read_text(), libcst


def test_libcst_command_options_change_the_analysis_as_the_codemods_do(tmp_path):
    """--gradmode-config and --select only filtered the findings made under each project's own
    settings: a config serving under inference mode still had warm paths fixed; --select could not
    reach past a project's own select. Now they act as `python -m lints.codemod`'s --config and --select."""
    warm = WARM_LOOSE + "@torch.inference_mode()\ndef autotune(model):\n    model()\n"
    files = {"proj/.git/x": "", "proj/pyproject.toml": '[tool.gradmode]\nselect = ["GM101"]\n', "proj/warm.py": warm}
    given = tmp_path / "serving.toml"
    given.write_text('[tool.gradmode]\nserving-grad-mode = "inference_mode"\n')
    for options, fixed in ((["--gradmode-config", str(given)], None), (["--select", "GM102"], "GM102"), ([], "GM101")):
        _tree(tmp_path, files)
        libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                    "codemods.gradmode.FixInferenceMode", *options, "proj", cwd=tmp_path)
        assert libcst.returncode == 0, libcst
        text = (tmp_path / "proj" / "warm.py").read_text()
        assert ("with torch.inference_mode()" not in text) == (fixed == "GM101"), (options, text)
        assert ("@torch.inference_mode()" not in text) == (fixed == "GM102"), (options, text)


def test_libcst_command_refuses_an_unknown_code_in_select_and_changes_nothing(tmp_path):
    _tree(tmp_path, {"proj/.git/x": "", "proj/warm.py": WARM_LOOSE})
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", "--select", "GM1O1", "proj", cwd=tmp_path)
    assert libcst.returncode != 0 and "unknown rule code(s): GM1O1" in libcst.stderr, libcst
    assert (tmp_path / "proj" / "warm.py").read_text() == WARM_LOOSE


def test_flake8_lints_what_it_is_given_as_the_cli_does(tmp_path):
    """Inside a project the project around excludes, a file the project's exclude matches, and a script not
    named *.py (pre-commit hands those to flake8): each named, the plugin reports what the CLI reports, also
    for the same text on stdin."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["svc", "app/gen"]\n',
                     "svc/pyproject.toml": "[tool.gradmode]\n", "svc/warm.py": WARM_LOOSE,
                     "app/gen/warm.py": WARM_LOOSE, "bin/serve": "#!/usr/bin/env python\n" + WARM_LOOSE})
    svc = tmp_path / "svc"
    assert _reported(_without_cache_env("lints", "--format", "concise", ".", cwd=svc)) == ["warm.py"]
    assert _reported(_without_cache_env("flake8", "--select", "GM", ".", cwd=svc)) == ["warm.py"]
    gen = tmp_path / "app" / "gen"
    for front_end in (["lints", "--format", "concise"], ["flake8", "--select", "GM"]):
        assert _reported(_without_cache_env(*front_end, "app/gen", cwd=tmp_path)) == ["app/gen/warm.py"]
        assert _reported(_without_cache_env(*front_end, cwd=gen)) == ["warm.py"], front_end  # no path: `.`
    for named in ("app/gen/warm.py", "bin/serve", "svc/warm.py"):
        assert _reported(_without_cache_env("lints", "--format", "concise", named, cwd=tmp_path)) == [named]
        assert _reported(_without_cache_env("flake8", "--select", "GM", named, cwd=tmp_path)) == [named]
        text = (tmp_path / named).read_text()
        on_stdin = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "--stdin-display-name", named,
                                   "-"], cwd=tmp_path, input=text, capture_output=True, text=True, timeout=300,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert _reported(on_stdin) == [named], on_stdin.stderr
    assert _reported(_without_cache_env("flake8", "--select", "GM", ".", cwd=tmp_path)) == []  # walked: excluded
    (tmp_path / "pyproject.toml").write_text('[tool.gradmode]\nexclude = ["svc", "app/gen"]\nforce-exclude = true\n')
    for front_end in (["lints", "--format", "concise"], ["flake8", "--select", "GM"]):
        for named in ("app/gen/warm.py", "app/gen"):
            assert _reported(_without_cache_env(*front_end, named, cwd=tmp_path)) == [], (front_end, named)
    # svc's own settings do not force; on the command line (as the pre-commit hooks give it) it holds for
    # every project, and svc is one the project around excludes
    forced = _without_cache_env("lints", "--format", "concise", "--force-exclude", "svc/warm.py", cwd=tmp_path)
    assert forced.returncode == 0 and _reported(forced) == [], forced.stdout


def test_a_nested_project_the_project_around_excludes_across_front_ends(tmp_path):
    """vendor/ is excluded by the repository; vendor/svc has settings of its own (and a packaging-only
    pyproject.toml below it). A folder given above it whose walk reaches it lints it; --force-exclude
    leaves it out from the repository, whichever of its files comes first, and lints it from inside it."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["vendor"]\n',
                     "vendor/loose.py": WARM_LOOSE, "vendor/svc/pyproject.toml": "[tool.gradmode]\n",
                     "vendor/svc/warm.py": WARM_LOOSE, "vendor/svc/plugins/foo/pyproject.toml": "[project]\nname='f'\n",
                     "vendor/svc/plugins/foo/w.py": WARM_LOOSE})
    everything = ["vendor/loose.py", "vendor/svc/plugins/foo/w.py", "vendor/svc/warm.py"]
    for front_end in (["lints", "--format", "concise"], ["flake8", "--select", "GM"]):
        assert _reported(_without_cache_env(*front_end, "vendor", cwd=tmp_path)) == everything, front_end
    forced = ["lints", "--format", "concise", "--force-exclude"]
    assert _reported(_without_cache_env(*forced, *everything[1:], cwd=tmp_path)) == []
    inside = _without_cache_env(*forced, ".", cwd=tmp_path / "vendor" / "svc")
    assert _reported(inside) == ["plugins/foo/w.py", "warm.py"], inside.stdout


def test_projects_two_levels_into_an_excluded_folder_across_front_ends(tmp_path):
    """third_party/ is excluded; third_party/mid and third_party/mid/svc have settings of their own. A
    walk from the repository reaches neither (the libcst command crashed on a file outside them); run
    from inside mid, with --force-exclude as the hooks run, svc is mid's member and is linted."""
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["third_party"]\n',
                     "app.py": WARM_LOOSE, "third_party/mid/pyproject.toml": "[tool.gradmode]\n",
                     "third_party/mid/m.py": WARM_LOOSE, "third_party/mid/svc/pyproject.toml": "[tool.gradmode]\n",
                     "third_party/mid/svc/s.py": WARM_LOOSE})
    for front_end in (["lints", "--format", "concise"], ["flake8", "--select", "GM"]):
        assert _reported(_without_cache_env(*front_end, ".", cwd=tmp_path)) == ["app.py"], front_end
    libcst = _without_cache_env("libcst.tool", "codemod", "-x", "--no-format", "-j1",
                                "codemods.gradmode.FixInferenceMode", ".", cwd=tmp_path)
    assert libcst.returncode == 0 and "Traceback" not in libcst.stderr, libcst.stderr
    assert (tmp_path / "third_party" / "mid" / "svc" / "s.py").read_text() == WARM_LOOSE
    mid = tmp_path / "third_party" / "mid"
    hook = _without_cache_env("lints", "--format", "concise", "--force-exclude", "m.py", "svc/s.py", cwd=mid)
    assert _reported(hook) == ["m.py", "svc/s.py"], hook.stdout


def test_a_project_with_broken_settings_on_the_way_does_not_open_the_excluded_folder(tmp_path):
    _tree(tmp_path, {".git/x": "", "pyproject.toml": '[tool.gradmode]\nexclude = ["third_party"]\n',
                     "app.py": WARM_LOOSE, "third_party/mid/pyproject.toml": "[tool.gradmode\n",
                     "third_party/mid/svc/pyproject.toml": "[tool.gradmode]\n", "third_party/mid/svc/s.py": WARM_LOOSE})
    for front_end in (["lints", "--format", "concise"], ["flake8", "--select", "GM"]):
        assert _reported(_without_cache_env(*front_end, ".", cwd=tmp_path)) == ["app.py"], front_end


def test_a_projects_config_is_read_once_a_run_and_afresh_by_the_next(tmp_path, monkeypatch):
    """flake8's main process reads each project's config before it forks its workers, which then take it from there
    instead of reading it again; the next run reads it afresh."""
    from types import SimpleNamespace

    from lints import flake8_plugin
    from lints.flake8_plugin import GradModeChecker

    for state in ("overrides", "explicit_config", "enabled", "_by_root", "_prefetching", "_named", "_groups",
                  "_loose_folders", "_locator", "_config_files", "_configs", "_stdin_name"):
        monkeypatch.setattr(GradModeChecker, state, getattr(GradModeChecker, state))  # as they were, afterwards
    write_package(tmp_path, {**PACKAGE, "pyproject.toml": '[tool.gradmode]\nserving-grad-mode = "no_grad"\n'})
    reads = []
    real = flake8_plugin.load_config
    monkeypatch.setattr(flake8_plugin, "load_config", lambda *a, **k: reads.append(a) or real(*a, **k))
    options = SimpleNamespace(select=["GM"], jobs=None, filenames=[])  # one job: nothing forked
    GradModeChecker.parse_options(options)
    first = GradModeChecker.config_for(str(tmp_path))
    assert GradModeChecker.config_for(str(tmp_path)) is first and len(reads) == 1
    assert first.serving_grad_mode == "no_grad"
    (tmp_path / "pyproject.toml").write_text('[tool.gradmode]\nserving-grad-mode = "inference_mode"\n')
    GradModeChecker.parse_options(options)
    assert GradModeChecker.config_for(str(tmp_path)).serving_grad_mode == "inference_mode" and len(reads) == 2
    (tmp_path / "pyproject.toml").write_text('[tool.gradmode]\nserving-grad-mode = 3\n')
    GradModeChecker.parse_options(options)
    for _ in range(2):  # an error too is read once
        with pytest.raises(ConfigError):
            GradModeChecker.config_for(str(tmp_path))
    assert len(reads) == 3


def test_the_largest_files_are_checked_first_only_where_each_given_path_is_a_file(tmp_path):
    """flake8's workers each wait at the end of their first file for the background analysis; checking the largest
    first does the most work meanwhile and leaves the smallest to even out at the end. Only a list of files is
    reordered (equal sizes keep their order); a folder, a path that is gone, or two files leave it as it is."""
    from lints.flake8_plugin import _largest_first

    for name, size in (("small.py", 10), ("big.py", 300), ("mid.py", 100), ("big_too.py", 300)):
        (tmp_path / name).write_text("x" * size)
    (tmp_path / "pkg").mkdir()
    files = [str(tmp_path / n) for n in ("small.py", "big.py", "mid.py", "big_too.py")]
    reordered = list(files)
    _largest_first(reordered)
    assert [os.path.basename(f) for f in reordered] == ["big.py", "big_too.py", "mid.py", "small.py"]
    for kept in ([*files, str(tmp_path / "pkg")], [*files, str(tmp_path / "gone.py")], files[:2]):
        before = list(kept)
        _largest_first(kept)
        assert kept == before


def test_flake8_reorders_its_files_only_where_the_background_analysis_runs(tmp_path, monkeypatch):
    """The order is changed in flake8's own list of files, in its main process, where a background analysis starts
    (several files, several jobs, a GM code on)."""
    from types import SimpleNamespace

    import flake8

    from lints.flake8_plugin import GradModeChecker

    for state in ("overrides", "explicit_config", "enabled", "_by_root", "_prefetching", "_named", "_groups",
                  "_loose_folders", "_locator", "_config_files", "_configs", "_stdin_name"):
        monkeypatch.setattr(GradModeChecker, state, getattr(GradModeChecker, state))  # as they were, afterwards
    started = []
    monkeypatch.setattr(GradModeChecker, "_start_prefetch", classmethod(lambda cls, names: started.append(names)))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    write_package(tmp_path, PACKAGE)
    monkeypatch.chdir(tmp_path)
    given = ["pkg/kernels.py", "pkg/warm.py", "pkg/pool.py"]
    by_size = sorted(given, key=lambda f: -os.path.getsize(f))
    assert by_size != given
    for select, jobs, expected in ((["E", "GM"], SimpleNamespace(is_auto=True, n_jobs=2), by_size),
                                   (["E", "F"], SimpleNamespace(is_auto=True, n_jobs=2), given),
                                   (["GM"], SimpleNamespace(is_auto=False, n_jobs=1), given)):
        options = SimpleNamespace(select=select, jobs=jobs, filenames=list(given))
        GradModeChecker.parse_options(options)
        assert options.filenames == expected, (select, jobs)
    assert started == [by_size]
    # flake8 5 reports files in the order it checks them (6 sorts its report by name): its order stays
    monkeypatch.setattr(flake8, "__version_info__", (5, 0, 4))
    options = SimpleNamespace(select=["GM"], jobs=SimpleNamespace(is_auto=True, n_jobs=2), filenames=list(given))
    GradModeChecker.parse_options(options)
    assert options.filenames == given and started[-1] == given


def test_flake8_reports_by_file_name_whatever_order_its_workers_check_the_files_in(tmp_path):
    """In parallel the plugin has flake8 check the largest file first; the report is the one a serial run (which
    keeps the order given) prints, file by file in name order."""
    write_package(tmp_path, PACKAGE)
    given = ["pkg/kernels.py", "pkg/pool.py", "pkg/warm.py", "pkg/layer.py"]
    assert sorted(given, key=lambda f: -(tmp_path / f).stat().st_size) != given
    serial, parallel = (_without_cache_env("flake8", "-j", jobs, "--select", "E,F,W,GM", *given, cwd=tmp_path).stdout
                        for jobs in ("1", "2"))
    paths = [line.split(":")[0] for line in parallel.splitlines()]
    assert parallel == serial and "GM1" in parallel and paths == sorted(paths) and len(set(paths)) > 1, parallel
