"""The flake8 plugin: same findings as the CLI, flake8's noqa/select, options and pyproject config."""
from __future__ import annotations

import shutil
import sys

from .helpers import FIXTURES, run_module

BUGGY = FIXTURES / "lint" / "sglang_buggy.py"


def flake8(tmp_path, *args):
    return run_module("flake8", "--isolated" if "--isolated" in args else "--select", *[
        a for a in args if a != "--isolated"], cwd=tmp_path)


def codes(proc):
    return [(line.split(":")[1], line.split()[1]) for line in proc.stdout.splitlines()]


def test_plugin_reports_same_as_cli(tmp_path):
    shutil.copy(BUGGY, tmp_path / "b.py")
    proc = run_module("flake8", "--select", "GM", "b.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    cli = run_module("lints", "--select", "GM", "b.py", cwd=tmp_path)
    assert proc.stdout == cli.stdout.replace(" [*]", "")


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


def test_plugin_is_registered():
    proc = run_module("flake8", "--version")
    assert "gradmode-lint" in proc.stdout, proc.stdout
    assert sys.version_info >= (3, 9)
