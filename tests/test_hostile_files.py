"""What a hostile or merely unusual checkout does to finding, walking and caching files (issue 32's
files, workers and project-root items; issue 33's file walk).

A folder tree 1,000 levels deep; workers left behind by a SIGKILLed run; settings above a git checkout
that pulled its root (and cache) out of it; a cache file of 1 GiB or one that git tracks; two spellings
of one path; ``.gitignore`` and the default excludes.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lints.sources import NOT_REGULAR
from lints.walk import discover
from lints.options import DEFAULT_EXCLUDE, Config, config_from_mapping

from .helpers import FIXTURES, ROOT, cache_fact, write_cache_fact

SGLANG_IN = (FIXTURES / "fix" / "sglang.in.py").read_text()
SGLANG_OUT = (FIXTURES / "fix" / "sglang.out.py").read_text()
DEPTH = 1000


def _env(**changes: str | None) -> dict:
    """The environment of a run of ours: this checkout importable, its own cache folder unless
    ``GRADMODE_CACHE_DIR=None`` says to use the project's."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("GRADMODE_CACHE_DIR", None)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run(*args: str, cwd: Path, timeout: float = 120, **env: str | None) -> subprocess.CompletedProcess:
    """``python -m ARGS`` with a time limit (a crash or a hang fails the test, not the suite)."""
    env.setdefault("GRADMODE_CACHE_DIR", str(cwd / ".gradmode_cache_test"))
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True,
                          errors="surrogateescape", env=_env(**env), timeout=timeout)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr[-3000:]


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if ": error: " in line]


