from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..model import Finding
from ..regions import NO_GRAD
from ..rule import Rule
from ._warm import warm_switches, where


class NoGradInWarmPathWithInferenceServing(Rule):
    CODE = "GM105"
    NAME = "no-grad-in-warm-path-with-inference-mode-serving"
    SUMMARY = "`torch.no_grad()` in a warmup / capture path while serving runs under inference mode"
    RATIONALE = ("Engines that serve under inference mode must warm up and capture under it too: buffers made "
                 "under no_grad are normal tensors, those made while serving are inference tensors, and an "
                 "in-place update across the boundary crashes. Fires when the serving grad mode is inference_mode, "
                 "inferred from the serving entry points or set by `serving-grad-mode`.")
    FIX = "report only: use the serving grad mode (torch.inference_mode()) in the warm path"
    TORCH_NAMES = ("torch.no_grad",)
    INVALID = (
        "import torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    def capture_model(self):\n"
        "        with torch.no_grad():  # expect: GM105:14\n"
        "            with torch.cuda.graph(self.graph):\n"
        "                self.model(self.batch)\n",
    )
    VALID = (
        # model loading makes weights under no_grad by design
        "import torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    def load_weights(self, weights):\n"
        "        with torch.no_grad():\n"
        "            for name, w in weights:\n"
        "                self.params[name].copy_(w)\n",
        "import torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    @torch.inference_mode()\n"
        "    def capture_model(self):\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.model(self.batch)\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        for switch, why in warm_switches(analysis, NO_GRAD):
            yield self.finding(analysis, switch.fid, switch.line, switch.col,
                               f"`{switch.text}` {where(analysis, switch.fid)}, but serving runs under inference mode",
                               (why, analysis.serving_mode_for(switch.fid).evidence))
