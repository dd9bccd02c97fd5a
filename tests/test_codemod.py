"""Auto-fix: `*.in.py` -> `*.out.py` pairs, idempotence, safety of writes, CLI behaviour."""
from __future__ import annotations

import shutil
import stat

import pytest

from lints.codemod import FixOptions, fix_text
from lints.config import Config
from lints.engine import analyze_text, decode_source

from .helpers import ALL_ON, FIXTURES, run_module

PAIRS = sorted(p.name[: -len(".in.py")] for p in (FIXTURES / "fix").glob("*.in.py"))


def fix_args(source: str) -> list[str]:
    first = source.splitlines()[0] if source else ""
    return first[len("# fix-args:"):].split() if first.startswith("# fix-args:") else []


def options_for(args: list[str]) -> FixOptions:
    return FixOptions(Config(), style="no_grad" if "--style" in args else "remove",
                      unsafe_fixes="--unsafe-fixes" in args, write=False)


def fixed(text: str, options: FixOptions, path: str = "x.py") -> str:
    new, _, error = fix_text(decode_source(path, text.encode()), options)
    assert error is None, error
    return text if new is None else new


@pytest.mark.parametrize("name", PAIRS)
def test_fix_pairs(name):
    source = (FIXTURES / "fix" / f"{name}.in.py").read_text()
    expected = (FIXTURES / "fix" / f"{name}.out.py").read_text()
    options = options_for(fix_args(source))
    once = fixed(source, options)
    assert once == expected
    assert fixed(once, options) == once  # idempotent


@pytest.mark.parametrize("name", PAIRS)
def test_no_fixable_gm1_left_after_fix(name):
    source = (FIXTURES / "fix" / f"{name}.in.py").read_text()
    options = options_for(fix_args(source))
    before = analyze_text(source, "x.py", options.config).hits
    after = analyze_text(fixed(source, options), "x.py", options.config).hits
    applied = [h for h in before if any(p.safe or options.unsafe_fixes for p in h.plans)]
    left = [h for h in after if h.code.startswith("GM1") and any(p.safe or options.unsafe_fixes for p in h.plans)]
    assert not left
    if applied:
        assert len([h for h in after if h.code.startswith("GM1")]) < len([h for h in before if h.code.startswith("GM1")])


def test_sglang_fix_is_exactly_the_upstream_shape():
    source = (FIXTURES / "fix" / "sglang.in.py").read_text()
    out = fixed(source, FixOptions(Config(), write=False))
    upstream = (FIXTURES / "lint" / "sglang_fixed.py").read_text()
    strip = lambda text: "\n".join(line.split("  # expect:")[0] for line in text.splitlines()[1:])  # noqa: E731
    assert strip(out) == strip(upstream)
    assert "torch.inference_mode" not in out
    assert "with run_ctx or contextlib.nullcontext():" in out
    assert analyze_text(out, "x.py", Config()).hits == []


def test_unsafe_fix_needs_flag():
    source = (FIXTURES / "fix" / "caller_side.in.py").read_text()
    safe_only = fixed(source, FixOptions(Config(), write=False))
    assert safe_only.count("with torch.inference_mode():") == 1
    everything = fixed(source, FixOptions(Config(), unsafe_fixes=True, write=False))
    assert "inference_mode" not in everything


def test_gm2_is_reported_not_rewritten():
    source = (
        "import torch\n"
        "class Moe:\n"
        "    def forward(self, x):\n"
        "        if self._ws is None:\n"
        "            self._ws = torch.empty_like(x)\n"
        "        self._ws += x\n"
    )
    new, remaining, error = fix_text(decode_source("x.py", source.encode()), FixOptions(ALL_ON, write=False))
    assert new is None and error is None
    assert [f.code for f in remaining] == ["GM201"]


# --- the command line -------------------------------------------------------------------

def write(tmp_path, name, text, mode=None):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    if mode is not None:
        path.chmod(mode)
    return path


BUGGY = (FIXTURES / "fix" / "sglang.in.py").read_text()


def test_cli_fix_writes_atomically_and_keeps_mode(tmp_path):
    path = write(tmp_path, "runner.py", BUGGY, 0o750)
    proc = run_module("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "torch.inference_mode" not in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gradmode-")]  # no temp files left
    assert "1 changed" in proc.stderr


