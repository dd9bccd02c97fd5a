"""Auto-fix: `*.in.py` -> `*.out.py` pairs through `python -m lints.codemod`, idempotence, the pure
`fix_text` API on the project run's findings, safety of writes, CLI behaviour."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from lints.file_fixes import FixOptions, fix_text
from lints.fix_inputs import names_imported_elsewhere
from lints.options import Config
from lints.sources import decode_source

from .helpers import ALL_ON, FIXTURES, ROOT, chdir, run_module

PAIRS = sorted(p.name[: -len(".in.py")] for p in (FIXTURES / "fix").glob("*.in.py"))


def fix_args(source: str) -> list[str]:
    first = source.splitlines()[0] if source else ""
    return first[len("# fix-args:"):].split() if first.startswith("# fix-args:") else []


def lint(folder, config=Config(), paths=(".",)):
    from lints.engine import lint_project

    with chdir(folder):
        return lint_project(list(paths), config, use_cache=False)


def fixed_in_project(folder, name: str, text: str, options: FixOptions) -> str:
    """``text`` as ``name`` in ``folder`` (alone), fixed with ``fix_text`` on the project run's findings."""
    (folder / name).write_text(text)
    run = lint(folder, options.config, [name])
    by_path = {}
    for finding in run.findings:
        by_path.setdefault(finding.path, []).append(finding)
    with chdir(folder):
        new, _, error = fix_text(decode_source(name, text.encode()),
                                 FixOptions(options.config, options.style, options.unsafe_fixes, write=False,
                                            findings=by_path, imported=names_imported_elsewhere(run, options.config)))
    assert error is None, error
    return text if new is None else new