# --------------------------------------------------------------------------------------------------
# 1. A folder tree 1,000 levels deep (os.walk recurses: RecursionError on Python 3.11)
# --------------------------------------------------------------------------------------------------
def _remove_tree(top: Path) -> None:
    """``rm -r`` as a loop, each folder by a descriptor of the one above (path lookups of 1,000 parts cost
    seconds): ``shutil.rmtree`` (and so pytest's clean-up of old temp folders, in a later session)
    recurses, and a tree 1,000 levels deep exhausts the stack."""
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    names: list[str] = []  # the folder each descriptor after the first is, in the one before it
    try:
        while fds:
            inner = None
            for entry in os.scandir(fds[-1]):
                if entry.is_dir(follow_symlinks=False):
                    inner = entry.name
                    break
                os.unlink(entry.name, dir_fd=fds[-1])
            if inner is not None:
                fds.append(os.open(inner, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
                names.append(inner)
                continue
            os.close(fds.pop())
            if names:
                os.rmdir(names.pop(), dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)
    os.rmdir(top)


def _chain(top: Path, name: str, depth: int) -> str:
    """``depth`` folders ``name`` one in the other below ``top`` (by descriptors: os.makedirs recurses,
    and a path of 1,000 parts costs a lookup of each); the deepest one's path."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return os.path.join(str(top), *[name] * depth)


@pytest.fixture()
def deep_tmp(tmp_path: Path):
    """``tmp_path``, emptied at the end whatever the test did (see ``_remove_tree``)."""
    yield tmp_path
    for entry in list(tmp_path.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            _remove_tree(entry)
        else:
            entry.unlink()


@pytest.fixture()
def deep_project(deep_tmp: Path) -> Path:
    """A project with ``runner.py`` at the top and ``deep.py`` 1,000 one-letter folders below it."""
    root = deep_tmp / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "runner.py").write_text(SGLANG_IN)
    with open(os.path.join(_chain(root, "d", DEPTH), "deep.py"), "w") as handle:
        handle.write(SGLANG_IN)
    return root


def test_discover_walks_a_tree_1000_levels_deep(deep_project: Path) -> None:
    files, errors = discover([str(deep_project)], DEFAULT_EXCLUDE)
    assert errors == []
    assert [os.path.relpath(f, deep_project) for f in files] == [
        os.path.join(*["d"] * DEPTH, "deep.py"), "runner.py"]


@pytest.mark.parametrize("entry", [
    "lints-file", "lints-folder", "codemod-file",
    pytest.param("flake8-file", marks=pytest.mark.slow), pytest.param("libcst-file", marks=pytest.mark.slow)])
def test_every_entry_point_survives_a_tree_1000_levels_deep(deep_project: Path, entry: str) -> None:
    args = {"lints-file": ("lints", "runner.py", "--format", "concise"),
            "lints-folder": ("lints", ".", "--format", "concise"),
            "codemod-file": ("lints.codemod", "runner.py"),
            "flake8-file": ("flake8", "--select", "GM", "runner.py"),
            "libcst-file": ("libcst.tool", "codemod", "-x", "--no-format", "codemods.gradmode.FixInferenceMode",
                            "runner.py")}[entry]
    proc = run(*args, cwd=deep_project, timeout=180)
    no_traceback(proc)
    if entry.startswith("lints"):
        assert proc.returncode == 1, proc.stderr
        assert "runner.py:41:14: GM101" in proc.stdout
        # the walk reached the bottom: the file there is linted when the folder is given
        assert ("deep.py:41:14: GM101" in proc.stdout) == (entry == "lints-folder"), proc.stdout[-2000:]
    elif entry == "flake8-file":
        assert proc.returncode == 1, proc.stderr
        assert "runner.py:41:14: GM101" in proc.stdout, proc.stdout
    else:  # the codemod and the libcst command fix the file named
        assert proc.returncode in (0, 1), proc.stderr
        assert (deep_project / "runner.py").read_text() == SGLANG_OUT


def test_nested_projects_1000_deep_do_not_exhaust_the_stack(deep_tmp: Path) -> None:
    """A climb through nested projects (each with settings of its own) is a loop, not a recursion."""
    folder = deep_tmp / "proj"
    folder.mkdir()
    top = folder
    for _ in range(DEPTH):
        (folder / "pyproject.toml").write_text("[tool.gradmode]\nexclude = ['x']\n")
        folder = folder / "p"
        folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.gradmode]\n")
    (folder / "runner.py").write_text(SGLANG_IN)
    proc = run("lints", str(folder / "runner.py"), "--format", "concise", "--force-exclude", cwd=top)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "runner.py:41:14: GM101" in proc.stdout


# --------------------------------------------------------------------------------------------------
# 2. Workers die with their parent, and write nothing once it is gone
# --------------------------------------------------------------------------------------------------
def _processes() -> list[tuple[int, bytes, int, int]]:
    """(pid, state, parent pid, process group) of every process (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            state, ppid, pgrp = data[data.rfind(b")") + 2:].split()[:3]  # the name may hold spaces
            found.append((int(entry), state, int(ppid), int(pgrp)))
    return found


def _processes_in_group(pgid: int) -> list[int]:
    """Live processes of group ``pgid`` (a zombie holds no pipe and writes nothing)."""
    return [pid for pid, state, _, group in _processes() if group == pgid and state != b"Z"]


def _children_of(parent: int) -> list[int]:
    return [pid for pid, _, ppid, _ in _processes() if ppid == parent]


def _reaches_eof(stream, seconds: float) -> bool:
    """Whether reading ``stream`` to its end returns within ``seconds`` (every writer has closed it)."""
    done = threading.Event()

    def drain() -> None:
        stream.read()
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    return done.wait(seconds)


def _kill_run(proc: subprocess.Popen) -> None:
    """SIGKILL the run itself, not its group: its workers are left to notice."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _workers_gone(proc: subprocess.Popen, seconds: float = 5.0) -> None:
    """The killed run's workers must be gone within ``seconds``, and with them every holder of its
    stdout pipe."""
    deadline = time.monotonic() + seconds
    while _processes_in_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _processes_in_group(proc.pid)
    assert left == [], f"workers left running after the run was killed: {left}"
    assert _reaches_eof(proc.stdout, seconds), "the run's stdout never reached EOF (a worker holds it)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_codemod_workers_die_with_it_and_write_nothing_after(tmp_path: Path) -> None:
    paths = []
    for f in range(4):
        folder = tmp_path / f"pkg{f}"
        folder.mkdir()
        for i in range(15):
            paths.append(folder / f"runner_{i:03d}.py")
            paths[-1].write_text(SGLANG_IN)
    proc = subprocess.Popen([sys.executable, "-m", "lints.codemod", str(tmp_path), "--jobs", "2"], cwd=tmp_path,
                            env=_env(GRADMODE_CACHE_DIR=str(tmp_path / ".cache")), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while sum(p.read_text() == SGLANG_OUT for p in paths) < 2:  # mid-run: fixing
            assert proc.poll() is None and time.monotonic() < deadline, "the codemod wrote nothing in time"
            time.sleep(0.01)
        _kill_run(proc)
        at_kill = {p: p.read_text() for p in paths}
        _workers_gone(proc)
        after = {p: p.read_text() for p in paths}
        assert [p for p in paths if after[p] != at_kill[p]] == [], "files written after the run was killed"
        assert all(text in (SGLANG_IN, SGLANG_OUT) for text in after.values())  # each whole
        assert sum(text == SGLANG_IN for text in after.values()) > 0  # it was stopped mid-run
    finally:
        for pid in _processes_in_group(proc.pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_linter_workers_die_with_it(tmp_path: Path) -> None:
    for i in range(800):  # 1.7 MB: summarised by workers (over PARALLEL_MIN_BYTES), a few seconds of work
        (tmp_path / f"runner_{i:03d}.py").write_text(SGLANG_IN)
    proc = subprocess.Popen([sys.executable, "-m", "lints", str(tmp_path), "--jobs", "2", "--no-cache"],
                            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not _children_of(proc.pid):  # the workers are started
            assert proc.poll() is None and time.monotonic() < deadline, "no worker was started"
            time.sleep(0.005)
        _kill_run(proc)
        _workers_gone(proc)
    finally:
        for pid in _processes_in_group(proc.pid):
            os.kill(pid, signal.SIGKILL)


def test_a_worker_whose_parent_is_gone_writes_nothing(tmp_path: Path) -> None:
    """Where no parent-death signal exists, ``write_file`` itself checks, in a worker, that the process
    that started it still runs (its parent changed: it is gone), and ends the worker unwritten."""
    target = tmp_path / "runner.py"
    target.write_text(SGLANG_IN)
    script = ("import os, sys\n"
              "from lints import child_processes, writes\n"
              "child_processes._parent_pid = os.getppid() + 1  # as seen by a worker whose parent has died\n"
              "writes.write_file(sys.argv[1], b'written\\n')\n"
              "print('wrote')\n")
    proc = subprocess.run([sys.executable, "-c", script, str(target)], env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert "wrote" not in proc.stdout and proc.returncode != 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert target.read_text() == SGLANG_IN
    assert not list(tmp_path.glob(".gradmode-*.tmp"))


# --------------------------------------------------------------------------------------------------
# 3. Settings above a git checkout: they apply, but the project root and its cache stay in the checkout
# --------------------------------------------------------------------------------------------------
def _workspace(tmp_path: Path, git: str) -> Path:
    """workspace/pyproject.toml with [tool.gradmode]; two checkouts below it, each marked by a ``.git``
    folder or file; checkout ``a`` has the bug, ``b`` a serving entry of its own."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "pyproject.toml").write_text('[tool.gradmode]\nserving-grad-mode = "inference_mode"\n')
    for name in ("a", "b"):
        checkout = ws / name
        (checkout / "pkg").mkdir(parents=True)
        if git == "folder":
            (checkout / ".git").mkdir()
        else:  # a submodule's or a worktree's
            (checkout / ".git").write_text(f"gitdir: ../.git/modules/{name}\n")
        (checkout / "pkg" / "__init__.py").write_text("")
    (ws / "a" / "pkg" / "runner.py").write_text(SGLANG_IN)
    (ws / "b" / "pkg" / "other.py").write_text("import torch\n\ndef step(x):\n    return x\n")
    return ws


@pytest.mark.parametrize("git", ["folder", "file"])
def test_the_root_and_cache_stay_in_the_checkout_below_settings(tmp_path: Path, git: str) -> None:
    ws = _workspace(tmp_path, git)
    checkout = ws / "a"
    proc = run("lints", "pkg/runner.py", "--format", "json", cwd=checkout, GRADMODE_CACHE_DIR=None)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert [os.path.abspath(os.path.join(checkout, p["root"])) for p in report["projects"]] == [str(checkout)]
    assert report["serving_grad_mode"]["mode"] == "inference_mode"  # the settings above apply (as in ruff)
    assert "GM202" in {f["code"] for f in report["findings"]}
    assert (checkout / ".gradmode_cache" / "cache.sqlite3").is_file()
    assert not (ws / ".gradmode_cache").exists()
    # the workspace given: each checkout is a project of its own, as from inside it
    proc = run("lints", ".", "--format", "json", cwd=ws, GRADMODE_CACHE_DIR=None)
    assert proc.returncode == 1, proc.stderr
    roots = sorted(os.path.abspath(os.path.join(ws, p["root"])) for p in json.loads(proc.stdout)["projects"])
    assert roots == [str(ws / "a"), str(ws / "b")]
    assert not (ws / ".gradmode_cache").exists()


# --------------------------------------------------------------------------------------------------
# 4. The cache: a file bigger than the project can produce, and a folder git tracks
# --------------------------------------------------------------------------------------------------
def _peak_rss_run(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, int, float]:
    """``python -m ARGS`` run by a parent of its own: (the run, its peak RSS in KiB, its seconds)."""
    measure = ("import json, resource, subprocess, sys, time\n"
               "start = time.monotonic()\n"
               "proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "print(json.dumps([proc.returncode, proc.stdout, proc.stderr, "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - start]))\n")
    outer = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", *args], cwd=cwd,
                           capture_output=True, text=True, env=_env(), timeout=300)
    code, out, err, rss, seconds = json.loads(outer.stdout)
    return subprocess.CompletedProcess(args, code, out, err), rss, seconds


def test_a_cache_file_bigger_than_the_project_can_produce_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "runner.py").write_text(SGLANG_IN)
    (tmp_path / "helper.py").write_text("def f():\n    return 1\n")
    cache = tmp_path / ".gradmode_cache"
    cache.mkdir()
    for name in ("cache.sqlite3", "cache.sqlite3-journal"):
        with open(cache / name, "wb") as handle:
            handle.truncate(1 << 30)  # 1 GiB, sparse: costs no disk
    proc, peak_kib, seconds = _peak_rss_run(["lints", ".", "--format", "concise"], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert "runner.py:41:14: GM101" in proc.stdout
    assert peak_kib < 400 * 1024 and seconds < 30, (peak_kib, seconds)
    # treated as absent, and written again
    assert (cache / "cache.sqlite3").stat().st_size < 1 << 20


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="no git")
def test_a_cache_folder_git_tracks_is_never_read_nor_written(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "runner.py").write_text(SGLANG_IN)
    _git("init", "-q", ".", cwd=tmp_path)
    first = run("lints", "runner.py", "--format", "concise", cwd=tmp_path, GRADMODE_CACHE_DIR=None)
    assert first.returncode == 1 and "GM101" in first.stdout, first.stderr
    cache = tmp_path / ".gradmode_cache"
    planted = cache_fact(cache, "results")
    planted["findings"] = []  # the checkout ships a cache that hides the finding
    write_cache_fact(cache, "results", planted)
    _git("add", "-f", ".gradmode_cache", cwd=tmp_path)
    shipped = {p: p.read_bytes() for p in (tmp_path / ".gradmode_cache").iterdir()}
    proc = run("lints", "runner.py", "--format", "concise", cwd=tmp_path, GRADMODE_CACHE_DIR=None)
    assert proc.returncode == 1, proc.stderr
    assert "runner.py:41:14: GM101" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and ".gradmode_cache" in warnings[0] and "git" in warnings[0], proc.stderr
    assert {p: p.read_bytes() for p in (tmp_path / ".gradmode_cache").iterdir()} == shipped


# --------------------------------------------------------------------------------------------------
# 5. One spelling of a path, walked or named
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("given", [".", "fifo.py", "./fifo.py"])
def test_an_error_line_spells_the_path_one_way(tmp_path: Path, given: str) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "bad.py").write_text(SGLANG_IN)
    proc = run("lints", given, "bad.py", "--format", "concise", cwd=tmp_path, timeout=60)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc) == [f"fifo.py: error: {NOT_REGULAR}"]
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["bad.py"] * 4


def test_discover_spells_walked_paths_without_dot_slash(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "a.py").write_text("")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        files, errors = discover(["."], DEFAULT_EXCLUDE)
    finally:
        os.chdir(cwd)
    assert files == ["a.py"]
    assert [e.path for e in errors] == ["fifo.py"]


# --------------------------------------------------------------------------------------------------
# 6. .gitignore (and .git/info/exclude) respected by default; ruff's default excludes
# --------------------------------------------------------------------------------------------------
def test_ruffs_default_excludes_are_ours() -> None:
    for name in (".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
                 ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
                 ".vscode", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv"):
        assert name in DEFAULT_EXCLUDE


def _ignoring_checkout(root: Path) -> Path:
    """A checkout with the bug in pkg/, a gitignored copy in generated/, and a built copy in dist/."""
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("scratch_*.py\n")
    (root / "pyproject.toml").write_text("")
    (root / ".gitignore").write_text("# build outputs\ngenerated/\n*.gen.py\n")
    for folder in ("pkg", "generated/pkg", "dist/pkg"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
        (root / folder / "runner.py").write_text(SGLANG_IN)
    (root / "pkg" / ".gitignore").write_text("local_*.py\n!local_keep.py\n")
    for name in ("local_x.py", "local_keep.py", "scratch_1.py", "model.gen.py"):
        (root / "pkg" / name).write_text("")
    (root / "local_top.py").write_text("")  # pkg/.gitignore applies below pkg/ only
    return root


def test_discover_respects_gitignore_files(tmp_path: Path) -> None:
    root = _ignoring_checkout(tmp_path)
    files, _ = discover([str(root)], DEFAULT_EXCLUDE)
    assert sorted(os.path.relpath(f, root) for f in files) == [
        "local_top.py", "pkg/__init__.py", "pkg/local_keep.py", "pkg/runner.py"]
    # a walk that starts below the checkout's root reads the .gitignore files above it too
    files, _ = discover([str(root / "pkg")], DEFAULT_EXCLUDE)
    assert sorted(os.path.relpath(f, root) for f in files) == ["pkg/__init__.py", "pkg/local_keep.py",
                                                               "pkg/runner.py"]
    files, _ = discover([str(root)], DEFAULT_EXCLUDE, respect_gitignore=False)
    assert len(files) == 9  # all but dist/


def test_gitignore_applies_only_inside_a_checkout(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.py\n")
    (tmp_path / "a.py").write_text("")
    assert discover([str(tmp_path)], DEFAULT_EXCLUDE)[0] == [str(tmp_path / "a.py")]


def test_gitignored_and_built_copies_are_not_linted(tmp_path: Path) -> None:
    root = _ignoring_checkout(tmp_path)
    proc = run("lints", ".", "--format", "concise", cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert sorted({line.split(":")[0] for line in proc.stdout.splitlines()}) == ["pkg/runner.py"]
    # named on the command line, a gitignored file is linted (as by ruff)
    proc = run("lints", "generated/pkg/runner.py", "--format", "concise", cwd=root)
    assert proc.returncode == 1 and "generated/pkg/runner.py:41:14: GM101" in proc.stdout, proc.stderr
    # respect-gitignore = false brings the ignored copy back; dist/ stays out (exclude)
    (root / "pyproject.toml").write_text("[tool.gradmode]\nrespect-gitignore = false\n")
    proc = run("lints", ".", "--format", "concise", cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert sorted({line.split(":")[0] for line in proc.stdout.splitlines()}) == [
        "generated/pkg/runner.py", "pkg/runner.py"]


def test_respect_gitignore_setting() -> None:
    assert Config().respect_gitignore is True
    assert config_from_mapping({"respect-gitignore": False}).respect_gitignore is False
    with pytest.raises(ValueError, match="respect-gitignore must be true or false"):
        config_from_mapping({"respect-gitignore": "no"})


def test_a_gitignore_that_is_no_regular_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".gitignore")  # reading it would block
    (tmp_path / "a.py").write_text("")
    assert stat.S_ISFIFO((tmp_path / ".gitignore").stat().st_mode)
    assert discover([str(tmp_path)], DEFAULT_EXCLUDE)[0] == [str(tmp_path / "a.py")]


def test_a_gitignore_pattern_that_would_backtrack_for_ever_is_not_used(tmp_path: Path) -> None:
    """As a regular expression, `*a*a*...*b` takes seconds on one long name (exponential backtracking):
    such a pattern is left out, and the walk takes the files it would have ignored."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("*a*a*a*a*a*a*a*a*a*a*b\n" + "a/**/a/**/a/**/a/**/b\n" + "*.gen.py\n")
    names = ["a" * 200 + ".py", "a" * 100 + "b.py", "model.gen.py"]
    for name in names:
        (tmp_path / name).write_text("")
    start = time.monotonic()
    files, _ = discover([str(tmp_path)], DEFAULT_EXCLUDE)
    assert time.monotonic() - start < 5
    assert [os.path.basename(f) for f in files] == sorted(names[:2])  # the one pattern left still counts
