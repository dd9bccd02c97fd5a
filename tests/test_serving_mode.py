"""serving-grad-mode: the classifier checks consistency between phases, not only a ban.

Set in the configuration, or (``auto``, the default) inferred from the serving entry points;
see tests/test_project.py for inference across modules.
"""
from __future__ import annotations

from lints.options import Config

from .helpers import lint_run

INFERENCE_SERVING = Config(serving_grad_mode="inference_mode")
NO_GRAD_SERVING = Config(serving_grad_mode="no_grad")

CAPTURE_UNDER_INFERENCE = (
    "import torch\n"
    "class CudaGraphRunner:\n"
    "    def capture(self):\n"
    "        with torch.inference_mode():\n"
    "            self.run_once()\n"
)
CAPTURE_UNDER_NO_GRAD = (
    "import torch\n"
    "class CudaGraphRunner:\n"
    "    @torch.no_grad()\n"
    "    def capture(self):\n"
    "        with torch.no_grad():\n"
    "            self.run_once()\n"
    "    def warmup(self):\n"
    "        self.ctx = torch.no_grad()\n"
)


def codes(tmp_path, source, config):
    run = lint_run(tmp_path, {"x.py": source}, config)
    assert not run.errors, run.errors
    return [(f.code, f.line) for f in run.findings]


def test_no_grad_serving_bans_inference_mode_in_capture(tmp_path):
    assert codes(tmp_path, CAPTURE_UNDER_INFERENCE, Config()) == [("GM101", 4)]  # auto: no evidence, no_grad
    assert codes(tmp_path, CAPTURE_UNDER_INFERENCE, NO_GRAD_SERVING) == [("GM101", 4)]
    assert codes(tmp_path, CAPTURE_UNDER_NO_GRAD, Config()) == []


def test_inference_mode_serving_accepts_inference_mode_everywhere(tmp_path):
    assert codes(tmp_path, CAPTURE_UNDER_INFERENCE, INFERENCE_SERVING) == []


def test_inference_mode_serving_flags_no_grad_in_capture(tmp_path):
    assert codes(tmp_path, CAPTURE_UNDER_NO_GRAD, INFERENCE_SERVING) == [("GM105", 3), ("GM105", 5), ("GM105", 8)]


def test_gm105_notes_say_where_the_serving_mode_comes_from(tmp_path):
    run = lint_run(tmp_path, {"x.py": CAPTURE_UNDER_NO_GRAD}, INFERENCE_SERVING)
    assert all("serving-grad-mode in the configuration" in f.notes for f in run.findings)


def test_inference_mode_serving_silences_caller_side_and_crash_combination(tmp_path):
    source = (
        "import torch\n"
        "class Moe:\n"
        "    def forward(self, x):\n"
        "        if self._ws is None:\n"
        "            self._ws = torch.empty_like(x)\n"
        "        self._ws += x\n"
        "    def kernel_warmup(self, x):\n"
        "        with torch.inference_mode():\n"
        "            self.forward(x)\n"
        "def main(runner):\n"
        "    with torch.inference_mode():\n"
        "        runner.kernel_warmup()\n"
    )
    # every path to the update runs under inference mode: no crash (GM202 needs an update outside it)
    assert {c for c, _ in codes(tmp_path, source, Config())} == {"GM101", "GM104"}
    assert codes(tmp_path, source, INFERENCE_SERVING) == []
    # a serving path without inference mode is the crash, whatever the setting says serving runs under
    serving = source + "@torch.no_grad()\ndef serve(moe: Moe, x):\n    moe.forward(x)\n"
    assert ("GM202", 5) in codes(tmp_path / "serving", serving, INFERENCE_SERVING)


def test_config_mode_overrides_the_inferred_one(tmp_path):
    source = (
        "import torch\n"
        "@torch.inference_mode()\n"
        "def execute_model(model, x):\n"
        "    return model(x)\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n"
    )
    run = lint_run(tmp_path, {"x.py": source}, Config())
    assert (run.analysis.serving.mode, run.analysis.serving.source) == ("inference_mode", "inferred")
    assert run.findings == []
    run = lint_run(tmp_path, {"x.py": source}, NO_GRAD_SERVING)
    assert (run.analysis.serving.mode, run.analysis.serving.source) == ("no_grad", "config")
    assert [(f.code, f.line) for f in run.findings] == [("GM101", 6)]
