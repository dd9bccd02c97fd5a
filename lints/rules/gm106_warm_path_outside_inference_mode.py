from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..gradmodes import OFF, ON
from ..model import Finding, Fix
from ..regions import INFERENCE
from ..rule import Rule


# A runner whose warmup and serving run under inference mode, and its capture with no grad-mode context.
_CAPTURE = "    def capture(self, x):  # expect: GM106:5\n"
_RUNNER = ("import torch\n"
           "class Runner:\n"
           "    @torch.inference_mode()\n"
           "    def warmup(self, x):\n"
           "        return self.model(x)\n"
           "    @torch.inference_mode()\n"
           "    def execute_model(self, x):\n"
           "        return self.graph.replay()\n"
           + _CAPTURE +
           "        with torch.cuda.graph(self.graph):\n"
           "            self.model(x)\n")
# The driver of the runner examples: warmup, then the capture, then serving, with no grad-mode context.
_MAIN = ("from engine.runner import Runner\n"
         "def main(x):\n"
         "    runner = Runner()\n"
         "    runner.warmup(x)\n"
         "    runner.capture(x)\n"
         "    runner.execute_model(x)\n"
         "if __name__ == '__main__':\n"
         "    main(None)\n")


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
        {"engine/runner.py": _RUNNER, "engine/main.py": _MAIN},
        # started on a thread (grad-mode switches are thread-local): it runs with none, after warmup under one
        "import threading, torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    @torch.inference_mode()\n"
        "    def kernel_warmup(self):\n"
        "        self.model(self.batch)\n"
        "    def start(self):\n"
        "        self.kernel_warmup()\n"
        "        threading.Thread(target=self.capture_graphs).start()\n"
        "    def capture_graphs(self):  # expect: GM106:5\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.model(self.batch)\n",
    )
    VALID = (
        # a warmup that no inference-mode warmup precedes (a benchmark script): what it makes is a normal
        # tensor; and model loading, which runs outside inference mode by design
        "import torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    def load_weights(self, weights):\n"
        "        self.model.load_state_dict(weights)\n"
        "def bench_warmup(worker):\n"
        "    worker.model(worker.batch)\n"
        "if __name__ == '__main__':\n"
        "    worker = Worker()\n"
        "    worker.load_weights({})\n"
        "    bench_warmup(worker)\n",
        # the fix: the capture entry runs under inference mode, as warmup and serving do
        {"engine/runner.py": _RUNNER.replace(_CAPTURE, "    @torch.inference_mode()\n    def capture(self, x):\n"),
         "engine/main.py": _MAIN},
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

        def runs_under_inference(fid: str) -> bool:
            return any(ON in modes.at(fid, call.with_index) for call in project.function(fid)["calls"])

        def group(fid: str) -> str:
            return project.class_of(fid) or project.path_of(fid)

        warm_under_inference = [fid for fid, root in phases.roots.items() if not root.loading
                                and runs_under_inference(fid)]
        if not warm_under_inference:
            return  # no warmup under inference mode: a buffer a warm path makes outside it is a normal tensor
        groups = {group(fid) for fid in warm_under_inference}
        for fid in sorted(phases.roots):
            root = phases.roots[fid]
            if root.loading or not phases.is_warm_only(fid) or analysis.serving_mode_for(fid).mode != INFERENCE:
                continue
            # a capture after an inference-mode warmup anywhere; another warm path beside one of its own
            if not root.capture and group(fid) not in groups:
                continue
            step = modes.states.get(fid, {}).get(OFF)
            if step is None or (step.parent is not None and phases.is_warm(step.parent)):
                continue  # never outside inference mode, or the warm function above it is the entry
            calls = project.function(fid)["calls"]
            if not any(OFF in modes.at(fid, call.with_index) for call in calls):
                continue  # it switches inference mode on around all it runs
            fn = project.function(fid)
            warmup = next(w for w in warm_under_inference if root.capture or group(w) == group(fid))
            notes = (phases.why_warm(fid), f"outside inference mode: {modes.describe(step.origin)}",
                     *(f"  {s}" for s in modes.chain(fid, OFF)),
                     f"warmup under inference mode: {project.label(warmup)} at "
                     f"{project.where(warmup, project.function(warmup)['line'])}",
                     analysis.serving_mode_for(fid).evidence)
            yield self.finding(analysis, fid, fn["line"], fn["col"],
                               f"warm path {project.label(fid)} runs outside inference mode; serving runs under it",
                               notes, (Fix("add_inference_decorator", (fn["line"], fn["col"]), safe=False),))
