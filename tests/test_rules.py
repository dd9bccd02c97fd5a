"""Every rule's VALID/INVALID examples (kept beside the rule) become tests, Fixit style.

An example is one source or a {relative path: source} package; it is linted as a whole project
(``lint_project``) with the rule selected and the rule's EXAMPLE_OPTIONS.
"""
from __future__ import annotations

import ast
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import lints.rules
from lints.options import Config
from lints.rule import Rule
from lints.rule_codes import rule_codes
from lints.rules import ALL_RULES, OPT_IN_CODES

from .helpers import EXPECT, as_files, expected_in_files, lint_files, run_module

CASES = [
    pytest.param(code, kind, example, id=f"{code}-{kind}-{n}")
    for code, rule in ALL_RULES.items()
    for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID))
    for n, example in enumerate(examples)
]


def config_for(code: str) -> Config:
    return Config(extend_select=(code,), **ALL_RULES[code].EXAMPLE_OPTIONS)


@pytest.mark.parametrize("code,kind,example", CASES)
def test_rule_examples(tmp_path, code, kind, example):
    files = as_files(example)
    expected = expected_in_files(files)
    own = [e for e in expected if e[1] == code]
    if kind == "invalid":
        assert own, "an invalid example must expect its own rule"
    else:
        assert not own, "a valid example must not expect its own rule"
    assert lint_files(tmp_path, files, config_for(code)) == expected


def test_every_rule_has_valid_and_invalid_examples():
    for code, rule in ALL_RULES.items():
        assert rule.INVALID and rule.VALID, code


def test_rule_classes_are_consistent():
    for code, rule in ALL_RULES.items():
        assert rule.CODE == code and rule.NAME and rule.SUMMARY and rule.RATIONALE and rule.FIX, code
        assert rule.SEVERITY in ("warning", "error"), code
        assert isinstance(rule.EXAMPLE_OPTIONS, dict), code
        Config(**rule.EXAMPLE_OPTIONS)  # only Config fields


def test_opt_in_codes_match_rules():
    assert OPT_IN_CODES == {code for code, rule in ALL_RULES.items() if not rule.DEFAULT_ENABLED}


def test_rules_are_discovered_one_class_per_module():
    modules = sorted(m.name for m in pkgutil.iter_modules(lints.rules.__path__) if not m.name.startswith("_"))
    assert modules, "no rule modules"
    seen = {}
    for name in modules:
        module = __import__(f"lints.rules.{name}", fromlist=["_"])
        defined = [v for v in vars(module).values()
                   if inspect.isclass(v) and issubclass(v, Rule) and v is not Rule and v.__module__ == module.__name__]
        assert len(defined) == 1, (name, defined)
        (rule,) = defined
        assert ALL_RULES[rule.CODE] is rule, name
        assert name.startswith(rule.CODE.lower() + "_"), (name, rule.CODE)
        seen[rule.CODE] = name
    assert set(seen) == set(ALL_RULES)
    # the rule files on disk are the modules found (no hand registration)
    on_disk = sorted(p.stem for p in Path(lints.rules.__file__).parent.glob("*.py") if not p.name.startswith("_"))
    assert on_disk == modules


def test_rule_codes_from_file_names_are_the_rules_codes():
    """The settings check codes by the rules' file names (``lints.rule_codes``), not by importing them."""
    assert rule_codes() == tuple(ALL_RULES)
    code = ("import sys\nfrom lints.options import check_codes\ncheck_codes(['GM1', 'GM202'], 'x')\n"
            "print('lints.rules' in sys.modules, 'lints.analysis' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(lints.rules.__file__).parents[2], capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["False", "False"], done


def test_rules_package_registers_nothing_by_hand():
    tree = ast.parse(Path(lints.rules.__file__).read_text())
    imported = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("gm")]
    assert not imported


@pytest.mark.parametrize("code", sorted(ALL_RULES))
def test_explain_prints_docs_and_every_example(code):
    proc = run_module("lints", "explain", code)
    assert proc.returncode == 0, proc.stderr
    rule = ALL_RULES[code]
    for part in (code, rule.NAME, rule.SUMMARY, "Why:", "Fix:"):
        assert part in proc.stdout, part
    # the examples are printed indented and without the tests' `# expect:` markers; compare line by line
    printed = [line.strip() for line in proc.stdout.splitlines()]
    assert "# expect:" not in proc.stdout
    for example in rule.INVALID + rule.VALID:
        for path, source in as_files(example).items():
            lines = [EXPECT.sub("", line).strip() for line in source.splitlines() if line.strip()]
            start = [i for i, line in enumerate(printed) if line == lines[0]]
            assert any(printed[i:i + len(lines)] == lines for i in start), (path, source)
            if isinstance(example, dict):
                assert f"# {path}" in proc.stdout


def test_gm202_names_what_switched_inference_mode_on(tmp_path):
    """The notes name the switch that makes the buffer an inference tensor, wherever it is (serving code
    under inference mode too, not only warmup), and the one the update runs under."""
    from .helpers import lint_run

    pool = ("import torch\n_BUF = {}\ndef get_buf(n):\n    b = _BUF.get('x')\n    if b is None or b.numel() < n:\n"
            "        b = torch.zeros(n)\n        _BUF['x'] = b\n    return b[:n]\n")
    kernels = "from eng.pool import get_buf\ndef fused_op(x):\n    out = get_buf(4)\n    out.copy_(x)\n"
    server = ("import torch\nfrom eng import kernels\nclass Engine:\n    @torch.inference_mode()\n"
              "    def generate(self, x):\n        return kernels.fused_op(x)\n    @torch.no_grad()\n"
              "    def execute_model(self, x):\n        return kernels.fused_op(x)\n")
    for warm, expected in [
        ("from eng import kernels\ndef warmup(x):\n    kernels.fused_op(x)\n",
         "allocated under inference mode: `@torch.inference_mode()` in `Engine.generate()` at eng/server.py:4"),
        ("import torch\nfrom eng import kernels\ndef warmup(x):\n    with torch.inference_mode():\n"
         "        kernels.fused_op(x)\n", "allocated under inference mode: ")]:
        files = {"eng/__init__.py": "", "eng/pool.py": pool, "eng/kernels.py": kernels, "eng/server.py": server,
                 "eng/warm.py": warm}
        run = lint_run(tmp_path / str(len(warm)), files, Config())
        found = [f for f in run.findings if f.code == "GM202"]
        assert [f.message for f in found] == [
            "`_BUF` allocated under inference mode, updated in place outside it"]
        assert any(note.startswith(expected) for note in found[0].notes), found[0].notes
        assert "outside inference mode: `@torch.no_grad()` in `Engine.execute_model()` at eng/server.py:7" \
            in found[0].notes