@pytest.mark.parametrize("name", PAIRS)
def test_fix_pairs_through_the_codemod(tmp_path, name):
    source = (FIXTURES / "fix" / f"{name}.in.py").read_text()
    expected = (FIXTURES / "fix" / f"{name}.out.py").read_text()
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    proc = run_module("lints.codemod", *fix_args(source), path.name, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert path.read_text() == expected


@pytest.mark.parametrize("name", PAIRS)
def test_fix_text_gives_the_same_result_and_no_fixable_gm1_is_left(tmp_path, name):
    source = (FIXTURES / "fix" / f"{name}.in.py").read_text()
    args = fix_args(source)
    options = FixOptions(Config(), style="no_grad" if "--style" in args else "remove",
                         unsafe_fixes="--unsafe-fixes" in args, write=False)
    out = fixed_in_project(tmp_path, "x.py", source, options)
    assert out == (FIXTURES / "fix" / f"{name}.out.py").read_text()
    assert fixed_in_project(tmp_path, "x.py", out, options) == out  # idempotent
    (tmp_path / "x.py").write_text(source)
    before = lint(tmp_path, paths=["x.py"]).findings
    (tmp_path / "x.py").write_text(out)
    after = lint(tmp_path, paths=["x.py"]).findings
    applicable = {"safe"} | ({"unsafe"} if options.unsafe_fixes else set())
    assert not [f for f in after if f.code.startswith("GM1") and f.fixable in applicable], after
    gm1 = lambda found: [f for f in found if f.code.startswith("GM1")]  # noqa: E731
    if out != source:
        assert len(gm1(after)) < len(gm1(before))


def test_sglang_fix_is_exactly_the_upstream_shape(tmp_path):
    source = (FIXTURES / "fix" / "sglang.in.py").read_text()
    out = fixed_in_project(tmp_path, "runner.py", source, FixOptions(Config(), write=False))
    upstream = (FIXTURES / "lint" / "sglang_fixed.py").read_text()
    strip = lambda text: "\n".join(line.split("  # expect:")[0] for line in text.splitlines()[1:])  # noqa: E731
    assert strip(out) == strip(upstream)
    assert "torch.inference_mode" not in out
    assert "with run_ctx or contextlib.nullcontext():" in out
    (tmp_path / "runner.py").write_text(out)
    assert lint(tmp_path).findings == []


def test_unsafe_fix_needs_flag(tmp_path):
    source = (FIXTURES / "fix" / "caller_side.in.py").read_text()
    safe_only = fixed_in_project(tmp_path, "x.py", source, FixOptions(Config(), write=False))
    assert safe_only.count("with torch.inference_mode():") == 1
    everything = fixed_in_project(tmp_path, "x.py", source, FixOptions(Config(), unsafe_fixes=True, write=False))
    assert "inference_mode" not in everything


def test_fix_text_without_findings_changes_nothing():
    source = (FIXTURES / "fix" / "sglang.in.py").read_text()
    new, remaining, error = fix_text(decode_source("x.py", source.encode()),
                                     FixOptions(Config(), write=False, findings={}))
    assert (new, remaining, error) == (None, [], None)


def test_fix_text_alone_analyses_the_text_as_its_own_project():
    source = (FIXTURES / "fix" / "sglang.in.py").read_text()
    new, remaining, error = fix_text(decode_source("x.py", source.encode()), FixOptions(Config(), write=False))
    assert error is None and new == (FIXTURES / "fix" / "sglang.out.py").read_text()


def test_gm2_is_reported_not_rewritten(tmp_path):
    source = (
        "import torch\n"
        "class Moe:\n"
        "    def forward(self, x):\n"
        "        if self._ws is None:\n"
        "            self._ws = torch.empty_like(x)\n"
        "        self._ws += x\n"
    )
    (tmp_path / "x.py").write_text(source)
    run = lint(tmp_path, ALL_ON, ["x.py"])
    assert [f.code for f in run.findings] == ["GM201"]
    with chdir(tmp_path):
        new, remaining, error = fix_text(decode_source("x.py", source.encode()),
                                         FixOptions(ALL_ON, write=False, findings={"x.py": run.findings}))
    assert new is None and error is None
    assert [f.code for f in remaining] == ["GM201"]


def test_cross_module_fix_rewrites_the_helper_module(tmp_path):
    """The finding is in a module that looks clean alone: only the project analysis knows it is warm."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "warm.py").write_text("from kernels import prepare\ndef warmup(m):\n    prepare(m)\n")
    proc = run_module("lints.codemod", "kernels.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "kernels.py").read_text() == "import torch\ndef prepare(m):\n    m()\n"
    assert "1 changed" in proc.stderr


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


@pytest.mark.slow  # tests/test_conventions.py checks the same on every spelling
def test_cli_check_and_diff_write_nothing(tmp_path):
    path = write(tmp_path, "runner.py", BUGGY)
    check = run_module("lints.codemod", "--check", str(path), cwd=tmp_path)
    assert check.returncode == 1
    diff = run_module("lints.codemod", "--diff", str(path), cwd=tmp_path)
    assert diff.returncode == 1  # findings would still be there: nothing was written
    assert "-        with torch.inference_mode(), autotune(True):" in diff.stdout
    assert "+        with autotune(True):" in diff.stdout
    assert path.read_text() == BUGGY


@pytest.mark.slow  # tests/test_conventions.py checks the same on every spelling
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
    # nothing was written: every finding is left (it said "0 finding(s) left")
    found = run_module("lints", "--format", "concise", "--no-cache", str(path), cwd=tmp_path)
    count = len([line for line in found.stdout.splitlines() if " GM" in line])
    assert count and f", {count} finding(s) left" in proc.stderr, (found.stdout, proc.stderr)


def test_cli_no_path_fixes_the_current_folder(tmp_path):
    assert run_module("lints.codemod", cwd=tmp_path).returncode == 0  # an empty folder: nothing to fix
    path = write(tmp_path, "runner.py", BUGGY)
    proc = run_module("lints.codemod", cwd=tmp_path)
    assert proc.returncode == 0 and "1 changed" in proc.stderr and path.read_text() != BUGGY


@pytest.mark.slow
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
    assert trees[0][0] == 1 and trees[0][1]  # there was something to fix


def test_cli_crlf_and_bom_kept(tmp_path):
    text = "import torch\r\ndef warmup(m):\r\n    with torch.inference_mode():\r\n        m()\r\n"
    path = write(tmp_path, "crlf.py", b"\xef\xbb\xbf" + text.encode())
    proc = run_module("lints.codemod", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert path.read_bytes() == b"\xef\xbb\xbfimport torch\r\ndef warmup(m):\r\n    m()\r\n"


def test_libcst_tool_command(tmp_path):
    project = tmp_path / "project"
    path = write(project if project.mkdir() is None else project, "runner.py", BUGGY)
    expected = fixed_in_project(tmp_path, "runner.py", BUGGY, FixOptions(Config(), write=False))
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "codemods.gradmode.FixInferenceMode", "runner.py",
                      cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert path.read_text() == expected
    path.write_text(BUGGY)
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "codemods.gradmode.FixInferenceMode",
                      "--style", "no_grad", str(path), cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "torch.no_grad(), autotune(True)" in path.read_text()


def test_libcst_tool_command_sees_the_whole_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels.py").write_text(
        "import torch\ndef prepare(m):\n    with torch.inference_mode():\n        m()\n")
    (tmp_path / "warm.py").write_text("from kernels import prepare\ndef warmup(m):\n    prepare(m)\n")
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "codemods.gradmode.FixInferenceMode", ".",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "kernels.py").read_text() == "import torch\ndef prepare(m):\n    m()\n"
    assert (tmp_path / "warm.py").read_text() == "from kernels import prepare\ndef warmup(m):\n    prepare(m)\n"


# --- a file fixed once, imports other modules use, a name `contextlib` of the user's -------------

TWO_CONTEXTS = ("import torch\n"
                "def warmup(model):\n"
                "    ctx = torch.no_grad()\n"
                "    pass\n"
                "    ctx = torch.inference_mode()\n"
                "    with ctx:\n"
                "        return model()\n")


def run_warmup(text: str):
    """Exec the fixed module and call its ``warmup``: (grad mode, inference mode) the model ran under."""
    import torch

    namespace: dict = {}
    exec(compile(text, "fixed.py", "exec"), namespace)
    return namespace["warmup"](lambda: (torch.is_grad_enabled(), torch.is_inference_mode_enabled()))


@pytest.mark.parametrize("paths, link", [(["-j1", "a.py", "./a.py"], False), (["-j2", "a.py", "./a.py"], False),
                                         (["-j2", "."], True), (["-j1", "link.py", "a.py"], True)])
def test_a_file_named_twice_or_through_a_symlink_is_fixed_once(tmp_path, paths, link):
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    path = write(tmp_path, "a.py", TWO_CONTEXTS)
    if link:
        (tmp_path / "link.py").symlink_to("a.py")
    diff = run_module("lints.codemod", "--diff", *paths, cwd=tmp_path)
    assert sum(line.startswith("+++ ") for line in diff.stdout.splitlines()) == 1, diff.stdout
    proc = run_module("lints.codemod", *paths, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 changed" in proc.stderr
    fixed = path.read_text()
    assert "    ctx = torch.no_grad()\n" in fixed and "    ctx = contextlib.nullcontext()\n" in fixed
    assert run_warmup(fixed) == (True, False)
    assert not link or (tmp_path / "link.py").is_symlink()


def test_libcst_command_fixes_a_file_and_its_symlink_once(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    path = write(tmp_path, "a.py", TWO_CONTEXTS)
    (tmp_path / "link.py").symlink_to("a.py")
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "-j1", "codemods.gradmode.FixInferenceMode", ".",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fixed = path.read_text()
    assert "    ctx = torch.no_grad()\n" in fixed and run_warmup(fixed) == (True, False)


UTILS = ("from torch import inference_mode\n"
         "from torch import inference_mode as unused_before\n"
         "def warmup(model):\n"
         "    with inference_mode():\n"
         "        return model()\n")


@pytest.mark.parametrize("utils, importer", [
    ("utils.py", "from utils import inference_mode\n"),
    ("utils.py", "import utils\nim = utils.inference_mode\n"),
    ("pkg/utils.py", "from .utils import inference_mode\n"),
    ("pkg/__init__.py", ""),
])
def test_fix_keeps_an_import_other_modules_may_use(tmp_path, utils, importer):
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    write(tmp_path, utils, UTILS)
    write(tmp_path, "pkg/other.py" if utils.startswith("pkg/") else "other.py", importer)
    proc = run_module("lints.codemod", ".", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fixed = (tmp_path / utils).read_text()
    assert fixed == UTILS.replace("    with inference_mode():\n        return model()\n", "    return model()\n")
    module = "pkg" if utils == "pkg/__init__.py" else utils[:-3].replace("/", ".")
    other = "pkg.other" if utils.startswith("pkg/") else "other"
    check = subprocess.run([sys.executable, "-c", f"import {other}, {module} as m; "
                            "import torch; assert not m.warmup(torch.is_inference_mode_enabled)"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_fix_removes_only_the_import_it_made_unused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    path = write(tmp_path, "utils.py", UTILS)
    proc = run_module("lints.codemod", ".", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fixed = path.read_text()
    assert fixed == "from torch import inference_mode as unused_before\ndef warmup(model):\n    return model()\n"
    assert run_warmup(fixed) == (True, False)


@pytest.mark.parametrize("binding, param", [
    ("contextlib = 5\n", ""), ("", ", contextlib=None"), ("import os as contextlib\n", ""),
    ("def contextlib():\n    pass\n", ""), ("for contextlib in ():\n    pass\n", ""),
    ("def bind():\n    global contextlib\n    contextlib = 1\n", ""),
])
def test_no_null_context_fix_where_contextlib_is_something_else(tmp_path, binding, param):
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    source = (f"import torch\n{binding}"
              f"def warmup(model{param}):\n    c = torch.inference_mode()\n    with c:\n        return model()\n"
              "def autotune(model):\n    with torch.inference_mode():\n        model()\n")
    path = write(tmp_path, "a.py", source)
    check = run_module("lints.codemod", "--diff", "a.py", cwd=tmp_path)
    assert check.returncode == 1 and "contextlib.nullcontext" not in check.stdout
    assert "GM103" in check.stderr and "1 finding(s) left" in check.stderr  # stdout: the patch alone
    proc = run_module("lints.codemod", "a.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "GM103" in proc.stdout and "1 finding(s) left" in proc.stderr
    fixed = path.read_text()
    assert fixed == source.replace("    with torch.inference_mode():\n        model()\n", "    model()\n")
    import torch

    namespace: dict = {}
    exec(compile(fixed, "fixed.py", "exec"), namespace)
    seen: list = []
    namespace["autotune"](lambda: seen.append(torch.is_inference_mode_enabled()))
    assert namespace["warmup"](lambda: "ran") == "ran" and seen == [False]


@pytest.mark.parametrize("binding, param, form", [
    ("torch = None\n", "", "with"), ("import numpy as torch\n", "", "with"), ("", ", torch=None", "with"),
    ("from os import path as torch\n", "", "decorator"), ("torch = None\n", "", "callable"),
])
def test_no_torch_no_grad_fix_where_torch_is_something_else(tmp_path, binding, param, form):
    """``--style no_grad`` spells a bare ``inference_mode`` as ``torch.no_grad``: not where ``torch`` is another name."""
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    body = {"with": "    with inference_mode():\n        return model()\n",
            "decorator": "    return model()\n",
            "callable": "    return inference_mode()(model)()\n"}[form]
    source = ("from torch import inference_mode\n" + binding + ("@inference_mode()\n" if form == "decorator" else "")
              + f"def warmup(model{param}):\n" + body)
    path = write(tmp_path, "a.py", source)
    proc = run_module("lints.codemod", "--style", "no_grad", "--unsafe-fixes", "a.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "1 finding(s) left" in proc.stderr and path.read_text() == source


@pytest.mark.parametrize("form", ["with", "decorator", "callable"])
def test_torch_no_grad_fix_where_torch_is_torch(tmp_path, form):
    """The look-alike: with ``torch`` unbound or imported as torch, the fix is made, and the code runs under no_grad."""
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    body = {"with": "    with inference_mode():\n        return model()\n",
            "decorator": "    return model()\n",
            "callable": "    return inference_mode()(model)()\n"}[form]
    source = ("from torch import inference_mode\nimport torch.nn\nOPTIONS = dict(torch=1, contextlib=2)\n"
              + ("@inference_mode()\n" if form == "decorator" else "") + "def warmup(model):\n" + body)
    path = write(tmp_path, "a.py", source)
    proc = run_module("lints.codemod", "--style", "no_grad", "--unsafe-fixes", "a.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    fixed = path.read_text()
    assert "torch.no_grad()" in fixed and run_warmup(fixed) == (False, False)


def test_libcst_command_lints_a_file_outside_any_project_alone(tmp_path):
    """As the CLI and flake8 do: serve.py beside it serves under inference mode, but is no project of warm.py's."""
    (tmp_path / "warm.py").write_text("import torch\ndef warmup(model):\n    with torch.inference_mode():\n"
                                      "        return model()\n")
    (tmp_path / "serve.py").write_text("import torch\n@torch.inference_mode()\ndef serve(model):\n    return model()\n")
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "codemods.gradmode.FixInferenceMode", "warm.py",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fixed = (tmp_path / "warm.py").read_text()
    assert "inference_mode" not in fixed and run_warmup(fixed) == (True, False)


def test_libcst_command_analyses_each_project_on_its_own(tmp_path):
    """A loose file listed first no longer makes a real project's file loose too: proj/warm.py matches its
    project's inference-mode serving and stays; the loose one is fixed."""
    warm = "import torch\ndef warmup(model):\n    with torch.inference_mode():\n        return model()\n"
    (tmp_path / "lz").mkdir()
    (tmp_path / "lz" / "warm.py").write_text(warm)
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    (tmp_path / "proj" / "warm.py").write_text(warm)
    (tmp_path / "proj" / "serve.py").write_text("import torch\n@torch.inference_mode()\ndef serve(model):\n"
                                                "    return model()\n")
    for order in (["lz/warm.py", "proj/warm.py"], ["proj/warm.py", "lz/warm.py"]):
        (tmp_path / "lz" / "warm.py").write_text(warm)
        proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "-j1", "codemods.gradmode.FixInferenceMode",
                          *order, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "proj" / "warm.py").read_text() == warm, order
        fixed = (tmp_path / "lz" / "warm.py").read_text()
        assert "inference_mode" not in fixed and run_warmup(fixed) == (True, False)