def test_cli_check_and_diff_write_nothing(tmp_path):
    path = write(tmp_path, "runner.py", BUGGY)
    check = run_module("lints.codemod", "--check", str(path), cwd=tmp_path)
    assert check.returncode == 1
    diff = run_module("lints.codemod", "--diff", str(path), cwd=tmp_path)
    assert diff.returncode == 1  # findings would still be there: nothing was written
    assert "-        with torch.inference_mode(), autotune(True):" in diff.stdout
    assert "+        with autotune(True):" in diff.stdout
    assert path.read_text() == BUGGY


def test_diff_headers_git_style_for_relative_paths_verbatim_for_absolute(tmp_path):
    path = write(tmp_path, "runner.py", BUGGY)
    relative = run_module("lints.codemod", "--diff", "runner.py", cwd=tmp_path)
    assert "--- a/runner.py\n+++ b/runner.py\n" in relative.stdout
    absolute = run_module("lints.codemod", "--diff", str(path), cwd=tmp_path)
    assert f"--- {path}\n+++ {path}\n" in absolute.stdout


def test_cli_exit_1_when_unfixable_findings_remain(tmp_path):
    path = write(tmp_path, "start.py", (FIXTURES / "fix" / "caller_side.in.py").read_text())
    proc = run_module("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 1
    assert "GM104" in proc.stdout and "1 finding(s) left" in proc.stderr


def test_cli_bad_files_left_byte_identical(tmp_path):
    bad_syntax = write(tmp_path, "syntax.py", "import torch\ndef warmup(:\n    with torch.inference_mode(): pass\n")
    latin1 = write(tmp_path, "latin1.py", b"import torch\nx = '\xe9'\ndef warmup():\n    with torch.inference_mode(): pass\n")
    good = write(tmp_path, "good.py", BUGGY)
    before = {p: p.read_bytes() for p in (bad_syntax, latin1)}
    proc = run_module("lints.codemod", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{bad_syntax}: error: syntax error at line 2" in proc.stderr
    assert f"{latin1}: error: cannot decode" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert all(p.read_bytes() == data for p, data in before.items())
    assert "torch.inference_mode" not in good.read_text()  # the others are still fixed


def test_cli_read_only_file_reported_not_changed(tmp_path):
    path = write(tmp_path, "ro.py", BUGGY, 0o444)
    proc = run_module("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{path}: error: read-only file" in proc.stderr
    assert path.read_text() == BUGGY and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_cli_no_files_is_clean(tmp_path):
    proc = run_module("lints.codemod", cwd=tmp_path)
    assert proc.returncode == 0 and "no files" in proc.stderr


def test_cli_jobs_1_and_2_identical(tmp_path):
    trees = []
    for jobs in ("1", "2"):
        tree = tmp_path / f"tree{jobs}"
        shutil.copytree(FIXTURES / "fix", tree)
        proc = run_module("lints.codemod", "--jobs", jobs, "--diff", str(tree), cwd=tmp_path)
        trees.append((proc.returncode, proc.stdout.replace(str(tree), "TREE")))
        proc = run_module("lints.codemod", "--jobs", jobs, str(tree), cwd=tmp_path)
        trees[-1] += (proc.returncode, sorted((p.name, p.read_bytes()) for p in tree.iterdir()))
    assert trees[0] == trees[1]


def test_cli_crlf_and_bom_kept(tmp_path):
    text = "import torch\r\ndef warmup(m):\r\n    with torch.inference_mode():\r\n        m()\r\n"
    path = write(tmp_path, "crlf.py", b"\xef\xbb\xbf" + text.encode())
    proc = run_module("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert path.read_bytes() == b"\xef\xbb\xbfimport torch\r\ndef warmup(m):\r\n    m()\r\n"


def test_libcst_tool_command(tmp_path):
    path = write(tmp_path, "runner.py", BUGGY)
    root = FIXTURES.parent.parent
    proc = run_module("libcst.tool", "codemod", "codemods.gradmode.FixInferenceMode", str(path), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert path.read_text() == fixed(BUGGY, FixOptions(Config(), write=False))
    path.write_text(BUGGY)
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "codemods.gradmode.FixInferenceMode", "--style", "no_grad",
                      str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "torch.no_grad(), autotune(True)" in path.read_text()
