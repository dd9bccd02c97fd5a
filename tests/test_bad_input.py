"""Bad input: one clear line with the path, the other files still linted, exit status 2."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from lints.options import Config

from .helpers import FIXTURES, ROOT, chdir

BUGGY = FIXTURES / "lint" / "sglang_buggy.py"


@pytest.fixture
def tree(tmp_path):
    shutil.copy(BUGGY, tmp_path / "good.py")
    (tmp_path / "syntax.py").write_text("import torch\ndef warmup(:\n    with torch.inference_mode(): pass\n")
    (tmp_path / "latin1.py").write_bytes(b"import torch\n# caf\xe9\nx = 1\n")
    (tmp_path / "binary.py").write_bytes(b"import torch\x00\x01\x02")
    (tmp_path / "unreadable.py").write_text("import torch\n")
    return tmp_path


def test_each_bad_file_one_line_others_linted(tree, run, monkeypatch):
    unreadable = str(tree / "unreadable.py")
    if os.geteuid() != 0:
        os.chmod(unreadable, 0)
        proc = run("lints", ".")
        stderr = proc.stderr
        assert proc.returncode == 2
    else:  # root reads anything: make the read fail the way it does for other users
        from lints.engine import lint_project

        real_open = os.open

        def fake_open(path, *args, **kwargs):
            if str(path).endswith("unreadable.py"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", fake_open)
        with chdir(tree):
            project = lint_project(["."], Config(), jobs=1, use_cache=False)
        monkeypatch.undo()
        stderr = "\n".join(str(e) for e in project.errors) + "\n"
        assert len(project.files) == 5 and {f.path for f in project.findings} == {"good.py"}
        assert [e.path for e in project.errors] == sorted(e.path for e in project.errors)
        proc = run("lints", ".")  # the other kinds of bad input, through the real CLI
        assert proc.returncode == 2
        stderr += proc.stderr
    assert "Traceback" not in stderr
    assert "syntax.py: error: syntax error at line 2" in stderr
    assert "latin1.py: error: cannot decode" in stderr
    assert "binary.py: error: skipped: binary file (contains NUL bytes)" in stderr
    assert "unreadable.py: error: cannot read: Permission denied" in stderr
    assert "GM101" in proc.stdout  # good.py was still linted
    for name in ("syntax.py", "latin1.py", "binary.py"):
        assert sum(name in line for line in proc.stderr.splitlines() if ": error:" in line) == 1


def test_a_broken_module_does_not_hide_the_findings_of_the_others(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "warm.py").write_text("from kernels import prepare\ndef warmup(m):\n    prepare(m)\n")
    (tmp_path / "broken.py").write_text("def warmup(:\n")
    proc = run("lints", "kernels.py")
    assert proc.returncode == 1, proc.stderr  # broken.py was not asked for: it is context, not an error
    assert "kernels.py:3:10: GM101" in proc.stdout
    proc = run("lints", ".")
    assert proc.returncode == 2 and "broken.py: error: syntax error at line 1" in proc.stderr
    assert "kernels.py:3:10: GM101" in proc.stdout


def test_directory_named_like_a_module_and_broken_symlink(tmp_path, run):
    (tmp_path / "pkg.py").mkdir()
    (tmp_path / "pkg.py" / "inner.py").write_text("x = 1\n")
    os.symlink(tmp_path / "missing.py", tmp_path / "dangling.py")
    proc = run("lints", ".")
    assert proc.returncode == 2
    assert "dangling.py: error: cannot read" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_huge_file_is_skipped_with_a_message(tmp_path, run):
    (tmp_path / "huge.py").write_text("x = 1\n" * 10)
    proc = run("lints", "--max-file-size", "20", "huge.py")
    assert proc.returncode == 2
    assert "huge.py: error: skipped: 60 bytes is over the 20-byte limit" in proc.stderr


def _project_with_a_name_that_is_not_utf8(tmp_path) -> bytes:
    """A project whose one module, with a GM101 at 3:10, is named ``warm\\xff.py``; that name."""
    name = b"warm\xff.py"
    try:
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as handle:
            handle.write(b"import torch\ndef warmup(model):\n    with torch.inference_mode():\n        model()\n")
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    (tmp_path / "pyproject.toml").write_text("")
    return name


def test_a_file_name_that_is_not_utf8_is_linted_and_fixed_with_the_cache(tmp_path):
    """A name the file system gives as bytes that are not UTF-8 (it reaches Python with lone
    surrogates) is reported byte for byte, as ``ls`` shows it; the cache key used to crash on it."""
    name = _project_with_a_name_that_is_not_utf8(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADMODE_CACHE_DIR=str(tmp_path / ".cache"))
    for _ in ("cold", "from the results cache"):
        proc = subprocess.run([sys.executable, "-m", "lints", "."], cwd=tmp_path, env=env, capture_output=True,
                              timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert proc.stdout.startswith(b"warm\xff.py:3:10: GM101"), proc.stdout
    fix = subprocess.run([sys.executable, "-m", "lints.codemod", "."], cwd=tmp_path, env=env, capture_output=True,
                         timeout=300)
    assert fix.returncode == 0, fix.stderr
    fixed = (tmp_path / os.fsdecode(name)).read_text()
    assert "inference_mode" not in fixed
    called = []
    namespace: dict = {}
    exec(compile(fixed, "fixed", "exec"), namespace)  # our own fixture, fixed: it still runs
    namespace["warmup"](lambda: called.append(True))
    assert called == [True]


@pytest.mark.parametrize("tool, call", [
    ("gradmode-lint", "from lints.cli import entry; sys.argv = ['gradmode-lint', '--no-cache', '.']; entry()"),
    ("gradmode-fix", "from lints.codemod import main; sys.exit(main(['.']))"),
])
def test_a_bug_of_ours_exits_2_not_1(tmp_path, tool, call):
    """An exception that no file explains must not read as "findings" (exit 1) to a CI job."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "warm.py").write_text("import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n")
    code = ("import sys, lints.engine\n"
            "def broken(*args, **kwargs):\n    raise RuntimeError('planted')\n"
            f"lints.engine.analyse = broken\n{call}\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), GRADMODE_CACHE_DIR=str(tmp_path / ".cache")))
    assert proc.returncode == 2, proc
    assert "RuntimeError: planted" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1] == (
        f"{tool}: error: internal error (a bug in {tool}; the traceback above helps to report it)")
    assert "inference_mode" in (tmp_path / "warm.py").read_text()


