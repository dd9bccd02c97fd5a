from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..gradmodes import OFF
from ..model import Finding, Fix
from ..regions import INFERENCE
from ..rule import Rule
from ..summary import C_WITH


class WarmPathOutsideInferenceMode(Rule):
    CODE = "GM106"
    NAME = "warm-path-outside-inference-mode"
    SUMMARY = "a warmup / capture entry runs outside inference mode while serving runs under it"
    RATIONALE = ("The reverse of GM101: where serving runs under inference mode, buffers that serving and an "
                 "inference-mode warmup allocate are inference tensors, and a CUDA graph capture or warmup that runs "
                 "outside inference mode (with no grad-mode context at all, or under no_grad) updates them in "
                 "place and raises 'Inplace update to inference tensor outside InferenceMode is not allowed'. "
                 "Reported at the topmost warm function that a caller reaches outside inference mode (a program "
                 "entry, a thread, `no_grad`), with that chain. A function no project code calls is not reported: "
                 "its host decides (`entry-grad-mode`).")
    FIX = "add `@torch.inference_mode()` to the entry (unsafe: the whole function then runs under it)"
    TORCH_NAMES = ("torch.inference_mode", "torch.cuda.graph")
    INVALID = (
        {"engine/runner.py":
            "import torch\n"
            "class Runner:\n"
            "    @torch.inference_mode()\n"
            "    def warmup(self, x):\n"
            "        return self.model(x)\n"
            "    @torch.inference_mode()\n"
            "    def execute_model(self, x):\n"
            "        return self.graph.replay()\n"
            "    def capture(self, x):  # expect: GM106:5\n"
            "        with torch.cuda.graph(self.graph):\n"
            "            self.model(x)\n",
         "engine/main.py":
            "from engine.runner import Runner\n"
            "def main(x):\n"
            "    runner = Runner()\n"
            "    runner.warmup(x)\n"
            "    runner.capture(x)\n"
            "    runner.execute_model(x)\n"
            "if __name__ == '__main__':\n"
            "    main(None)\n"},
        # under no_grad: a no_grad capture beside inference-mode serving (GM105 says so at the switch)
        "import threading, torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    def start(self):\n"
        "        threading.Thread(target=self.kernel_warmup).start()\n"
        "    def kernel_warmup(self):  # expect: GM106:5\n"
        "        self.model(self.batch)\n",
    )
    VALID = (
        # the fix: the capture entry runs under inference mode, as warmup and serving do
        {"engine/runner.py":
            "import torch\n"
            "class Runner:\n"
            "    @torch.inference_mode()\n"
            "    def warmup(self, x):\n"
            "        return self.model(x)\n"
            "    @torch.inference_mode()\n"
            "    def execute_model(self, x):\n"
            "        return self.graph.replay()\n"
            "    @torch.inference_mode()\n"
            "    def capture(self, x):\n"
            "        with torch.cuda.graph(self.graph):\n"
            "            self.model(x)\n",
         "engine/main.py":
            "from engine.runner import Runner\n"
            "def main(x):\n"
            "    runner = Runner()\n"
            "    runner.warmup(x)\n"
            "    runner.capture(x)\n"
            "    runner.execute_model(x)\n"
            "if __name__ == '__main__':\n"
            "    main(None)\n"},
        # a capture no project code calls: its host decides; an engine serving under no_grad is consistent
        "import torch\n"
        "class Runner:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, x):\n"
        "        return self.graph.replay()\n"
        "    def capture(self, x):\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.model(x)\n"
        "class NoGradRunner:\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.graph.replay()\n"
        "    def capture(self, x):\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.model(x)\n"
        "if __name__ == '__main__':\n"
        "    NoGradRunner().capture(None)\n",
        # the warm entry switches inference mode on inside: it runs no code outside it
        "import torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    def kernel_warmup(self):\n"
        "        with torch.inference_mode():\n"
        "            self.model(self.batch)\n"
        "if __name__ == '__main__':\n"
        "    Worker().kernel_warmup()\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        phases, modes, project = analysis.phases, analysis.modes, analysis.project
        for fid in sorted(phases.roots):
            if not phases.is_warm_only(fid) or analysis.serving_mode_for(fid).mode != INFERENCE:
                continue
            step = modes.states.get(fid, {}).get(OFF)
            if step is None or (step.parent is not None and phases.is_warm(step.parent)):
                continue  # never outside inference mode, or the warm function above it is the entry
            calls = project.function(fid)["calls"]
            if not any(OFF in modes.at(fid, call[C_WITH]) for call in calls):
                continue  # it switches inference mode on around all it runs
            fn = project.function(fid)
            notes = (phases.why_warm(fid), f"outside inference mode: {modes.describe(step.origin)}",
                     *(f"  {s}" for s in modes.chain(fid, OFF)), analysis.serving_mode_for(fid).evidence)
            yield self.finding(analysis, fid, fn["line"], fn["col"],
                               f"warm path {project.label(fid)} runs outside inference mode; serving runs under it",
                               notes, (Fix("add_inference_decorator", (fn["line"], fn["col"]), safe=False),))
