from __future__ import annotations

from typing import Iterator, Optional

from ..analysis import ProjectAnalysis
from ..buffers import Allocation, Mutation
from ..model import Finding
from ..gradmodes import OFF, ON, GradModes, Origin
from ..rule import Rule

_ERROR = "'Inplace update to inference tensor outside InferenceMode is not allowed'"


# A dict-cache pool and an autotune run of the router that takes from it (several examples share them).
_TOPK_POOL = ("import torch\n"
              "_WORKSPACES = {}\n"
              "def get_topk_buffer(n, device):\n"
              "    buf = _WORKSPACES.get(device)\n"
              "    if buf is None or buf.numel() < n:\n"
              "        buf = torch.empty(n, dtype=torch.int32, device=device)  # expect: GM202:9\n"
              "        _WORKSPACES[device] = buf\n"
              "    return buf\n")
_AUTOTUNE_ROUTE = ("import torch\n"
                   "from engine import moe\n"
                   "def autotune(x):\n"
                   "    with torch.inference_mode():  # expect: GM101:10\n"
                   "        moe.route(x, 4, 8)\n"
                   "@torch.no_grad()\n"
                   "def serve(x):\n"
                   "    moe.route(x, 4, 8)\n")


class LazyBufferBecomesInferenceTensor(Rule):
    CODE = "GM202"
    NAME = "lazy-buffer-becomes-inference-tensor"
    SEVERITY = "error"
    SUMMARY = "a lazily allocated buffer that may be allocated under inference mode and is updated in place " \
              "outside it: the crash"
    RATIONALE = ("Whatever the functions are called: the buffer is allocated on the first call that needs it; when "
                 "that call may run under inference mode, it is an inference tensor for good, and its in-place update "
                 f"on a path that runs outside inference mode raises {_ERROR}. The grad mode of each side is followed "
                 "along every call chain, from program and thread entries (grad enabled), switches and decorators; a "
                 "side whose mode is unknown (an API no project code calls) makes no finding. The finding names the "
                 "allocation, both chains, and the side to change. Not reported: an allocation under "
                 "`torch.inference_mode(False)`, a buffer written only by kernels (Triton, CUDA, JIT write through "
                 "pointers), and an update inside the allocation's own guard (it runs only on the allocating call).")
    FIX = "fix the GM1xx finding on the warm path (the codemod does), or allocate under torch.inference_mode(False)"
    TORCH_NAMES = ("torch.empty", "torch.zeros", "torch.inference_mode")
    INVALID = (
        "import contextlib, torch\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None or self._out.shape[0] < x.shape[0]:\n"
        "            self._out = torch.empty_like(x)  # expect: GM202:13\n"
        "        self._out[: x.shape[0]].fill_(-1)\n"
        "        return self._out\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.moe = MoE()\n"
        "    def warmup(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.moe.forward(x)\n"
        "    def execute_model(self, x):\n"
        "        with torch.no_grad():\n"
        "            return self.moe.forward(x)\n",
        # the buffer reaches the update only where a parameter tested None is bound again (an except target)
        "import torch\n"
        "_B = {}\n"
        "def get_b(n):\n"
        "    t = _B.get(n)\n"
        "    if t is None:\n"
        "        t = torch.zeros(n)  # expect: GM202:9\n"
        "        _B[n] = t\n"
        "    return t\n"
        "def fwd(n, work, state=None):\n"
        "    if state is None:\n"
        "        g = get_b(n)\n"
        "    try:\n"
        "        work()\n"
        "    except Exception as state:\n"
        "        assert state is not None\n"
        "        g.zero_()\n"
        "def main(work):\n"
        "    with torch.inference_mode():\n"
        "        get_b(4)\n"
        "    fwd(4, work)\n"
        "if __name__ == '__main__':\n"
        "    main(lambda: 1 / 0)\n",
        {"engine/pool.py": _TOPK_POOL,
         "engine/moe.py":
            "from engine.pool import get_topk_buffer\n"
            "def route(x, n, prev_n):\n"
            "    topk_idx_out = get_topk_buffer(prev_n, x.device)\n"
            "    topk_idx_out[n:prev_n].fill_(-1)\n"
            "    return topk_idx_out\n",
         "engine/warm.py": _AUTOTUNE_ROUTE},
        {"engine/workspace.py":
            "import dataclasses, torch\n"
            "@dataclasses.dataclass\n"
            "class Workspace:\n"
            "    topk_idx: torch.Tensor\n"
            "class Pool:\n"
            "    def get(self, n):\n"
            "        if self._topk is None:\n"
            "            self._topk = torch.empty(n)  # expect: GM202:13\n"
            "        return Workspace(topk_idx=self._topk)\n",
         "engine/layer.py":
            "from engine.workspace import Pool\n"
            "class Layer:\n"
            "    def __init__(self):\n"
            "        self.pool = Pool()\n"
            "    def forward(self, x, n, prev_n):\n"
            "        ws = self.pool.get(prev_n)\n"
            "        ws.topk_idx[n:prev_n].fill_(-1)\n",
         "engine/runner.py":
            "import torch\n"
            "from engine.layer import Layer\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.layer = Layer()\n"
            "    @torch.inference_mode()  # expect: GM102:6\n"
            "    def warmup(self, x):\n"
            "        self.layer.forward(x, 4, 8)\n"
            "def main():\n"
            "    runner = Runner()\n"
            "    runner.warmup(None)\n"
            "    runner.layer.forward(None, 4, 8)\n"
            "if __name__ == '__main__':\n"
            "    main()\n"},
        # a copy that may not run (a loop), or the buffer bound again after the copy: the update may
        # still write the buffer
        {"engine/pool.py":
            "import torch\n"
            "_WORKSPACES = {}\n"
            "def get_topk_buffer(n):\n"
            "    buf = _WORKSPACES.get(n)\n"
            "    if buf is None:\n"
            "        buf = torch.empty(n)  # expect: GM202:9\n"
            "        _WORKSPACES[n] = buf\n"
            "    return buf\n",
         "engine/moe.py":
            "from engine.pool import get_topk_buffer\n"
            "def route(x, n, copies):\n"
            "    out = get_topk_buffer(n)\n"
            "    for _ in range(copies):\n"
            "        out = out.clone()\n"
            "    out.copy_(x)\n"
            "def combine(x, n):\n"
            "    out = get_topk_buffer(n)\n"
            "    out = out.clone()\n"
            "    out, k = get_topk_buffer(n), 0\n"
            "    out.fill_(k)\n"
            "def gather(x, n):\n"
            "    out = get_topk_buffer(n)\n"
            "    out = +out\n"
            "    out.fill_(0)\n"
            "    out = [out]\n"
            "    out[0].fill_(0)\n",
         "engine/warm.py":
            "import torch\n"
            "from engine import moe\n"
            "def autotune(x):\n"
            "    with torch.inference_mode():  # expect: GM101:10\n"
            "        moe.route(x, 4, 0)\n"
            "        moe.combine(x, 4)\n"
            "        moe.gather(x, 4)\n"
            "@torch.no_grad()\n"
            "def serve(x):\n"
            "    moe.route(x, 4, 0)\n"
            "    moe.combine(x, 4)\n"
            "    moe.gather(x, 4)\n"},
        # a dict cache of the class, reached through a module-level instance
        {"engine/ws.py":
            "import torch\n"
            "class Workspace:\n"
            "    _cache = {}\n"
            "    def get(self, n):\n"
            "        if n not in self._cache:\n"
            "            self._cache[n] = torch.zeros(n)  # expect: GM202:13\n"
            "        return self._cache[n]\n",
         "engine/kernels.py":
            "import torch\n"
            "from engine.ws import Workspace\n"
            "_WS = Workspace()\n"
            "def fused_op(x):\n"
            "    out = _WS.get(x.numel())\n"
            "    out.copy_(x)\n"
            "def warmup(x):\n"
            "    with torch.inference_mode():  # expect: GM101:10\n"
            "        fused_op(x)\n"
            "def main(x):\n"
            "    warmup(x)\n"
            "    fused_op(x)\n"
            "if __name__ == '__main__':\n"
            "    main(None)\n"},
        # the backend is built by a factory function
        {"engine/backend.py":
            "import torch\n"
            "class FlashBackend:\n"
            "    def forward(self, x):\n"
            "        if self._ws is None:\n"
            "            self._ws = torch.empty_like(x)  # expect: GM202:13\n"
            "        self._ws.copy_(x)\n"
            "def get_backend():\n"
            "    return FlashBackend()\n",
         "engine/runner.py":
            "import torch\n"
            "from engine.backend import get_backend\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.backend = get_backend()\n"
            "    def warmup(self, x):\n"
            "        with torch.inference_mode():  # expect: GM101:14\n"
            "            self.backend.forward(x)\n"
            "    @torch.no_grad()\n"
            "    def execute_model(self, x):\n"
            "        self.backend.forward(x)\n"},
        # a slice assignment into a tensor taken out of a dict cache writes that tensor
        {"engine/pool.py": _TOPK_POOL,
         "engine/moe.py":
            "from engine.pool import get_topk_buffer\n"
            "def route(x, n, prev_n):\n"
            "    topk_idx_out = get_topk_buffer(prev_n, x.device)\n"
            "    topk_idx_out[n:prev_n] = -1\n"
            "    return topk_idx_out\n",
         "engine/warm.py": _AUTOTUNE_ROUTE},
        # a pooled buffer bound to a local in a while body: the test runs again after it
        "import torch\n"
        "_POOL = {}\n"
        "def get_buf(n):\n"
        "    buf = _POOL.get(n)\n"
        "    if buf is None:\n"
        "        buf = torch.empty(n)  # expect: GM202:9\n"
        "        _POOL[n] = buf\n"
        "    return buf\n"
        "def route(x, n):\n"
        "    g = torch.zeros(n)\n"
        "    while g.add_(1).max() < 3:\n"
        "        # next round: the pooled buffer\n"
        "        g = get_buf(n)\n"
        "    return g\n"
        "def warmup(x):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        route(x, 4)\n"
        "@torch.no_grad()\n"
        "def serve(x):\n"
        "    return route(x, 4)\n",
    )
    VALID = (
        # the class of the object is not known: a factory method a subclass overrides, a field bound to
        # two classes, a module instance bound twice or rebound by a function
        {"engine/backend.py":
            "import torch\n"
            "class Lazy:\n"
            "    def forward(self, x):\n"
            "        if self._ws is None:\n"
            "            self._ws = torch.empty_like(x)\n"
            "        self._ws.copy_(x)\n"
            "class Fresh:\n"
            "    def forward(self, x):\n"
            "        return x * 2\n"
            "def get_backend():\n"
            "    return Lazy()\n"
            "class Base:\n"
            "    def __init__(self, fresh):\n"
            "        self.backend = self.make_backend()\n"
            "        self.other = get_backend()\n"
            "        if fresh:\n"
            "            self.other = Fresh()\n"
            "    def make_backend(self):\n"
            "        return Lazy()\n"
            "class Sub(Base):\n"
            "    def make_backend(self):\n"
            "        return Fresh()\n"
            "_WS = Lazy()\n"
            "_WS = Fresh()\n"
            "_ONE = Lazy()\n"
            "def configure():\n"
            "    global _ONE\n"
            "    _ONE = Fresh()\n"
            "def serve(runner: Sub, x):\n"
            "    runner.backend.forward(x)\n"
            "    runner.other.forward(x)\n"
            "    _WS.forward(x)\n"
            "    _ONE.forward(x)\n",
         "engine/warm.py":
            "import torch\n"
            "from engine.backend import serve\n"
            "def warmup(runner, x):\n"
            "    with torch.inference_mode():  # expect: GM101:10\n"
            "        serve(runner, x)\n"},
        # the known workaround: allocate outside inference mode
        "import torch\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            with torch.inference_mode(False):\n"
        "                self._out = torch.empty_like(x)\n"
        "        self._out.zero_()\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.moe = MoE()\n"
        "    def warmup(self, x):\n"
        "        with torch.no_grad():\n"
        "            self.moe.forward(x)\n",
        # written only by a Triton kernel (through pointers): no in-place torch op, no crash
        "import torch, triton\n"
        "@triton.jit\n"
        "def _fill(out_ptr, n):\n"
        "    out_ptr += n\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            self._out = torch.empty_like(x)\n"
        "        _fill[(1,)](self._out, 4)\n"
        "        _fill(self._out, 4)\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.moe = MoE()\n"
        "    def warmup(self, x):\n"
        "        with torch.no_grad():\n"
        "            self.moe.forward(x)\n",
        # updates made on a copy, rebound to the same name: the buffer itself is never written
        {"engine/pool.py":
            _TOPK_POOL.replace("  # expect: GM202:9", "") +
            "def remember(device, t):\n"
            "    cache = _WORKSPACES\n"
            "    cache[device] = t\n",
         "engine/moe.py":
            "import torch\n"
            "from engine.pool import get_topk_buffer, remember\n"
            "def route(x, n, prev_n):\n"
            "    topk_idx_out = get_topk_buffer(prev_n, x.device)\n"
            "    topk_idx_out = topk_idx_out[:prev_n].clone()\n"
            "    topk_idx_out[n:prev_n] = -1\n"
            "    return topk_idx_out\n"
            "def scatter(out):\n"
            "    out = torch.clone(out)\n"
            "    out.fill_(0)\n"
            "def combine(x, n):\n"
            "    scatter(get_topk_buffer(n, x.device))\n"
            "    remember(x.device, x)\n"
            "    out = get_topk_buffer(n, x.device)\n"
            "    out = out[:n] * 2\n"
            "    out.mul_(3)\n",
         "engine/warm.py":
            "import torch\n"
            "from engine import moe\n"
            "def autotune(x):\n"
            "    with torch.inference_mode():  # expect: GM101:10\n"
            "        moe.route(x, 4, 8)\n"
            "        moe.combine(x, 4)\n"},
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        project, modes = analysis.project, analysis.modes
        # First the allocations that may run under inference mode (few), then the in-place updates of
        # every buffer (the costly part), only when there is one (a forked child finds both at once).
        suspects = {alloc: on[ON][0] for alloc in analysis.kept_allocations
                    if ON in (on := modes.at(alloc.fid, alloc.with_index))}
        if not suspects:
            return
        library_sites: set[tuple[str, int, int]] = set()
        # lazy allocations first: of a library's buffers seen from one project site, the lazy one is the root
        for alloc, mutations in sorted(analysis.kept_buffers.updated, key=lambda pair: not pair[0].lazy):
            if alloc not in suspects:
                continue
            # the update outside inference mode, where what turned it off runs in a program that also runs what
            # turned it on: not a test kit's or a benchmark script's call of a layer that a server warms up
            together = modes.entry_contexts(suspects[alloc].fid)
            outside = next(((m, states[OFF][0]) for m in mutations
                            if OFF in (states := modes.at(*_update_site(m)))
                            and not together.isdisjoint(modes.entry_contexts(states[OFF][0].fid))), None)
            if outside is None:
                continue
            mutation, off = outside
            on = suspects[alloc]
            site = _reported_site(analysis, alloc, mutation, on)
            if site is None:
                continue  # nothing of it in the project's own files
            if project.is_library(alloc.fid):
                if site in library_sites:
                    continue  # one finding per project site: the same workspace held by several fields
                library_sites.add(site)
            others = _other_updates(project, mutations, mutation, modes)
            update = f"{mutation.how} in {project.label(mutation.fid)} at {project.where(mutation.fid, mutation.line)}"
            notes = (f"buffer: {alloc.why_lazy}, {project.where(alloc.fid, alloc.line)}",
                     f"allocated under inference mode: {modes.describe(on)}",
                     *(f"  {step}" for step in modes.chain(alloc.fid, ON)),
                     f"updated in place: {update}",
                     *others,
                     f"outside inference mode: {modes.describe(off)}",
                     *(f"  {step}" for step in modes.chain(_update_site(mutation)[0], OFF)),
                     f"fix: {_which_side(modes, on, off)}")
            message = f"`{alloc.key.text()}` allocated under inference mode, updated in place outside it"
            yield self.finding(analysis, *site, message, notes)


def _other_updates(project, mutations: list[Mutation], shown: Mutation, modes: GradModes, limit: int = 3
                   ) -> list[str]:
    """A few more in-place updates outside inference mode, one per function, and how many more there are."""
    seen = {(shown.fid, shown.line)}
    functions = {shown.fid}
    out: list[str] = []
    more = 0
    for m in mutations:
        if (m.fid, m.line) in seen or OFF not in modes.at(*_update_site(m)):
            continue
        seen.add((m.fid, m.line))
        if len(out) < limit and m.fid not in functions:
            functions.add(m.fid)
            out.append(f"  also: {m.how.split(' on parameter', 1)[0]} in {project.label(m.fid)} at "
                       f"{project.where(m.fid, m.line)}")
        else:
            more += 1
    if more:
        out.append(f"  and {more} more update site(s)")
    return out


def _update_site(mutation: Mutation) -> tuple[str, int]:
    """The function and with-block whose grad mode the update runs in: where the buffer is handed to the
    function that updates it, if it is handed on."""
    if mutation.entry_fid:
        return mutation.entry_fid, mutation.entry_with
    return mutation.fid, mutation.with_index


def _reported_site(analysis: ProjectAnalysis, alloc: Allocation, mutation: Mutation, on: Origin
                   ) -> Optional[tuple[str, int, int]]:
    """(function, line, column) to report at: the allocation, or where the project's own code is involved
    when it lies in an installed library (the inference-mode switch, the project's call into the library
    on its chain, or the update); None if the project's files play no part."""
    project = analysis.project
    if not project.is_library(alloc.fid):
        return alloc.fid, alloc.line, alloc.col
    if not project.is_library(on.fid):
        return on.fid, on.line, _column_at(project, on.fid, on.line)
    for caller, _callee, line in reversed(analysis.modes.links(alloc.fid, ON)):
        if not project.is_library(caller):
            return caller, line, _column_at(project, caller, line)
    fid, line = (mutation.entry_fid, mutation.entry_line) if mutation.entry_fid else (mutation.fid, mutation.line)
    if not project.is_library(fid):
        return fid, line, _column_at(project, fid, line)
    return None


def _column_at(project, fid: str, line: int) -> int:
    """The column of the first call or with-block of ``fid`` on ``line`` (0-based; 0 if none)."""
    fn = project.function(fid)
    columns = [w.col for w in fn["withs"] if w.line == line] or \
              [c.col for c in fn["calls"] if c.line == line]
    return min(columns) if columns else 0


def _which_side(modes: GradModes, on: Origin, off: Origin) -> str:
    """The change that makes both sides agree: drop the inference mode where the update runs with grad-mode
    switches of its own (no_grad), or enter it where the update runs with none (its entry, a thread)."""
    if off.text.startswith(("no grad-mode context", "its callers", "a new thread")):
        return ("run the update's path under inference mode too (e.g. `@torch.inference_mode()` at its entry), "
                "or allocate under `torch.inference_mode(False)`")
    return (f"drop the inference mode at {modes.project.where(on.fid, on.line)} (let the caller's grad mode "
            f"decide), or allocate under "
            f"`torch.inference_mode(False)`")