def test_report_and_baseline_paths_that_cannot_be_written_are_one_error_line(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "warm.py").write_text("import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "deep.json").write_text("[" * 100000)
    for args, why in [
        (("-o", "adir"), "gradmode-lint: error: cannot write the report to adir: "),
        (("-o", "nodir/r.txt"), "gradmode-lint: error: cannot write the report to nodir/r.txt: "),
        (("--write-baseline", "adir"), "gradmode-lint: error: cannot write baseline adir: "),
        (("--write-baseline", "nodir/b.json"), "gradmode-lint: error: cannot write baseline nodir/b.json: "),
        (("--baseline", "deep.json"), "gradmode-lint: error: deep.json is not a gradmode-lint baseline: "),
    ]:
        proc = run("lints", "--no-cache", *args, ".")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.stderr.splitlines()[0].startswith(why), (args, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "deep.json", "pyproject.toml", "warm.py"]


@pytest.mark.parametrize("to_file", [False, True])
def test_a_name_that_is_not_utf8_reaches_a_strict_stdout_and_a_report_file(tmp_path, to_file):
    name = _project_with_a_name_that_is_not_utf8(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")  # strict, unlike the C locale's
    args = ["-o", "report.txt"] if to_file else []
    proc = subprocess.run([sys.executable, "-m", "lints", "--no-cache", *args, "."], cwd=tmp_path, env=env,
                          capture_output=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    report = (tmp_path / "report.txt").read_bytes() if to_file else proc.stdout
    assert report.startswith(name + b":3:10: GM101"), report


@pytest.mark.parametrize("encoding", [None, "utf-8"])  # the C locale's stdin, and a strict UTF-8 one
def test_stdin_is_decoded_as_the_file_would_be(tmp_path, encoding):
    (tmp_path / "pyproject.toml").write_text("")
    latin1 = (b"# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\ndef warmup(model):\n"
              b"    with torch.inference_mode():\n        model()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONIOENCODING", None)
    if encoding:
        env["PYTHONIOENCODING"] = encoding
    # a non-ASCII character before the switch on its line: columns count characters, as in the file
    same_line = (b"# -*- coding: latin-1 -*-\nimport torch\ndef warmup(model):\n"
                 b"    x = '\xe9'; ctx = torch.inference_mode()\n    with ctx:\n        model()\n")
    (tmp_path / "same_line.py").write_bytes(same_line)
    from_file = subprocess.run([sys.executable, "-m", "lints", "--no-cache", "same_line.py"], cwd=tmp_path, env=env,
                               capture_output=True, timeout=300)
    assert from_file.stdout.startswith(b"same_line.py:4:20: GM103"), from_file.stdout
    for text, status, expected in [(latin1, 1, b"lat.py:5:10: GM101"), (same_line, 1, b"lat.py:4:20: GM103"),
                                   (b'x = "\xff"\n', 2, b"")]:
        proc = subprocess.run([sys.executable, "-m", "lints", "--no-cache", "-", "--stdin-filename", "lat.py"],
                              cwd=tmp_path, env=env, input=text, capture_output=True, timeout=300)
        assert proc.returncode == status and b"Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout.startswith(expected), proc.stdout
    assert proc.stderr.startswith(b"lat.py: error: cannot decode: not valid UTF-8"), proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_report_files_are_written_as_a_shell_redirect_writes_them(tmp_path, run):
    """-o and --write-baseline write through a link to its file, keep a file's mode and hard links, write
    to a FIFO or device in place (never a regular file renamed over it), and --baseline refuses a FIFO."""
    import stat
    import threading

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "warm.py").write_text("import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n")
    report = tmp_path / "report.txt"
    report.write_text("old\n")
    report.chmod(0o644)
    os.link(report, tmp_path / "hardlink.txt")
    (tmp_path / "link.txt").symlink_to("report.txt")
    proc = run("lints", "--no-cache", "-o", "link.txt", ".")
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "link.txt").is_symlink() and report.read_text().startswith("warm.py:3:10: GM101")
    assert (tmp_path / "hardlink.txt").read_text() == report.read_text()
    assert stat.S_IMODE(report.stat().st_mode) == 0o644
    new = run("lints", "--no-cache", "-o", "new.txt", ".")
    assert new.returncode == 1 and stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o666 & ~_umask()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    to_fifo = run("lints", "--no-cache", "--write-baseline", "fifo", ".")
    reader.join(60)
    assert to_fifo.returncode == 0 and stat.S_ISFIFO(fifo.lstat().st_mode), to_fifo.stderr
    assert b'"gradmode-lint"' in received[0]
    from_fifo = run("lints", "--no-cache", "--baseline", "fifo", ".")
    assert from_fifo.returncode == 2
    assert from_fifo.stderr.splitlines()[0] == "gradmode-lint: error: cannot read baseline fifo: not a regular file"
    if os.path.exists("/dev/null"):
        assert run("lints", "--no-cache", "-o", "/dev/null", ".").returncode == 1
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    if os.geteuid() != 0:  # root writes anything
        (tmp_path / "ro.txt").write_text("keep\n")
        (tmp_path / "ro.txt").chmod(0o444)
        refused = run("lints", "--no-cache", "-o", "ro.txt", ".")
        assert refused.returncode == 2 and (tmp_path / "ro.txt").read_text() == "keep\n", refused.stderr
        locked = tmp_path / "locked"
        locked.mkdir()
        (locked / "r.txt").write_text("old\n")
        locked.chmod(0o555)
        try:
            assert run("lints", "--no-cache", "-o", "locked/r.txt", ".").returncode == 1
            assert (locked / "r.txt").read_text().startswith("warm.py:3:10: GM101")
        finally:
            locked.chmod(0o755)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
