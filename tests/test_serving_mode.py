"""serving-grad-mode: the classifier checks consistency between phases, not only a ban."""
from __future__ import annotations

from lints.config import Config
from lints.engine import analyze_text

INFERENCE_SERVING = Config(serving_grad_mode="inference_mode")

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


def codes(source, config):
    return [(h.code, h.line) for h in analyze_text(source, "x.py", config).hits]


def test_default_no_grad_serving_bans_inference_mode_in_capture():
    assert codes(CAPTURE_UNDER_INFERENCE, Config()) == [("GM101", 4)]
    assert codes(CAPTURE_UNDER_NO_GRAD, Config()) == []


def test_inference_mode_serving_accepts_inference_mode_everywhere():
    assert codes(CAPTURE_UNDER_INFERENCE, INFERENCE_SERVING) == []


def test_inference_mode_serving_flags_no_grad_in_capture():
    assert codes(CAPTURE_UNDER_NO_GRAD, INFERENCE_SERVING) == [("GM105", 3), ("GM105", 5), ("GM105", 8)]


def test_inference_mode_serving_silences_caller_side_and_crash_combination():
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
        "        runner.capture()\n"
    )
    assert {c for c, _ in codes(source, Config())} == {"GM101", "GM104", "GM202"}
    assert codes(source, INFERENCE_SERVING) == []
