from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..model import Finding, Fix
from ..regions import INFERENCE
from ..rule import CRASH, Rule
from ._warm import warm_switches, where


class InferenceModeContextObjectInWarmPath(Rule):
    CODE = "GM103"
    NAME = "inference-mode-context-object-in-warm-path"
    SUMMARY = "an inference-mode context object, or the callable form, built or handed on in a warm path"
    RATIONALE = ("`ctx = run_ctx or torch.inference_mode()`, `return torch.inference_mode()`, "
                 "`run_ctx=torch.inference_mode()` and `torch.inference_mode()(fn)` enter inference mode later, "
                 "where the object is used: the same crash as GM101.")
    FIX = ("A context object becomes `contextlib.nullcontext()` so the caller's grad mode stays in charge; the "
           "callable form `torch.inference_mode()(fn)` becomes plain `fn` (`--style no_grad`: "
           "`torch.no_grad()(fn)`).")
    TORCH_NAMES = ("torch.inference_mode",)
    INVALID = (
        "import torch\n"
        "def dummy_run(model, run_ctx=None):\n"
        "    ctx = run_ctx or torch.inference_mode()  # expect: GM103:22\n"
        "    with ctx:\n"
        "        model()\n",
        "import torch\n"
        "def autotune_context():\n"
        "    return torch.inference_mode()  # expect: GM103:12\n",
        "import torch\n"
        "class CudaGraphRunner:\n"
        "    def capture(self):\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.capture_one(run_ctx=torch.inference_mode())  # expect: GM103:38\n",
        "import torch\n"
        "def warmup(model, x):\n"
        "    run = torch.inference_mode()(model.forward)  # expect: GM103:11\n"
        "    return run(x)\n",
    )
    VALID = (
        "import contextlib\n"
        "def dummy_run(model, run_ctx=None):\n"
        "    with run_ctx or contextlib.nullcontext():\n"
        "        model()\n",
        "import torch\n"
        "def make_serving_ctx():\n"
        "    return torch.inference_mode()\n",
        "import torch\n"
        "def warmup(model, x):\n"
        "    run = torch.no_grad()(model.forward)\n"
        "    return run(x)\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        for switch, why in warm_switches(analysis, INFERENCE):
            if switch.role == "object":
                yield self.finding(analysis, switch.fid, switch.line, switch.col,
                                   f"inference-mode context object `{switch.text}` {where(analysis, switch.fid)}",
                                   (why, CRASH), (Fix("null_context", (switch.line, switch.col), True),))
            elif switch.role == "callable":
                yield self.finding(analysis, switch.fid, switch.line, switch.col,
                                   f"`{switch.text}(fn)` runs fn under inference mode {where(analysis, switch.fid)}",
                                   (why, CRASH), (Fix("unwrap_callable", (switch.line, switch.col), True),))
