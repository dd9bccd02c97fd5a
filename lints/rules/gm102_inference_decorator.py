from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..model import Finding, Fix
from ..regions import INFERENCE
from ..rule import CRASH, Rule
from ._warm import mismatched_warm_functions, warm_switches, where


class InferenceModeDecoratorOnWarmPath(Rule):
    CODE = "GM102"
    NAME = "inference-mode-decorator-on-warm-path"
    SUMMARY = "`@torch.inference_mode()` decorating a warmup / autotune / capture function"
    RATIONALE = ("A decorator switches the whole function to inference mode: the same crash as GM101. A "
                 "decorator of the project's own that runs the function inside inference mode (built with "
                 "functools.wraps) counts too; it is reported without a fix.")
    FIX = "Replace torch's decorator with `@torch.no_grad()` (dropping it would let warmup build autograd graphs)."
    TORCH_NAMES = ("torch.inference_mode", "torch.autograd.inference_mode")
    INVALID = (
        # a kernel precompiled after model loading, before serving under no_grad (SGLang's Kimi-K3)
        {"engine/kernels.py":
            "import torch\n"
            "@torch.inference_mode()  # expect: GM102:2\n"
            "def precompile_recompute_kernel(n):\n"
            "    return torch.zeros(n)\n",
         "engine/model.py":
            "import torch\n"
            "from engine.kernels import precompile_recompute_kernel\n"
            "class Model:\n"
            "    def post_load_weights(self):\n"
            "        precompile_recompute_kernel(8)\n"
            "    @torch.no_grad()\n"
            "    def execute_model(self, batch):\n"
            "        return batch\n"},
        "import torch\n"
        "@torch.inference_mode()  # expect: GM102:2\n"
        "def kernel_warmup(model):\n"
        "    model()\n",
        "import torch\n"
        "class Runner:\n"
        "    @torch.inference_mode  # expect: GM102:6\n"
        "    def profile_run(self):\n"
        "        self.model()\n",
        {"engine/modes.py":
            "import functools\n"
            "import torch\n"
            "def inference(fn):\n"
            "    @functools.wraps(fn)\n"
            "    def wrapper(*args, **kwargs):\n"
            "        with torch.inference_mode():\n"
            "            return fn(*args, **kwargs)\n"
            "    return wrapper\n",
         "engine/warm.py":
            "from engine.modes import inference\n"
            "@inference  # expect: GM102:2\n"
            "def prewarm_kernels(model):\n"
            "    model()\n"
            "def warmup(model):\n"
            "    prewarm_kernels(model)\n"},
        # a module-level alias of the switch, and one imported from another module
        {"engine/modes.py":
            "import torch\n"
            "im = torch.inference_mode\n",
         "engine/warm.py":
            "import torch\n"
            "from engine.modes import im\n"
            "infer = torch.inference_mode\n"
            "@infer()  # expect: GM102:2\n"
            "def warmup(model):\n"
            "    model()\n"
            "@im()  # expect: GM102:2\n"
            "def autotune(model):\n"
            "    model()\n"},
    )
    VALID = (
        "import torch\n"
        "@torch.inference_mode()\n"
        "def generate(model):\n"
        "    model()\n",
        "import torch\n"
        "@torch.no_grad()\n"
        "def kernel_warmup(model):\n"
        "    model()\n",
        "import torch\n"
        "@torch.inference_mode(False)\n"
        "def kernel_warmup(model):\n"
        "    model()\n",
        # replaying a captured graph serves: a *GraphRunner's replay is serving code
        "from torch import inference_mode\n"
        "class PiecewiseGraphRunner:\n"
        "    @inference_mode()\n"
        "    def replay(self):\n"
        "        self.graph.replay()\n",
        # not only an alias: bound to something else too, or rebound by a function
        "import contextlib, torch\n"
        "mode = torch.inference_mode\n"
        "mode = contextlib.nullcontext\n"
        "off = torch.inference_mode\n"
        "def disable():\n"
        "    global off\n"
        "    off = contextlib.nullcontext\n"
        "none = torch.inference_mode\n"
        "none = None\n"
        "@mode()\n"
        "def warmup(model):\n"
        "    model()\n"
        "@off()\n"
        "def autotune(model):\n"
        "    model()\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        for switch, why in warm_switches(analysis, INFERENCE):
            if switch.role == "decorator":
                yield self.finding(analysis, switch.fid, switch.line, switch.col,
                                   f"`@{switch.text}` {where(analysis, switch.fid)}", (why, CRASH),
                                   (Fix("decorator_no_grad", (switch.line, switch.col), True),))
        for fid in mismatched_warm_functions(analysis, INFERENCE):
            if not analysis.runs_code(fid, -1):
                continue
            for mode, dec in analysis.regions.decorator_modes(fid):
                if mode.mode == INFERENCE and not mode.direct and mode.source != fid:
                    yield self.finding(analysis, fid, dec.line, dec.col,
                                       f"{mode.via} {where(analysis, fid)}",
                                       (analysis.phases.why_warm(fid), CRASH))
                    break
