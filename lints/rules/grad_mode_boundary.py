"""GM1xx: the grad mode of warmup / autotune / capture paths must match serving's.

With the default ``serving-grad-mode = "no_grad"``, inference mode in those
paths is the bug (GM101-GM104). With ``serving-grad-mode = "inference_mode"``
the engine runs every phase under inference mode, so inference mode there is
consistent and ``no_grad`` is the mismatch (GM105).
"""
from __future__ import annotations

from typing import Iterator, Sequence

import libcst as cst

from .. import names
from ..analysis import ModuleAnalysis, ModeRegion
from ..index import CallSite, GradModeRef
from ..model import FixPlan, Rule, RuleHit

_CRASH = ("buffers it lazily allocates become inference tensors, and their first in-place update "
          "outside inference mode raises 'Inplace update to inference tensor outside InferenceMode is not allowed'")

RULES = {
    "GM101": Rule(
        code="GM101",
        name="inference-mode-block-in-warmup-path",
        severity="warning",
        summary="`with torch.inference_mode()` inside a warmup / autotune / CUDA-graph capture path",
        rationale=(
            "Serving and CUDA graph capture/replay run under torch.no_grad() (or the caller's grad mode). "
            "Any reusable buffer that warmup allocates lazily under inference mode becomes an inference "
            "tensor, and the first in-place update to it during serving or capture crashes with "
            "'Inplace update to inference tensor outside InferenceMode is not allowed'."
        ),
        bad=(
            "class CudaGraphRunner:\n"
            "    def capture(self):\n"
            "        with torch.inference_mode():\n"
            "            self.run_once()\n"
        ),
        good=(
            "class CudaGraphRunner:\n"
            "    def capture(self, run_ctx=None):\n"
            "        with run_ctx or contextlib.nullcontext():\n"
            "            self.run_once()\n"
        ),
        fix="Remove the inference_mode wrapper (dedent its body) and let the caller's run_ctx decide; "
            "`--style no_grad` swaps in torch.no_grad() instead.",
        invalid=(
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
            "    def capture(self):\n"
            "        def run_once():\n"
            "            with torch.inference_mode(True):  # expect: GM101:18\n"
            "                return self.model()\n"
            "        run_once()\n",
            "import torch\n"
            "class Runner:\n"
            "    def warmup(self):\n"
            "        self._prepare()\n"
            "    def _prepare(self):\n"
            "        with torch.autograd.inference_mode():  # expect: GM101:14\n"
            "            self.model()\n",
        ),
        valid=(
            "import torch\n"
            "class CudaGraphRunner:\n"
            "    def capture(self):\n"
            "        with torch.no_grad():\n"
            "            self.run_once()\n",
            "import torch\n"
            "class Model:\n"
            "    def forward(self, x):\n"
            "        with torch.inference_mode():\n"
            "            return self.layer(x)\n",
            "import torch\n"
            "def warmup(model):\n"
            "    with torch.inference_mode(False):\n"
            "        model()\n"
            "    with torch.inference_mode(mode=False):\n"
            "        model()\n",
            "import contextlib\n"
            "def inference_mode():\n"
            "    return contextlib.nullcontext()\n"
            "def warmup(model):\n"
            "    with inference_mode():\n"
            "        model()\n",
            "import torch\n"
            "def warmup(model, enabled):\n"
            "    with torch.inference_mode(enabled):\n"
            "        model()\n",
        ),
    ),
    "GM102": Rule(
        code="GM102",
        name="inference-mode-decorator-on-warmup-path",
        severity="warning",
        summary="`@torch.inference_mode()` decorating a warmup / autotune / capture function",
        rationale="A decorator switches the whole function to inference mode: same crash as GM101.",
        bad="@torch.inference_mode()\ndef kernel_warmup(self):\n    self.run_once()\n",
        good="@torch.no_grad()\ndef kernel_warmup(self):\n    self.run_once()\n",
        fix="Replace it with `@torch.no_grad()` (dropping it would let warmup build autograd graphs).",
        invalid=(
            "import torch\n"
            "@torch.inference_mode()  # expect: GM102:2\n"
            "def kernel_warmup(model):\n"
            "    model()\n",
            "import torch\n"
            "class Runner:\n"
            "    @torch.inference_mode  # expect: GM102:6\n"
            "    def profile_run(self):\n"
            "        self.model()\n",
            "from torch import inference_mode\n"
            "class PiecewiseGraphRunner:\n"
            "    @inference_mode()  # expect: GM102:6\n"
            "    def replay(self):\n"
            "        self.graph.replay()\n",
        ),
        valid=(
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
        ),
    ),
    "GM103": Rule(
        code="GM103",
        name="inference-mode-context-object-in-warmup-path",
        severity="warning",
        summary="an inference-mode context object built or handed on in a warmup / autotune / capture path",
        rationale="`ctx = run_ctx or torch.inference_mode()` and friends enter inference mode later: same crash.",
        bad="def autotune_context(run_ctx=None):\n    return run_ctx or torch.inference_mode()\n",
        good="def autotune_context(run_ctx=None):\n    return run_ctx or contextlib.nullcontext()\n",
        fix="Use `contextlib.nullcontext()` so the caller's grad mode stays in charge.",
        invalid=(
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
            "        self.capture_one(run_ctx=torch.inference_mode())  # expect: GM103:34\n",
        ),
        valid=(
            "import contextlib\n"
            "def dummy_run(model, run_ctx=None):\n"
            "    with run_ctx or contextlib.nullcontext():\n"
            "        model()\n",
            "import torch\n"
            "def make_serving_ctx():\n"
            "    return torch.inference_mode()\n",
        ),
    ),
    "GM104": Rule(
        code="GM104",
        name="warmup-path-called-under-inference-mode",
        severity="warning",
        summary="a warmup / autotune / capture function called from inside an inference-mode block",
        rationale="The callee is clean, but its caller switches inference mode on around it: same crash.",
        bad="with torch.inference_mode():\n    runner.capture()\n",
        good="with torch.no_grad():\n    runner.capture()\n",
        fix="Remove the wrapper when the block only runs warmup/capture calls (safe); otherwise it is an "
            "unsafe fix, applied only with --unsafe-fixes.",
        invalid=(
            "import torch\n"
            "def main(runner):\n"
            "    with torch.inference_mode():\n"
            "        runner.capture()  # expect: GM104:9\n",
            "import torch\n"
            "@torch.inference_mode()\n"
            "def start(engine):\n"
            "    engine.load()\n"
            "    engine.kernel_warmup()  # expect: GM104:5\n",
            "import torch\n"
            "class Engine:\n"
            "    def prepare(self):\n"
            "        self.capture_graphs()\n"
            "    def capture_graphs(self):\n"
            "        pass\n"
            "    def start(self):\n"
            "        with torch.inference_mode():\n"
            "            self.prepare()  # expect: GM104:13\n",
        ),
        valid=(
            "import torch\n"
            "def main(runner):\n"
            "    with torch.no_grad():\n"
            "        runner.capture()\n",
            "import torch\n"
            "def main(model, x):\n"
            "    with torch.inference_mode():\n"
            "        return model(x)\n",
        ),
    ),
    "GM105": Rule(
        code="GM105",
        name="no-grad-in-warmup-path-with-inference-mode-serving",
        severity="warning",
        summary="`torch.no_grad()` in a warmup / capture path while serving-grad-mode is inference_mode",
        rationale=(
            "Engines that serve under inference mode must warm up and capture under it too: buffers made "
            "under no_grad are normal tensors, while those made during serving are inference tensors, and "
            "the first in-place update across the boundary crashes. Only reported with "
            "`serving-grad-mode = \"inference_mode\"`."
        ),
        bad="def capture(self):\n    with torch.no_grad():\n        self.run_once()\n",
        good="def capture(self):\n    with torch.inference_mode():\n        self.run_once()\n",
        fix="Use the serving grad mode (torch.inference_mode()) in the warmup/capture path.",
        # Rule examples run with the default config; GM105 has its own tests.
    ),
}

