"""GM2xx: lazily allocated reusable buffers that are later mutated in place."""
from __future__ import annotations

from typing import Iterator, Optional

from .. import names
from ..analysis import ModeRegion, ModuleAnalysis
from ..buffers import Allocation, LazyBuffer
from ..model import Rule, RuleHit
from ..paths import reachable_from

RULES = {
    "GM201": Rule(
        code="GM201",
        name="lazy-buffer-mutated-in-place",
        severity="warning",
        summary="a lazily allocated reusable buffer that is mutated in place elsewhere",
        rationale=(
            "The grad mode active at the first call decides forever whether a lazily allocated buffer is "
            "an inference tensor. If that first call can come from a phase under inference mode (warmup, "
            "autotune) and a later in-place update from another (serving, CUDA graph capture under "
            "no_grad), the update raises 'Inplace update to inference tensor outside InferenceMode is not "
            "allowed'. Allocate such buffers eagerly (in __init__ or under the serving grad mode), or make "
            "sure every phase runs under one grad mode."
        ),
        bad=(
            "def forward(self, x, n):\n"
            "    if self._topk_idx_out is None or self._topk_idx_out.shape[0] < n:\n"
            "        self._topk_idx_out = torch.empty(n, dtype=torch.int32)\n"
            "    self._topk_idx_out[n:].fill_(-1)\n"
        ),
        good=(
            "def __init__(self, max_tokens):\n"
            "    self._topk_idx_out = torch.empty(max_tokens, dtype=torch.int32)\n"
        ),
        fix="Not auto-fixed: allocate eagerly, or align the grad modes (see GM1xx). Opt-in: enable it with "
            "`--select GM2` / `extend-select = [\"GM201\"]` (GM202, the crash combination, is on by default).",
        default_enabled=False,
        invalid=(
            "import torch\n"
            "class TopK:\n"
            "    def __init__(self):\n"
            "        self._topk_idx_out = None\n"
            "    def forward(self, x, num_tokens, prev_n):\n"
            "        if self._topk_idx_out is None or self._topk_idx_out.shape[0] < prev_n:\n"
            "            self._topk_idx_out = torch.empty(prev_n, dtype=torch.int32)  # expect: GM201:13\n"
            "        topk_idx_out = self._topk_idx_out\n"
            "        topk_idx_out[num_tokens:prev_n].fill_(-1)\n",
            "import torch\n"
            "_WORKSPACE = None\n"
            "def get_workspace(n, device):\n"
            "    global _WORKSPACE\n"
            "    if _WORKSPACE is None or _WORKSPACE.numel() < n:\n"
            "        _WORKSPACE = torch.zeros(n, device=device)  # expect: GM201:9\n"
            "    return _WORKSPACE\n"
            "def run(x):\n"
            "    ws = get_workspace(x.numel(), x.device)\n"
            "    torch.add(x, 1, out=ws[: x.numel()])\n",
            "import functools, torch\n"
            "@functools.lru_cache(maxsize=None)\n"
            "def workspace(n):\n"
            "    return torch.empty(n)  # expect: GM201:5\n"
            "def run(x):\n"
            "    workspace(8).zero_()\n",
            "import torch\n"
            "class Moe:\n"
            "    def __init__(self):\n"
            "        self._cache = {}\n"
            "    def _buf(self, key, like):\n"
            "        if key not in self._cache:\n"
            "            self._cache[key] = like.new_empty(like.shape)  # expect: GM201:13\n"
            "        return self._cache[key]\n"
            "    def forward(self, x, shared_output):\n"
            "        final_hidden_states = self._buf(x.shape, x)\n"
            "        final_hidden_states += shared_output\n"
            "        return final_hidden_states\n",
            "import torch\n"
            "class Sampler:\n"
            "    def forward(self, x):\n"
            "        buf = getattr(self, '_probs', None)\n"
            "        if buf is None:\n"
            "            buf = self._probs = torch.empty_like(x)  # expect: GM201:13\n"
            "        buf.copy_(x)\n",
        ),
        valid=(
            "import torch\n"
            "class TopK:\n"
            "    def __init__(self, n):\n"
            "        self._topk_idx_out = torch.empty(n, dtype=torch.int32)\n"
            "    def forward(self, num_tokens, prev_n):\n"
            "        self._topk_idx_out[num_tokens:prev_n].fill_(-1)\n",
            "import torch\n"
            "class Lazy:\n"
            "    def get(self, n):\n"
            "        if self._buf is None:\n"
            "            self._buf = torch.zeros(n)\n"
            "            self._buf.fill_(-1)\n"
            "        return self._buf.clone()\n",
            "import torch\n"
            "class ReadOnly:\n"
            "    def get(self, n):\n"
            "        if self._buf is None:\n"
            "            self._buf = torch.zeros(n)\n"
            "        return self._buf.sum()\n",
            "import torch\n"
            "def f(x):\n"
            "    y = torch.empty_like(x)\n"
            "    y.fill_(0)\n"
            "    return y\n",
        ),
    ),
    "GM202": Rule(
        code="GM202",
        name="lazy-buffer-allocated-under-inference-mode-warmup",
        severity="error",
        summary="a GM201 buffer whose allocation is reachable from a warmup/autotune/capture path under "
                "inference mode: the crash combination",
        rationale=(
            "This is the exact crash: warmup under inference mode allocates the buffer (an inference "
            "tensor), serving or graph capture under no_grad then updates it in place and raises "
            "'Inplace update to inference tensor outside InferenceMode is not allowed'."
        ),
        bad=(
            "def kernel_warmup(self):\n"
            "    with torch.inference_mode():\n"
            "        self.moe.forward(x)   # allocates self._ws lazily\n"
        ),
        good=(
            "def kernel_warmup(self, run_ctx=None):\n"
            "    with run_ctx or contextlib.nullcontext():\n"
            "        self.moe.forward(x)\n"
        ),
        fix="Fix the GM1xx finding on the warmup path (python -m lints.codemod does), or allocate eagerly.",
        invalid=(
            "import torch\n"
            "class Moe:\n"
            "    def __init__(self):\n"
            "        self._ws = None\n"
            "    def forward(self, x, shared_output):\n"
            "        if self._ws is None or self._ws.shape[0] < x.shape[0]:\n"
            "            self._ws = torch.empty_like(x)  # expect: GM201:13 GM202:13\n"
            "        out = self._ws[: x.shape[0]]\n"
            "        out += shared_output\n"
            "        return out\n"
            "    def kernel_warmup(self, x):\n"
            "        with torch.inference_mode():  # expect: GM101:14\n"
            "            self.forward(x, x)\n",
        ),
        valid=(
            "import torch\n"
            "class Moe:\n"
            "    def forward(self, x, shared_output):\n"
            "        if self._ws is None or self._ws.shape[0] < x.shape[0]:\n"
            "            self._ws = torch.empty_like(x)  # expect: GM201:13\n"
            "        out = self._ws[: x.shape[0]]\n"
            "        out += shared_output\n"
            "        return out\n"
            "    def kernel_warmup(self, x):\n"
            "        with torch.no_grad():\n"
            "            self.forward(x, x)\n",
        ),
    ),
}


