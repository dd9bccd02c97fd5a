from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..model import Finding, Fix
from ..regions import INFERENCE
from ..rule import CRASH, Rule
from ._warm import mismatched_warm_functions, warm_switches, where


class InferenceModeBlockInWarmPath(Rule):
    CODE = "GM101"
    NAME = "inference-mode-block-in-warm-path"
    SUMMARY = "`with torch.inference_mode()` inside a warmup / autotune / CUDA-graph capture path"
    RATIONALE = (
        "Serving and CUDA graph capture/replay run under torch.no_grad() (or the caller's grad mode). Any "
        "reusable buffer that warmup allocates lazily under inference mode becomes an inference tensor, and the "
        "first in-place update to it during serving or capture crashes with 'Inplace update to inference tensor "
        "outside InferenceMode is not allowed'. Also reported: a with-item that enters inference mode through a "
        "helper (a factory, a platform wrapper such as `current_platform.inference_mode()`); dropping such an "
        "item is an unsafe fix, since the helper may do more.")
    FIX = ("Remove the inference_mode item (unwrap the block when it was the only one) and let the caller's run_ctx "
           "decide; `--style no_grad` swaps in torch.no_grad() instead. An `as` target stays bound through "
           "contextlib.nullcontext().")
    TORCH_NAMES = ("torch.inference_mode", "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode",
                   "torch._C._InferenceMode")
    INVALID = (
        "import torch\n"
        "class CudaGraphRunner:\n"
        "    def capture(self):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.run_once()\n",
        "import torch as th\n"
        "def kernel_warmup(model):\n"
        "    with th.inference_mode(), open('log') as f:  # expect: GM101:10\n"
        "        model(f)\n",
        "from torch import inference_mode as im\n"
        "async def warmup(model):\n"
        "    async with im():  # expect: GM101:16\n"
        "        await model()\n",
        "import contextlib, torch\n"
        "def autotune(fn):\n"
        "    with contextlib.ExitStack() as stack:\n"
        "        stack.enter_context(torch.autograd.grad_mode.inference_mode())  # expect: GM101:29\n"
        "        fn()\n",
        "import torch\n"
        "class Runner:\n"
        "    def warmup(self):\n"
        "        self._prepare()\n"
        "    def _prepare(self):\n"
        "        with torch.autograd.inference_mode():  # expect: GM101:14\n"
        "            self.model()\n",
        "import torch\n"
        "def warmup(model):\n"
        "    with getattr(torch, 'inference_mode')():  # expect: GM101:10\n"
        "        model()\n"
        "    with torch._C._InferenceMode(True):  # expect: GM101:10\n"
        "        model()\n",
        # a graph captured under a name that matches no pattern is a capture path all the same
        "import torch\n"
        "def record(model, graph):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        with torch.cuda.graph(graph):\n"
        "            model()\n",
        # the switch through a local alias, and through a field that only ever holds it
        "import torch\n"
        "def warmup(model):\n"
        "    switch = torch.inference_mode\n"
        "    with switch():  # expect: GM101:10\n"
        "        model()\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.ctx = torch.inference_mode\n"
        "    def warmup(self):\n"
        "        with self.ctx():  # expect: GM101:14\n"
        "            self.model()\n",
        {"engine/platform.py":
            "import torch\n"
            "class Platform:\n"
            "    @classmethod\n"
            "    def inference_mode(cls):\n"
            "        return torch.inference_mode(mode=True)\n"
            "current_platform = Platform()\n",
         "engine/worker.py":
            "from engine.platform import current_platform\n"
            "def warmup(model):\n"
            "    with current_platform.inference_mode():  # expect: GM101:10\n"
            "        model()\n"},
    )
    VALID = (
        "import torch\n"
        "class CudaGraphRunner:\n"
        "    def capture(self):\n"
        "        with torch.no_grad():\n"
        "            self.run_once()\n",
        # an alias a nested function rebinds; a field alias a subclass or setattr rebinds
        "import torch\n"
        "def warmup(model):\n"
        "    im = torch.inference_mode\n"
        "    def off():\n"
        "        nonlocal im\n"
        "        im = torch.no_grad\n"
        "    off()\n"
        "    with im():\n"
        "        model()\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.ctx = torch.inference_mode\n"
        "        self.mode = torch.inference_mode\n"
        "        setattr(self, 'mode', torch.no_grad)\n"
        "    def warmup(self):\n"
        "        with self.ctx(), self.mode():\n"
        "            self.model()\n"
        "class Quiet(Runner):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.ctx = torch.no_grad\n",
        # a field that holds the switch or something else
        "import contextlib, torch\n"
        "class Runner:\n"
        "    def __init__(self, fast):\n"
        "        self.ctx = torch.inference_mode\n"
        "    def use_nothing(self):\n"
        "        self.ctx = contextlib.nullcontext\n"
        "    def warmup(self):\n"
        "        with self.ctx():\n"
        "            self.model()\n",
        "import torch\n"
        "class Model:\n"
        "    def forward(self, x):\n"
        "        with torch.inference_mode():\n"
        "            return self.layer(x)\n",
        "import torch\n"
        "def warmup(model, enabled):\n"
        "    with torch.inference_mode(False):\n"
        "        model()\n"
        "    with torch.inference_mode(mode=False):\n"
        "        model()\n"
        "    with torch.inference_mode(enabled):\n"
        "        model()\n"
        "    with torch.inference_mode(1):\n"
        "        model()\n",
        "import contextlib\n"
        "def inference_mode():\n"
        "    return contextlib.nullcontext()\n"
        "def warmup(model):\n"
        "    with inference_mode():\n"
        "        model()\n",
        # `*capture*` with no CUDA graph anywhere: capturing K/V tensors is not graph capture
        "import torch\n"
        "class Refiner:\n"
        "    def capture_block_kv(self, x):\n"
        "        with torch.inference_mode():\n"
        "            return self.kv(x)\n",
        # a helper that warmup and serving share is judged at its warm callers, not rewritten
        "import torch\n"
        "def execute_model(model, x):\n"
        "    return run_forward(model, x)\n"
        "def warmup(model, x):\n"
        "    run_forward(model, x)\n"
        "def run_forward(model, x):\n"
        "    with torch.inference_mode():\n"
        "        return model(x)\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        project = analysis.project
        for switch, why in warm_switches(analysis, INFERENCE):
            if switch.role == "with":
                record = project.function(switch.fid)["withs"][switch.with_index]
                fixes = (_with_fix(record, [switch.item], safe=not record.items[switch.item].has_as),)
                yield self.finding(analysis, switch.fid, switch.line, switch.col,
                                   f"`with {switch.text}` {where(analysis, switch.fid)}", (why, CRASH), fixes)
            elif switch.role == "enter_context":
                yield self.finding(analysis, switch.fid, switch.line, switch.col,
                                   f"`enter_context({switch.text})` {where(analysis, switch.fid)}", (why, CRASH),
                                   (Fix("null_context", (switch.line, switch.col), True),))
        for fid in mismatched_warm_functions(analysis, INFERENCE):
            record_list = project.function(fid)["withs"]
            for w_index, i_index, mode in analysis.indirect_with_items(fid):
                record = record_list[w_index]
                item = record.items[i_index]
                yield self.finding(analysis, fid, item.line, item.col,
                                   f"with-item enters inference mode through {mode.via} {where(analysis, fid)}",
                                   (analysis.phases.why_warm(fid), CRASH),
                                   (_with_fix(record, [i_index], safe=False),))


def _with_fix(record: list, items: list[int], safe: bool) -> Fix:
    positions = tuple((record.items[i].line, record.items[i].col) for i in items)
    action = "unwrap_with" if len(items) == len(record.items) else "drop_with_item"
    return Fix(action, (record.line, record.col), safe, positions)