def _torch_switch(analysis: ModuleAnalysis, ref: GradModeRef) -> str:
    return " ".join(analysis.index.module.code_for_node(ref.expr).split())


def _with_plan(with_node: cst.With, targets: Sequence[cst.BaseExpression], safe: bool) -> FixPlan:
    """Drop the items holding ``targets``; with nothing left, unwrap the block."""
    items = tuple(i for i in with_node.items if any(i.item is t for t in targets))
    safe = safe and all(i.asname is None for i in items)  # `as ctx` may be used in the body
    action = "unwrap_with" if len(items) == len(with_node.items) else "drop_with_item"
    return FixPlan(action, with_node, safe, items)


def check(analysis: ModuleAnalysis) -> Iterator[RuleHit]:
    serving = analysis.config.serving_grad_mode
    for fn in analysis.index.functions:
        reason = analysis.warm_reason(fn)
        if reason is None:
            continue
        for ref in fn.grad_refs:
            if not ref.enabled or ref.mode == serving:
                continue
            switch = _torch_switch(analysis, ref)
            where = f"in warmup/capture path {fn.label} ({reason})"
            if ref.mode == names.NO_GRAD:
                yield RuleHit("GM105", ref.line, ref.col,
                              f"`{switch}` {where}, but serving-grad-mode is inference_mode: run every phase "
                              f"under the same grad mode")
                continue
            if ref.role in ("with", "enter_context"):
                if ref.role == "with":
                    plan = _with_plan(ref.owner, [ref.expr], safe=True)
                else:
                    plan = FixPlan("null_context", ref.expr, safe=True)
                yield RuleHit("GM101", ref.line, ref.col, f"`with {switch}` {where}: {_CRASH}", (plan,))
            elif ref.role == "decorator":
                yield RuleHit("GM102", ref.line, ref.col, f"`@{switch}` {where}: {_CRASH}",
                              (FixPlan("decorator_no_grad", ref.owner, safe=True),))
            else:
                yield RuleHit("GM103", ref.line, ref.col,
                              f"inference-mode context object `{switch}` {where}: {_CRASH}",
                              (FixPlan("null_context", ref.expr, safe=True),))
    if serving == names.INFERENCE_MODE:
        return
    yield from _caller_side(analysis)