def _mutation_text(buffer: LazyBuffer) -> str:
    shown = sorted(buffer.mutations, key=lambda m: (m.line, m.col))
    parts = [f"{m.how} at line {m.line}" for m in shown[:3]]
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return ", ".join(parts) + more


def _inference_reach(analysis: ModuleAnalysis, alloc: Allocation) -> Optional[str]:
    """Why ``alloc`` can run under inference mode on a warmup/capture path, if it can."""
    for region in analysis.regions:
        if region.mode != names.INFERENCE_MODE:
            continue
        warm = analysis.warm_reason(region.function)
        if warm is not None:
            context = f"warmup/capture path {region.function.label} ({warm})"
        else:
            warm_calls = [c for c in region.calls if analysis.call_targets_warm(c)]
            if not warm_calls:
                continue
            context = f"{region.function.label}, around warmup/capture call at line {warm_calls[0].line}"
        if region.encloses(alloc.function, alloc.fact.frame.withs) or _nested_in(alloc, region):
            return f"allocated inside the inference-mode region at line {region.line} in {context}"
        reached = reachable_from(analysis.index, region.calls)
        if alloc.function in reached:
            return (f"reached from the inference-mode region ({region.via}) at line {region.line} "
                    f"in {context}, via the call at line {reached[alloc.function]}")
    return None


def _nested_in(alloc: Allocation, region: ModeRegion) -> bool:
    fn = alloc.function.parent
    while fn is not None:
        if isinstance(region.owner, type(fn)) and region.owner is fn:
            return True
        fn = fn.parent
    return False


def check(analysis: ModuleAnalysis) -> Iterator[RuleHit]:
    serving_is_inference = analysis.config.serving_grad_mode == names.INFERENCE_MODE
    for buffer in analysis.lazy_buffers:
        mutated = _mutation_text(buffer)
        for alloc in buffer.allocations:
            yield RuleHit(
                "GM201", alloc.line, alloc.col,
                f"`{buffer.key}` is lazily allocated ({alloc.why_lazy}) and mutated in place ({mutated}): "
                f"if warmup allocates it under inference mode, those updates crash outside inference mode",
            )
            if serving_is_inference:
                continue
            why = _inference_reach(analysis, alloc)
            if why is not None:
                yield RuleHit(
                    "GM202", alloc.line, alloc.col,
                    f"`{buffer.key}` becomes an inference tensor: {why}; its in-place update ({mutated}) "
                    f"then raises 'Inplace update to inference tensor outside InferenceMode is not allowed'",
                )