@pytest.mark.parametrize("cache_env", [False, True])
def test_a_loose_files_imports_stay_since_who_imports_it_is_not_known(tmp_path, cache_env):
    """A loose file is analysed with the files of its folder that import it: other.py here takes
    inference_mode from main.py, so the import must stay, on every run (cached or not)."""
    main = ("from torch import inference_mode\n"
            "def warmup(model):\n    with inference_mode():\n        return model()\n")
    (tmp_path / "main.py").write_text(main)
    (tmp_path / "other.py").write_text("from main import inference_mode\n")
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    if cache_env:
        env["GRADMODE_CACHE_DIR"] = str(tmp_path.parent / f"{tmp_path.name}-cache")
    env["PYTHONPATH"] = str(ROOT)
    for _ in range(2):
        report = subprocess.run([sys.executable, "-m", "lints", "--format", "json", "main.py"], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=300)
        (finding,) = json.loads(report.stdout)["findings"]
        assert all(edit["location"]["row"] > 1 for edit in finding["fix"]["edits"]), finding
    fix = subprocess.run([sys.executable, "-m", "lints.codemod", "main.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert fix.returncode == 0, fix.stderr
    fixed = (tmp_path / "main.py").read_text()
    assert fixed.startswith("from torch import inference_mode\n") and run_warmup(fixed) == (True, False)
    check = subprocess.run([sys.executable, "other.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr


def test_a_loose_files_imports_stay_when_its_folder_is_too_big_to_look_for_importers(tmp_path, monkeypatch):
    from lints import engine, loose_files

    (tmp_path / "main.py").write_text("from torch import inference_mode\n"
                                      "def warmup(model):\n    with inference_mode():\n        return model()\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    with chdir(tmp_path):
        run = engine.lint_project(["main.py"], Config(), use_cache=False)
        assert run.whole_project and names_imported_elsewhere(run, Config())
        for limit, value in (("LOOSE_SCAN_LIMIT", 1), ("LOOSE_SCAN_BYTES", 3)):
            monkeypatch.undo()
            monkeypatch.setattr(loose_files, limit, value)
            run = engine.lint_project(["main.py"], Config(), use_cache=False)
            assert not run.whole_project and names_imported_elsewhere(run, Config()) == {}, limit
            assert [f.code for f in run.findings] == ["GM101"]


@pytest.mark.parametrize("package, importer, command", [
    # a package with no marker, and the script beside it that takes inference_mode from it
    ("pkg/__init__.py", "s.py:from pkg.w import inference_mode\n", "import s"),
    # no __init__.py: a script one folder up imports tools.w as a module of a namespace package
    ("", "run.py:from tools.w import inference_mode, warmup\n", "import run"),
])
def test_a_loose_files_imports_stay_where_a_script_beside_or_above_imports_it(tmp_path, package, importer, command):
    folder = "pkg" if package else "tools"
    (tmp_path / folder).mkdir()
    if package:
        (tmp_path / package).write_text("")
    (tmp_path / folder / "w.py").write_text("from torch import inference_mode\n"
                                            "def warmup(model):\n    with inference_mode():\n        return model()\n")
    name, text = importer.split(":", 1)
    (tmp_path / name).write_text(text)
    proc = run_module("lints.codemod", f"{folder}/w.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fixed = (tmp_path / folder / "w.py").read_text()
    assert fixed.startswith("from torch import inference_mode\n") and run_warmup(fixed) == (True, False)
    check = subprocess.run([sys.executable, "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr


def test_libcst_command_leaves_what_the_projects_exclude_names(tmp_path):
    """libcst hands over every file it finds; `[tool.gradmode] exclude` still keeps build/ out."""
    warm = "import torch\ndef warmup(model):\n    with torch.inference_mode():\n        return model()\n"
    (tmp_path / "pyproject.toml").write_text('[tool.gradmode]\nexclude = ["build"]\n')
    for name in ("src/w.py", "build/w.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(warm)
    proc = run_module("libcst.tool", "codemod", "-x", "--no-format", "-j1", "codemods.gradmode.FixInferenceMode", ".",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "build" / "w.py").read_text() == warm
    fixed = (tmp_path / "src" / "w.py").read_text()
    assert "inference_mode" not in fixed and run_warmup(fixed) == (True, False)


def test_a_loose_files_folder_with_hostile_entries_is_scanned_safely(tmp_path):
    """A FIFO, a folder and a binary file named *.py, and a script that does not parse, beside a loose file:
    no hang, no traceback, the finding is fixed, and the import stays (the binary file may be an importer)."""
    (tmp_path / "main.py").write_text("from torch import inference_mode\n"
                                      "def warmup(model):\n    with inference_mode():\n        return model()\n")
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "dir.py").mkdir()
    (tmp_path / "bin.py").write_bytes(b"import main\x00\n")
    (tmp_path / "broken.py").write_text("import main\ndef (:\n")
    lint = run_module("lints", "--format", "concise", "main.py", cwd=tmp_path)
    assert lint.returncode == 1 and lint.stdout.startswith("main.py:3:10: GM101"), lint
    assert "Traceback" not in lint.stderr
    fix = run_module("lints.codemod", "main.py", cwd=tmp_path)
    assert fix.returncode == 0 and "Traceback" not in fix.stderr, fix.stderr
    fixed = (tmp_path / "main.py").read_text()
    assert fixed.startswith("from torch import inference_mode\n") and run_warmup(fixed) == (True, False)


def test_the_fixer_reads_again_only_the_files_with_findings(tmp_path, monkeypatch):
    """Every file of the project went to the fixer's workers, each with the options (the project's
    findings and imports): 6 s of a warm 7 s codemod run on sglang 0.5.15, for 3 files to fix."""
    from lints import codemod, fix_run

    (tmp_path / ".git").mkdir()
    (tmp_path / "warm.py").write_text("import torch\ndef warmup(model):\n    with torch.inference_mode():\n"
                                      "        model()\n")
    (tmp_path / "other.py").write_text("def f():\n    return 1\n")
    fixed = []
    real_fix_file = fix_run.fix_file

    def counting_fix_file(path, options):
        fixed.append(os.path.basename(path))
        return real_fix_file(path, options)

    monkeypatch.setattr(fix_run, "fix_file", counting_fix_file)
    with chdir(tmp_path):
        assert codemod.main(["-q", "--no-cache", "-j", "1", "."]) == 0
    assert fixed == ["warm.py"]
    assert "inference_mode" not in (tmp_path / "warm.py").read_text()


def test_the_imports_a_fix_keeps_are_gathered_with_the_collector_paused(tmp_path, monkeypatch):
    """With the collector on, gathering them beside the project's live summaries took 1.6 s of a
    4.3 s editor run (`--format json --stdin-filename`) on sglang 0.5.15, against 0.17 s."""
    import gc

    from lints import fix_inputs

    (tmp_path / ".git").mkdir()
    (tmp_path / "warm.py").write_text("import torch\ndef warmup(model):\n    with torch.inference_mode():\n"
                                      "        model()\n")
    run = lint(tmp_path)
    assert run.analysis is not None
    collector_on = []
    real = fix_inputs._imported_names

    def recording(summaries):
        collector_on.append(gc.isenabled())
        return real(summaries)

    monkeypatch.setattr(fix_inputs, "_imported_names", recording)
    assert gc.isenabled()
    names_imported_elsewhere(run, Config())
    assert collector_on == [False] and gc.isenabled()


def test_a_fix_refused_for_a_name_the_module_uses_otherwise_says_why(tmp_path):
    """The linter tags it fixable; the codemod left it with no reason and exit 1, so a user could
    rerun it forever (here a parameter named `torch` in another function refuses `@torch.no_grad()`)."""
    (tmp_path / ".git").mkdir()
    path = tmp_path / "w.py"
    path.write_text("from torch import inference_mode\ndef warmup(model, torch=None):\n    with inference_mode():\n"
                    "        model()\n@inference_mode()\ndef warmup2(model):\n    model()\n")
    proc = run_module("lints.codemod", "--no-cache", "w.py", cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert ("w.py: GM102 `@inference_mode()` in warm path `warmup2()`: not fixed: its fix writes `torch.no_grad()`"
            in proc.stderr), proc.stderr
    text = path.read_text()
    assert "with inference_mode()" not in text and "@inference_mode()" in text


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to apply the diff")
def test_diff_applies_with_git_and_gives_what_the_fix_writes(tmp_path):
    """The file's own bytes (a BOM, latin-1 text), a last line without a newline, a module reached through a
    symbolic link: `git apply` takes the diff and the result is what the codemod writes."""
    body = "def warmup(model):\n    with torch.inference_mode():\n        model('caf\u00e9')"
    files = {
        "no_newline.py": ("import torch\n" + body).encode(),
        "bom.py": b"\xef\xbb\xbf" + ("import torch\n" + body + "\n").encode(),
        "latin.py": ("# -*- coding: latin-1 -*-\nimport torch\n" + body + "\n").encode("latin-1"),
        "runner.py": ("import torch\n" + body + "\n").encode(),
    }
    fixed, patched = tmp_path / "fixed", tmp_path / "patched"
    for tree in (fixed, patched):
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "__init__.py").write_bytes(b"")
        for name, data in files.items():
            (tree / "pkg" / name).write_bytes(data)
        (tree / "pkg" / "alias.py").symlink_to("runner.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADMODE_CACHE_DIR=str(tmp_path / "cache"))
    diff = subprocess.run([sys.executable, "-m", "lints.codemod", "--diff", "pkg"], cwd=fixed, capture_output=True,
                          env=env, timeout=300)
    assert diff.returncode == 1, diff.stderr
    assert b"\\ No newline at end of file\n" in diff.stdout and b"caf\xe9" in diff.stdout  # latin-1 as it is
    assert b"a/pkg/alias.py" not in diff.stdout and diff.stdout.count(b"--- a/pkg/runner.py\n") == 1
    subprocess.run(["git", "init", "-q", "."], cwd=patched, check=True)
    applied = subprocess.run(["git", "apply", "-"], cwd=patched, input=diff.stdout, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    wrote = subprocess.run([sys.executable, "-m", "lints.codemod", "pkg"], cwd=fixed, capture_output=True, env=env,
                           timeout=300)
    assert wrote.returncode == 0, wrote.stderr
    for name in files:
        after = (fixed / "pkg" / name).read_bytes()
        assert after != files[name] and b"inference_mode" not in after, name
        assert (patched / "pkg" / name).read_bytes() == after, name
