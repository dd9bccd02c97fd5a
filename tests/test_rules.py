"""Every rule's VALID/INVALID examples (kept beside the rule) become tests, Fixit style."""
from __future__ import annotations

import pytest

from lints.config import OPT_IN_CODES, Config
from lints.engine import analyze_text
from lints.rules import ALL_RULES

from .helpers import ALL_ON, FIXTURES, expected_findings

CASES = [
    pytest.param(code, kind, src, id=f"{code}-{kind}-{n}")
    for code, rule in ALL_RULES.items()
    for kind, snippets in (("invalid", rule.invalid), ("valid", rule.valid))
    for n, src in enumerate(snippets)
]


def findings(source: str, config: Config = ALL_ON) -> set[tuple[str, int, int]]:
    result = analyze_text(source, "example.py", config)
    assert not hasattr(result, "message"), result
    return {(h.code, h.line, h.col + 1) for h in result.hits}


@pytest.mark.parametrize("code,kind,source", CASES)
def test_rule_examples(code, kind, source):
    expected = expected_findings(source)
    if kind == "invalid":
        assert any(c == code for c, _, _ in expected), "an invalid example must expect its own rule"
    else:
        assert all(c != code for c, _, _ in expected), "a valid example must not expect its own rule"
    assert findings(source) == expected


def test_every_rule_has_examples_or_own_tests():
    for code, rule in ALL_RULES.items():
        if code == "GM105":  # needs serving-grad-mode = inference_mode: see test_serving_mode.py
            continue
        assert rule.invalid and rule.valid, code


def test_opt_in_codes_match_rules():
    assert OPT_IN_CODES == {code for code, rule in ALL_RULES.items() if not rule.default_enabled}


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "lint").glob("*.py")))
def test_lint_fixture_files(name):
    source = (FIXTURES / "lint" / name).read_text()
    assert findings(source) == expected_findings(source)


def test_sglang_pattern_flagged_everywhere_and_fixed_version_clean():
    buggy = (FIXTURES / "lint" / "sglang_buggy.py").read_text()
    got = findings(buggy, Config())  # default selection
    codes = sorted(c for c, _, _ in got)
    # autotune context (GM101), run_once ctx (GM103), both lazily allocated buffers (GM202)
    assert codes == ["GM101", "GM103", "GM202", "GM202"]
    fixed = (FIXTURES / "lint" / "sglang_fixed.py").read_text()
    assert findings(fixed, Config()) == set()
    assert {c for c, _, _ in findings(fixed)} == {"GM201"}  # the opt-in hazard is still visible


def test_messages_say_why_the_path_was_classified():
    source = (
        "import torch\n"
        "class Runner:\n"
        "    def capture(self):\n"
        "        self._step()\n"
        "    def _step(self):\n"
        "        with torch.inference_mode():\n"
        "            pass\n"
    )
    result = analyze_text(source, "x.py", Config())
    (hit,) = result.hits
    assert "called from `Runner.capture()` at line 4" in hit.message


def test_nested_run_once_reason():
    source = (
        "import torch\n"
        "def capture_graph(model):\n"
        "    def run_once():\n"
        "        with torch.inference_mode():\n"
        "            model()\n"
        "    run_once()\n"
    )
    (hit,) = analyze_text(source, "x.py", Config()).hits
    assert hit.code == "GM101" and "defined inside `capture_graph()` at line 2" in hit.message


def test_local_shadowing_is_not_torch():
    source = (
        "import torch\n"
        "def warmup(model):\n"
        "    inference_mode = make_ctx\n"
        "    with inference_mode():\n"
        "        model()\n"
    )
    assert findings(source) == set()


def test_unrelated_names_do_not_fire():
    source = (
        "import torch\n"
        "class Engine:\n"
        "    def serve(self):\n"
        "        with torch.inference_mode():\n"
        "            self.forward()\n"
        "    def forward(self):\n"
        "        self.inference_mode = True\n"
    )
    assert findings(source) == set()


PREFILTER_CONFIGS = [ALL_ON, Config(), Config(serving_grad_mode="inference_mode"),
                     Config(module_globs=("example.py",)), Config(path_patterns=("*step*",))]
ALL_SOURCES = [src for _, _, src in (c.values for c in CASES)] + [
    p.read_text() for p in sorted((FIXTURES / "lint").glob("*.py")) + sorted((FIXTURES / "fix").glob("*.py"))]


@pytest.mark.parametrize("config", PREFILTER_CONFIGS, ids=lambda c: repr(c)[:60])
def test_prefilter_loses_no_finding(config):
    for source in ALL_SOURCES:
        fast = analyze_text(source, "example.py", config, prefilter=True)
        slow = analyze_text(source, "example.py", config, prefilter=False)
        assert [(h.code, h.line, h.col) for h in fast.hits] == [(h.code, h.line, h.col) for h in slow.hits]


def test_prefilter_skips_files_that_cannot_match(tmp_path):
    from lints.engine import might_match

    assert not might_match("import torch\nwith torch.no_grad():\n    pass\n", Config())
    assert not might_match("import torch\ndef serve():\n    with torch.inference_mode():\n        pass\n", Config())
    assert might_match("import torch\ndef serve(r):\n    with torch.inference_mode():\n        r.capture()\n",
                       Config())
    assert might_match("import torch\ndef serve():\n    with torch.inference_mode():\n        pass\n",
                       Config(module_globs=("*/engine/*.py",)), "src/engine/a.py")