def _caller_side(analysis: ModuleAnalysis) -> Iterator[RuleHit]:
    """GM104, once per warm call, innermost enclosing inference-mode region first."""
    regions = [r for r in analysis.regions
               if r.mode == names.INFERENCE_MODE and analysis.warm_reason(r.function) is None]
    enclosing: dict[CallSite, list[ModeRegion]] = {}
    why: dict[CallSite, str] = {}
    for region in regions:
        for call in region.calls:
            if call not in why:
                reason = analysis.call_targets_warm(call)
                if reason is None:
                    continue
                why[call] = reason
            enclosing.setdefault(call, []).append(region)
    # Blocks that only wrap warm calls (or other such blocks) can go safely.
    direct_withs = {r.owner: r for r in regions if r.direct_ref is not None and r.direct_ref.role == "with"}
    warm_ids = {id(call.node) for call in why}
    plans: dict[cst.With, FixPlan] = {}
    for with_node, region in direct_withs.items():
        targets = [ref.expr for ref in region.function.grad_refs
                   if ref.owner is with_node and ref.role == "with" and ref.enabled and ref.mode == region.mode]
        plans[with_node] = _with_plan(with_node, targets, safe=_only_warm(with_node, warm_ids, direct_withs))
    for call, found in sorted(enclosing.items(), key=lambda item: (item[0].line, item[0].col)):
        found.sort(key=lambda r: -r.line)  # innermost (latest-starting) first
        inner = found[0]
        yield RuleHit(
            "GM104", call.line, call.col,
            f"{why[call]}, called under inference mode entered by {inner.via} at line {inner.line}: {_CRASH}",
            tuple(plans[r.owner] for r in found if r.owner in plans),
        )


def _only_warm(with_node: cst.With, warm_call_ids: set[int], removable: dict) -> bool:
    """True when every statement of the block is a bare warm call or another removable such block."""
    body = with_node.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for stmt in statements:
        if isinstance(stmt, cst.With) and stmt in removable:
            if _only_warm(stmt, warm_call_ids, removable):
                continue
            return False
        small = stmt.body if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else None
        if small is None:
            return False
        for part in small:
            value = part.value if isinstance(part, cst.Expr) else None
            if isinstance(value, cst.Await):
                value = value.expression
            if not (isinstance(value, cst.Call) and id(value) in warm_call_ids):
                return False
    return True
