from __future__ import annotations

from typing import Iterator

from ..analysis import ProjectAnalysis
from ..buffers import Allocation, Mutation
from ..model import Finding
from ..regions import INFERENCE, INFERENCE_OFF
from ..rule import Rule
from ..summary_records import method_call


# Headers shared by the examples of an update behind a caller's binding and of a local's reaching bindings.
_LAZY_TESTER = (
    "import torch\n"
    "class Tester:\n"
    "    def prepare(self):\n"
    "        if self.ws is None:\n"
    "            self.ws = torch.zeros(8)  # expect: GM201:13\n"
    "    def _check(self):\n"
    "        self.ws.zero_()\n"
)
_LAZY_T = (
    "import torch\n"
    "class T:\n"
    "    def __init__(self):\n"
    "        self.ws = None\n"
    "    def prepare(self):\n"
    "        if self.ws is None:\n"
    "            self.ws = torch.zeros(8)  # expect: GM201:13\n"
)
_QUIET_PLACEHOLDER = (  # a lazy placeholder the valid examples keep silent about
    "import torch\n"
    "class Tester:\n"
    "    def __init__(self):\n"
    "        self.ws = None\n"
    "    def prepare(self):\n"
    "        if self.ws is None:\n"
    "            self.ws = torch.zeros(8)\n"
)
_LAZY_PROPERTY = (
    "import torch\n"
    "class T:\n"
    "    def __init__(self):\n"
    "        self._ws = None\n"
    "    @property\n"
    "    def workspace(self):\n"
    "        if self._ws is None:\n"
    "            self._ws = torch.zeros(8)  # expect: GM201:13\n"
    "        return self._ws\n"
)
_CACHE_B = (
    "import torch\n"
    "_B = {}\n"
    "def get_b(n):\n"
    "    t = _B.get(n)\n"
    "    if t is None:\n"
    "        t = torch.zeros(n)\n"
    "        _B[n] = t\n"
    "    return t\n"
)
_CACHE_B_REPORTED = _CACHE_B.replace("torch.zeros(n)\n", "torch.zeros(n)  # expect: GM201:9\n")
# a parameter tested None around the binding from the cache and an early raise before its update
_STATE_BOUND_FROM_CACHE = _CACHE_B_REPORTED + (
    "def put(n, cfg, state=None):\n"
    "    if state is None:\n"
    "        h = get_b(n)\n"
)
_STATE_RAISED_THEN_UPDATED = (
    "    if state is None:\n"
    "        raise ValueError(n)\n"
    "    h.zero_()\n"
)
# a local's test of x, changed by `flip()`, guards the binding from the cache; an early raise on x itself
_WANT_FLIPPED = (
    "    flip()\n"
    "    if want:\n"
    "        h = get_b(n)\n"
    "    if x is None:\n"
    "        raise ValueError(n)\n"
    "    h.zero_()\n"
)
_SCALES = (  # a resize, then a fill, in one method
    "import functools, torch\n"
    "class Scales:\n"
    "    def __init__(self, n):\n"
    "        self.k = torch.ones(n)\n"
    "    def load(self, values):\n"
    "        if len(values) > len(self.k):\n"
    "            self.k = torch.ones(len(values))\n"
    "        self.k.copy_(torch.tensor(values))\n"
    "REGISTRY = {'a': Scales}\n"
)
_SCALES_REPORTED = _SCALES.replace("torch.ones(len(values))\n", "torch.ones(len(values))  # expect: GM201:13\n")
_SHARED_SCALES = _SCALES_REPORTED + (  # and a factory that hands back one object
    "_ONE = []\n"
    "def shared(n):\n"
    "    if not _ONE:\n"
    "        _ONE.append(Scales(n))\n"
    "    return _ONE[0]\n"
)
_LIVE_SCALES = _SCALES_REPORTED + (  # each object kept after its one named call
    "LIVE = []\n"
    "def build(values):\n"
    "    s = Scales(4)\n"
    "    LIVE.append(s)\n"
    "    s.load(values)\n"
)
_SERVE_FROM_REGISTRY = (
    "def serve(values, name):\n"
    "    s = REGISTRY[name](4)\n"
    "    s.load(values)\n"
)


class LazyBufferMutatedInPlace(Rule):
    CODE = "GM201"
    NAME = "lazy-buffer-mutated-in-place"
    SUMMARY = "a lazily allocated reusable buffer that is updated in place elsewhere"
    RATIONALE = ("Whatever grad mode runs the first call decides for good whether the buffer is an inference "
                 "tensor. If warmup may allocate it under inference mode, its in-place updates crash outside "
                 "inference mode. Opt-in: a design smell, not a crash by itself (GM202 is the crash).")
    DEFAULT_ENABLED = False
    TORCH_NAMES = ("torch.empty", "torch.zeros", "torch.full", "Tensor.new_empty")
    INVALID = (
        "import torch\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None or self._out.shape[0] < x.shape[0]:\n"
        "            self._out = torch.empty_like(x)  # expect: GM201:13\n"
        "        self._out[: x.shape[0]].zero_()\n"
        "        return self._out\n",
        # updated through a view of it; a call's result updated in place is no buffer of ours
        "import torch\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None or self._out.shape[0] < x.shape[0]:\n"
        "            self._out = torch.empty_like(x)  # expect: GM201:13\n"
        "        self._out.view(-1)[: x.numel()].zero_()\n"
        "        scratch(x).zero_()\n"
        "        return self._out\n",
        # handed out by a property, and by a cached property; updated by torch's function form
        "import functools, torch\n"
        "class Backend:\n"
        "    @property\n"
        "    def workspace(self):\n"
        "        if self._ws is None:\n"
        "            self._ws = torch.empty(64)  # expect: GM201:13\n"
        "        return self._ws\n"
        "    @functools.cached_property\n"
        "    def kv_indptr(self):\n"
        "        return torch.zeros(9)  # expect: GM201:9\n"
        "    def forward(self, x):\n"
        "        ws = self.workspace\n"
        "        ws.zero_()\n"
        "        torch.Tensor.copy_(self.kv_indptr, x)\n",
        # rebound before the update to what may be the buffer itself (torch: each of these raises), to a
        # function of ours, or to a copy that runs only on one branch
        "import torch\n"
        "def roll(b):\n"
        "    return b\n"
        "class Sched:\n"
        "    def forward(self, n, i, v):\n"
        "        if self.a is None:\n"
        "            self.a = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.b is None:\n"
        "            self.b = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.c is None:\n"
        "            self.c = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.d is None:\n"
        "            self.d = torch.zeros(n)  # expect: GM201:13\n"
        "        self.a = self.a.detach()\n"
        "        self.a[i] = v\n"
        "        b = self.b.reshape(-1)\n"
        "        b[i] = v\n"
        "        self.c = roll(self.c)\n"
        "        self.c[i] = v\n"
        "        if i:\n"
        "            self.d = self.d.clone()\n"
        "        self.d[i] = v\n",
        # a copy that may not run before the update (another case, the try body, a loop), one made in
        # another with-body, a method of ours named like a copy, the copy's owner rebound
        "import torch\n"
        "class Ring:\n"
        "    def roll(self, n):\n"
        "        if self.buf is None:\n"
        "            self.buf = torch.zeros(n)  # expect: GM201:13\n"
        "        return self.buf\n"
        "class Sched:\n"
        "    def forward(self, n, i, v, mode, other):\n"
        "        if self.a is None:\n"
        "            self.a = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.b is None:\n"
        "            self.b = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.c is None:\n"
        "            self.c = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.d is None:\n"
        "            self.d = torch.zeros(n)  # expect: GM201:13\n"
        "        if self.e is None:\n"
        "            self.e = torch.zeros(n)  # expect: GM201:13\n"
        "        match mode:\n"
        "            case 1:\n"
        "                self.a = torch.roll(self.a, 1)\n"
        "            case _:\n"
        "                self.a[i] = v\n"
        "        try:\n"
        "            self.b = self.b.clone()\n"
        "        except ValueError:\n"
        "            self.b[i] = v\n"
        "        while mode:\n"
        "            self.c = torch.cat([self.c])\n"
        "            mode = 0\n"
        "        while True:\n"
        "            self.c[i] = v\n"
        "            break\n"
        "        with torch.inference_mode():\n"
        "            self.d = self.d.clone()\n"
        "        with torch.no_grad():\n"
        "            self.d[i] = v\n"
        "        ring = self.rings[i]\n"
        "        out = ring.roll(4)\n"
        "        out.zero_()\n"
        "        st = self\n"
        "        st.e = st.e.clone()\n"
        "        st = other\n"
        "        st.e[i] = v\n"
        "        if self.f is None:\n"
        "            self.f = torch.zeros(n)  # expect: GM201:13\n"
        "        with torch.inference_mode(self.flag), torch._C._InferenceMode(self.flag):\n"
        "            self.f = self.f.clone()\n"
        "        with self.lock:\n"
        "            self.f[i] = v\n"
        "        if self.g is None:\n"
        "            self.g = torch.zeros(n)  # expect: GM201:13\n"
        "        try:\n"
        "            self.g = self.g.clone()\n"
        "        except RuntimeError:\n"
        "            self.g[i] = v\n"
        "        else:\n"
        "            pass\n",
        # a second buffer built under the check of the first (vLLM's `_cu_2_q` and `_cu_2_k`)
        "import torch\n"
        "class Attn:\n"
        "    def forward(self, q, k):\n"
        "        if not hasattr(self, '_cu_q'):\n"
        "            self._cu_q = torch.zeros(2)  # expect: GM201:13\n"
        "            self._cu_k = torch.zeros(2)  # expect: GM201:13\n"
        "        self._cu_q[1:2] = q\n"
        "        self._cu_k[1:2] = k\n",
        # reallocated where a predicate finds it too small, a dict filled on a miss, a getattr default
        "import torch\n"
        "class Attn:\n"
        "    def forward(self, q, k):\n"
        "        if needs_alloc(self._ws, q):\n"
        "            self._ws = torch.empty(8)  # expect: GM201:13\n"
        "        if self._by_n and k not in self._by_n:\n"
        "            self._by_n[k] = torch.empty(8)  # expect: GM201:13\n"
        "        if getattr(self, '_flag_buf', None) is None:\n"
        "            self._flag_buf = torch.zeros(1)  # expect: GM201:13\n"
        "        self._ws.zero_()\n"
        "        self._by_n[k].zero_()\n"
        "        self._flag_buf.fill_(1)\n",
        # `+=` on a local bound to the buffer writes it
        "import torch\n"
        "class Acc:\n"
        "    def step(self, x):\n"
        "        if self._acc is None:\n"
        "            self._acc = torch.zeros(4)  # expect: GM201:13\n"
        "        acc = self._acc\n"
        "        acc += x\n",
        # a module global a nested function declares `global`: one place, kept across calls
        "import torch\n"
        "_BUF = None\n"
        "class VAE:\n"
        "    def decode(self, parts):\n"
        "        def write(part):\n"
        "            global _BUF\n"
        "            if _BUF is None:\n"
        "                _BUF = torch.empty(8)  # expect: GM201:17\n"
        "            _BUF[:4].copy_(part)\n"
        "        for part in parts:\n"
        "            write(part)\n",
        # allocated under inference mode, updated where the callers decide (or under no_grad, which keeps
        # inference mode as it is): the code fixes nothing for the update
        "import torch\n"
        "class Commit:\n"
        "    def hook(self, kv):\n"
        "        with torch.inference_mode():\n"
        "            if self.kvs is None:\n"
        "                self.kvs = torch.zeros(8)  # expect: GM201:17 GM202:17\n"
        "    def write(self, kv):\n"
        "        with torch.no_grad():\n"
        "            self.kvs[:4].copy_(kv)\n"
        "    def flush(self):\n"
        "        self.kvs.zero_()\n",
        # kept, though a look at the holder alone might say otherwise: a local rebound to itself, a holder built
        # and configured (`configure` returns `self`) in a constructor, a local a builtin looks at and a loop
        # uses; a switch with an alternative fixes no mode
        "import contextlib, torch\n"
        "class Holder:\n"
        "    def configure(self, n):\n"
        "        return self\n"
        "    def prepare(self, n):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty(n)  # expect: GM201:13\n"
        "        self._buf[:n].fill_(0)\n"
        "class Worker:\n"
        "    def __init__(self):\n"
        "        self.holder = Holder().configure(4)\n"
        "    def serve(self, reqs):\n"
        "        h = Holder()\n"
        "        h = h\n"
        "        print('holder', h)\n"
        "        for n in reqs:\n"
        "            h.prepare(n)\n"
        "    def run(self):\n"
        "        self.serve([1, 2])\n"
        "class Commit:\n"
        "    def hook(self, kv, warm):\n"
        "        with torch.inference_mode() if warm else contextlib.nullcontext():\n"
        "            if self.kvs is None:\n"
        "                self.kvs = torch.zeros(8)  # expect: GM201:17\n"
        "            self.kvs[:4].copy_(kv)\n",
        # a field of the object itself, filled by a helper it hands `self` to
        "import torch\n"
        "class Model:\n"
        "    def __init__(self):\n"
        "        self.cache = None\n"
        "        attach(self)\n"
        "    def forward(self, x):\n"
        "        self.cache[0] = x\n"
        "def attach(model: Model):\n"
        "    if model.cache is None:\n"
        "        model.cache = torch.zeros(4)  # expect: GM201:9\n",
        # a holder made per call elsewhere, but one instance kept on a long-lived object (or a class attribute)
        "import torch\n"
        "class DraftInput:\n"
        "    _shared = None\n"
        "    def prepare(self, n):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty(n)  # expect: GM201:13\n"
        "        self._buf[:n].fill_(0)\n"
        "    @classmethod\n"
        "    def shared(cls):\n"
        "        if DraftInput._shared is None:\n"
        "            DraftInput._shared = cls()\n"
        "        return DraftInput._shared\n"
        "class Worker:\n"
        "    def step(self, batch, n):\n"
        "        batch.spec_info = DraftInput()\n"
        "        batch.spec_info.prepare(n)\n",
        # a record (a dataclass) whose lazy field it declares: one record kept once by a long-lived object, one
        # handed to code outside the project by a factory no code here calls, one never seen made for one call
        # (settings a user keeps); a plain object built in `main()`
        {"engine/records.py": (
            "import dataclasses, torch\n"
            "@dataclasses.dataclass\n"
            "class Scratch:\n"
            "    buf: torch.Tensor | None = None\n"
            "    def prepare(self, n):\n"
            "        if self.buf is None:\n"
            "            self.buf = torch.empty(n)  # expect: GM201:13\n"
            "        self.buf[:n].zero_()\n"
            "@dataclasses.dataclass\n"
            "class Plan:\n"
            "    table: torch.Tensor | None = None\n"
            "    def fill(self, n):\n"
            "        if self.table is None:\n"
            "            self.table = torch.empty(n)  # expect: GM201:13\n"
            "        self.table.fill_(n)\n"
            "def make_plan():\n"
            "    return Plan()\n"),
         "engine/settings.py": (
            "import dataclasses, torch\n"
            "@dataclasses.dataclass\n"
            "class Settings:\n"
            "    token_bias: torch.Tensor | None = None\n"
            "    def disallow(self, tokens):\n"
            "        if self.token_bias is None:\n"
            "            self.token_bias = torch.zeros(32)  # expect: GM201:13\n"
            "        self.token_bias[tokens] = -1.0\n"
            "def generate(settings=None):\n"
            "    if settings is None:\n"
            "        settings = Settings()\n"
            "    return settings\n"),
         "engine/worker.py": (
            "import torch\n"
            "from engine.records import Scratch\n"
            "class Worker:\n"
            "    def step(self, n):\n"
            "        if self.scratch is None:\n"
            "            self.scratch = Scratch()\n"
            "        self.scratch.prepare(n)\n"
            "class Engine:\n"
            "    def step(self, n):\n"
            "        if self._out is None:\n"
            "            self._out = torch.empty(n)  # expect: GM201:13\n"
            "        self._out.zero_()\n"
            "def main():\n"
            "    engine = Engine()\n"
            "    for n in (4, 8):\n"
            "        engine.step(n)\n")},
        # a pool filled under a check that finds it empty, then updated in place
        "import torch\n"
        "class Ring:\n"
        "    def step(self, x):\n"
        "        if not self.pool:\n"
        "            self.pool.append(torch.zeros(4))  # expect: GM201:13\n"
        "        self.pool[0].add_(x)\n",
        # a binding the update may run before: the method called first, a binding that may return before it, a
        # caller that binds nothing, a binding in a loop or under an if, a generator's, another object's method
        _LAZY_TESTER +
        "    def run(self, n):\n"
        "        self._check()\n"
        "        self.ws = torch.zeros(n)\n",
        _LAZY_TESTER +
        "    def grow(self, n):\n"
        "        if n < 0:\n"
        "            return\n"
        "        self.ws = torch.zeros(n)\n"
        "    def run(self, n):\n"
        "        self.grow(n)\n"
        "        self._check()\n",
        _LAZY_TESTER +
        "    def run(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        self._check()\n"
        "    def step(self):\n"
        "        self._check()\n",
        _LAZY_TESTER +
        "    def run(self, n):\n"
        "        for _ in range(n):\n"
        "            self.ws = torch.zeros(n)\n"
        "        if n:\n"
        "            self.ws = torch.zeros(n)\n"
        "        self._check()\n",
        _LAZY_TESTER +
        "    def gen(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        yield 1\n"
        "    def step(self):\n"
        "        self.gen(1)\n"
        "        self._check()\n",
        _LAZY_TESTER +
        "    def run(self, n, other: \"Tester\"):\n"
        "        self.ws = torch.zeros(n)\n"
        "        other._check()\n",
        # a local bound in another branch than its update, where a loop may run one branch, then the other; and
        # an update after the if, which either branch's binding reaches
        _CACHE_B_REPORTED +
        "def fwd(xs, n):\n"
        "    for x in xs:\n"
        "        if x is None:\n"
        "            g = get_b(n)\n"
        "        else:\n"
        "            g.zero_()\n",
        _CACHE_B_REPORTED +
        "def put(x, n, pad):\n"
        "    if pad:\n"
        "        h = get_b(n)\n"
        "    else:\n"
        "        h = torch.empty(n)\n"
        "    h.zero_()\n",
        # a test of None that does not hold where the update runs: the parameter bound again, an assert or an
        # early raise in a loop or another branch, a test of something else (`if state:` fails for a zero too)
        _CACHE_B_REPORTED +
        "def put(xs, n, state=None):\n"
        "    if state is None:\n"
        "        h = get_b(n)\n"
        "    else:\n"
        "        h = state\n"
        "    state = h\n"
        "    assert state is not None\n"
        "    h.zero_()\n",
        _CACHE_B_REPORTED +
        "def put(xs, n, state=None):\n"
        "    if state is None:\n"
        "        h = get_b(n)\n"
        "    for x in xs:\n"
        "        assert state is not None\n"
        "    if n:\n"
        "        if state is None:\n"
        "            raise ValueError(n)\n"
        "    if not state:\n"
        "        h.zero_()\n"
        "    h.add_(1)\n",
        # the local bound to the test again before it is read, or a test that leaves either way open
        _CACHE_B_REPORTED +
        "def put(n, state=None, index=None, other=None):\n"
        "    has_index = index is not None\n"
        "    has_index = other\n"
        "    if has_index and state is None:\n"
        "        raise ValueError(n)\n"
        "    if state is None:\n"
        "        h = get_b(n)\n"
        "    else:\n"
        "        h = state\n"
        "    assert index is not None\n"
        "    h.zero_()\n"
        "    if index is None or other is None:\n"
        "        h.add_(1)\n",
        # the parameter bound again otherwise than by an assignment (an except target, a match capture, a
        # with target, a nested function's `nonlocal`), an early raise a with may swallow, a local bound to
        # another's test before that one is bound again
        _STATE_BOUND_FROM_CACHE +
        "    try:\n"
        "        cfg(n)\n"
        "    except Exception as state:\n"
        "        pass\n"
        + _STATE_RAISED_THEN_UPDATED,
        _STATE_BOUND_FROM_CACHE +
        "    match cfg:\n"
        "        case {'state': state}:\n"
        "            pass\n"
        + _STATE_RAISED_THEN_UPDATED,
        _STATE_BOUND_FROM_CACHE +
        "    with cfg as (k, state):\n"
        "        pass\n"
        + _STATE_RAISED_THEN_UPDATED,
        _CACHE_B_REPORTED +
        "def put(n, cfg, state=None):\n"
        "    def adopt():\n"
        "        nonlocal state\n"
        "        state = cfg\n"
        "    if state is None:\n"
        "        h = get_b(n)\n"
        "    adopt()\n"
        + _STATE_RAISED_THEN_UPDATED,
        _CACHE_B_REPORTED +
        "def put(n, x=None, y=None):\n"
        "    a = x is None\n"
        "    b = a\n"
        "    a = y is None\n"
        "    if b:\n"
        "        h = get_b(n)\n"
        "    if y is None:\n"
        "        raise ValueError(n)\n"
        "    h.zero_()\n",
        _CACHE_B_REPORTED +
        "import contextlib\n"
        "def put(n, x=None):\n"
        "    if x is None:\n"
        "        h = get_b(n)\n"
        "    with contextlib.suppress(ValueError):\n"
        "        if x is None:\n"
        "            raise ValueError(n)\n"
        "    h.zero_()\n",
        # a local's test bound again by a nested function, a global's by another function, a parameter bound
        # again from a class body, a local bound again by a match capture in a loop
        _CACHE_B_REPORTED +
        "def put(n, x=None):\n"
        "    want = x is None\n"
        "    def flip():\n"
        "        nonlocal want\n"
        "        want = not want\n"
        + _WANT_FLIPPED,
        _CACHE_B_REPORTED +
        "def flip():\n"
        "    global want\n"
        "    want = not want\n"
        "def put(n, x=None):\n"
        "    global want\n"
        "    want = x is None\n"
        + _WANT_FLIPPED,
        _CACHE_B_REPORTED +
        "def put(n, x=None):\n"
        "    if x is None:\n"
        "        h = get_b(n)\n"
        "    class C:\n"
        "        nonlocal x\n"
        "        x = 0\n"
        "    if x is None:\n"
        "        raise ValueError(n)\n"
        "    h.zero_()\n",
        _CACHE_B_REPORTED +
        "def put(n, xs, x=None):\n"
        "    want = x is None\n"
        "    for _ in xs:\n"
        "        if want:\n"
        "            h = get_b(n)\n"
        "        match [not want]:\n"
        "            case [want]:\n"
        "                pass\n"
        "    if x is None:\n"
        "        raise ValueError(n)\n"
        "    h.zero_()\n",
        _CACHE_B_REPORTED +  # bound again later in a loop: the next round reads that
        "def put(xs, n, index=None):\n"
        "    has_index = index is not None\n"
        "    for x in xs:\n"
        "        if has_index:\n"
        "            h = get_b(n)\n"
        "        has_index = x\n"
        "    if index is None:\n"
        "        h.zero_()\n",
        # run again on one object: twice, in a loop, on a cached or shared object, on a registry the project
        # adds to, on a singleton, on a parameter, by a subclass's `super()`
        _SCALES_REPORTED +
        "def warm(values):\n"
        "    s = Scales(4)\n"
        "    s.load(values)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def serve(rows):\n"
        "    s = Scales(4)\n"
        "    for values in rows:\n"
        "        s.load(values)\n",
        _SCALES_REPORTED +
        "@functools.cache\n"
        "def shared():\n"
        "    return Scales(4)\n"
        "def serve(values):\n"
        "    s = shared()\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def register(name, cls):\n"
        "    REGISTRY[name] = cls\n"
        + _SERVE_FROM_REGISTRY,
        _SCALES_REPORTED +
        "class Once(type):\n"
        "    pass\n"
        "class Shared(Scales, metaclass=Once):\n"
        "    pass\n"
        "def serve(values):\n"
        "    s = Shared(4)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def build(values):\n"
        "    s = Scales(4)\n"
        "    s.load(values)\n"
        "    return s\n"
        "def refresh(s: Scales, values):\n"
        "    s.load(values)\n",
        # what once per object does not cover: the field given a tensor another object made, the method run
        # again (a while test, a registry the project changes or hands on, a class that may give back one that
        # exists, a factory a subclass overrides, another name, a local a nested function binds)
        _SCALES_REPORTED +
        "class Adopt(Scales):\n"
        "    def __init__(self, k):\n"
        "        self.k = k\n"
        "def step(prev, values):\n"
        "    s = Adopt(prev.k)\n"
        "    s.load(values)\n"
        "    return s\n",
        _SCALES_REPORTED +
        "def step(prev, values):\n"
        "    s = Scales(4)\n"
        "    s.k = prev.k\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def drain(rows):\n"
        "    s = Scales(4)\n"
        "    while s.load(next(rows)):\n"
        "        pass\n",
        _SHARED_SCALES +
        "def serve(values, name):\n"
        "    s = REGISTRY.get(name, shared)(4)\n"
        "    s.load(values)\n",
        _SHARED_SCALES +
        "def plug():\n"
        "    REGISTRY.update(b=shared)\n"
        + _SERVE_FROM_REGISTRY,
        _SHARED_SCALES +
        "def plug():\n"
        "    r = REGISTRY\n"
        "    r['b'] = shared\n"
        + _SERVE_FROM_REGISTRY,
        _SHARED_SCALES +
        "KINDS = [Scales]\n"
        "KINDS.append(shared)\n"
        "def serve(values, i):\n"
        "    s = KINDS[i](4)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "class Cached(Scales):\n"
        "    pass\n"
        "Cached = functools.cache(Cached)\n"
        "def serve(values):\n"
        "    s = Cached(4)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def with_base(base):\n"
        "    return type('Made', (base,), {})\n"
        "class Made(with_base(Scales)):\n"
        "    pass\n"
        "def serve(values):\n"
        "    s = Made(4)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def _one(cls, *args):\n"
        "    return SHARED\n"
        "class Single(Scales):\n"
        "    __new__ = _one\n"
        "SHARED = Scales(4)\n"
        "def serve(values):\n"
        "    s = Single(4)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "class Builder:\n"
        "    def make(self):\n"
        "        return Scales(4)\n"
        "    def build(self, values):\n"
        "        s = self.make()\n"
        "        s.load(values)\n"
        "class Keeper(Builder):\n"
        "    def make(self):\n"
        "        return SHARED\n"
        "SHARED = Scales(4)\n",
        _SCALES_REPORTED +
        "class Alias(Scales):\n"
        "    refresh = Scales.load\n"
        "LIVE = []\n"
        "def build(values):\n"
        "    s = Scales(4)\n"
        "    s.load(values)\n"
        "    LIVE.append(s)\n"
        "def again(values):\n"
        "    for s in LIVE:\n"
        "        s.refresh(values)\n",
        _LIVE_SCALES +
        "import operator\n"
        "def reload(values):\n"
        "    list(map(operator.methodcaller('load', values), LIVE))\n",
        _SCALES_REPORTED +
        "SHARED = Scales(4)\n"
        "def serve(values, reuse):\n"
        "    s = Scales(4)\n"
        "    def pick():\n"
        "        nonlocal s\n"
        "        s = SHARED\n"
        "    if reuse:\n"
        "        pick()\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def adopt(self, other):\n"
        "    self.k = other.k\n"
        "def step(prev, values):\n"
        "    s = Scales(4)\n"
        "    adopt(s, prev)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "class Shared(Scales):\n"
        "    @classmethod\n"
        "    def share(cls, t):\n"
        "        cls.k = t\n"
        "def step(t, values):\n"
        "    Shared.share(t)\n"
        "    s = Shared(4)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "def step(prev, values):\n"
        "    s = Scales(4)\n"
        "    setattr(s, 'k', prev.k)\n"
        "    s.load(values)\n",
        _SCALES_REPORTED +
        "class Adopt(Scales):\n"
        "    def __init__(self, other):\n"
        "        self.k = other.k if other is not None else torch.ones(5)\n"
        "def step(prev, values):\n"
        "    s = Adopt(prev)\n"
        "    s.load(values)\n",
        _LIVE_SCALES +
        "import operator\n"
        "def reload(values):\n"
        "    for s in LIVE:\n"
        "        operator.attrgetter('load')(s)(values)\n",
        _LIVE_SCALES +
        "import threading\n"
        "def reload(values):\n"
        "    for s in LIVE:\n"
        "        threading.Thread(target=s.load, args=(values,)).start()\n",
        _SCALES_REPORTED +
        "SHARED = Scales(4)\n"
        "def _one(cls, *args):\n"
        "    return SHARED\n"
        "Scales.__new__ = _one\n"
        "def serve(values):\n"
        "    s = Scales(4)\n"
        "    s.load(values)\n",
        _SHARED_SCALES +
        "def plug():\n"
        "    min([REGISTRY])['b'] = shared\n"
        + _SERVE_FROM_REGISTRY,
        _SHARED_SCALES +
        "def plug():\n"
        "    for r in (REGISTRY,):\n"
        "        r['b'] = shared\n"
        + _SERVE_FROM_REGISTRY,
        _SHARED_SCALES +
        "def plug(r=REGISTRY):\n"
        "    r['b'] = shared\n"
        + _SERVE_FROM_REGISTRY,
        # `forward` and a dunder run where no call names them (`layer(x)`): one named call is not every run
        "import torch\n"
        "class Layer(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if self._out is None or self._out.shape != x.shape:\n"
        "            self._out = torch.empty_like(x)  # expect: GM201:13\n"
        "        self._out.copy_(x)\n"
        "        return self._out\n"
        "class Fn:\n"
        "    def __call__(self, x):\n"
        "        if self._out is None:\n"
        "            self._out = torch.empty_like(x)  # expect: GM201:13\n"
        "        self._out.copy_(x)\n"
        "def check(x):\n"
        "    layer = Layer()\n"
        "    fn = Fn()\n"
        "    fn.__call__(x)\n"
        "    return layer.forward(x)\n",
        _SCALES_REPORTED +
        "class Wide(Scales):\n"
        "    def load(self, values):\n"
        "        super().load(values)\n"
        "def build(values):\n"
        "    s = Scales(4)\n"
        "    s.load(values)\n"
        "    w = Wide(4)\n"
        "    w.load(values)\n",
        # bound after the update, in a loop that runs the update again
        _CACHE_B_REPORTED +
        "def fwd(xs, n):\n"
        "    g = xs[0]\n"
        "    while n:\n"
        "        g.zero_()\n"
        "        if n > 4:\n"
        "            g = get_b(n)\n"
        "        n -= 1\n",
        # a binding undone before the update: set to None (the lazy check runs again), or to a kept tensor
        _LAZY_TESTER +
        "    def run(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        self.ws = None\n"
        "        self.prepare()\n"
        "        self._check()\n",
        _LAZY_TESTER +
        "    def launch(self, n, x):\n"
        "        self.ws = torch.zeros(n)\n"
        "        if x:\n"
        "            return\n"
        "        self.ws = self._saved\n"
        "    def step(self, n):\n"
        "        self.launch(n, False)\n"
        "        self._check()\n",
        # a binding that may not run, or not before the update: a value that may be the old tensor, a lambda's, a
        # method taken as a value or found by `getattr`, a call inside the binding's own value, a decorated binder,
        # a generator caller that yields between
        _LAZY_T +
        "    def run(self, n, big):\n"
        "        self.prepare()\n"
        "        self.ws = torch.zeros(n) if big else self.ws\n"
        "        self.validate()\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n",
        _LAZY_T +
        "    def launch(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "    def run(self, n, hooks):\n"
        "        self.prepare()\n"
        "        hooks.append(lambda: self.launch(n))\n"
        "        self.validate()\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n",
        "import torch\n"
        "class T:\n"
        "    def __init__(self):\n"
        "        self.ws = None\n"
        "        self.step = self.validate\n"
        "    def prepare(self):\n"
        "        if self.ws is None:\n"
        "            self.ws = torch.zeros(8)  # expect: GM201:13\n"
        "    def run(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        self.validate()\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n"
        "    def tick(self):\n"
        "        self.prepare()\n"
        "        self.step()\n",
        _LAZY_T +
        "    def run(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        self.validate()\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n"
        "    def tick(self, name):\n"
        "        self.prepare()\n"
        "        getattr(self, name)()\n",
        _LAZY_T +
        "    def run(self, n):\n"
        "        self.prepare()\n"
        "        self.ws = torch.zeros(\n"
        "            self.drain(n),\n"
        "        )\n"
        "    def drain(self, n):\n"
        "        self.ws.zero_()\n"
        "        return n\n",
        "import functools\n" +
        _LAZY_T +
        "    @functools.lru_cache(maxsize=None)\n"
        "    def launch(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "    def free(self):\n"
        "        self.ws = None\n"
        "        self.prepare()\n"
        "    def run(self, n):\n"
        "        self.launch(n)\n"
        "        self.validate()\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n",
        _LAZY_T +
        "    def steps(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        yield\n"
        "        self.validate()\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n"
        "    def free(self):\n"
        "        self.ws = None\n"
        "def drive(t: T):\n"
        "    g = t.steps(4)\n"
        "    next(g)\n"
        "    t.free()\n"
        "    t.prepare()\n"
        "    next(g, None)\n",
        # a local's update in a lambda, and in a while test, which may run after a binding written below it
        _LAZY_PROPERTY +
        "    def step(self):\n"
        "        clear = lambda: g.zero_()\n"
        "        g = self.workspace\n"
        "        clear()\n",
        _LAZY_PROPERTY +
        "    def fill(self, n):\n"
        "        g = torch.zeros(n)\n"
        "        while g.add_(1).max() < 3:\n"
        "            g = self.workspace\n",
        # the same with a comment before the body, in a lambda's list, and where a value runs before its target
        _LAZY_PROPERTY +
        "    def fill(self, n):\n"
        "        g = torch.zeros(n)\n"
        "        while g.add_(1).max() < 3:\n"
        "            # take the shared workspace next round\n"
        "            g = self.workspace\n",
        _LAZY_PROPERTY +
        "    def step(self):\n"
        "        clear = lambda: [g.zero_()]\n"
        "        g = self.workspace\n"
        "        clear()\n",
        _LAZY_PROPERTY +
        "    def step(self, out):\n"
        "        out[g.add_(1).long()] = (\n"
        "            g := self.workspace)\n",
    )
    VALID = (
        # `+=` on a local bound to a tuple or a number rebinds it: the buffer in it is not written
        "import torch\n"
        "class Box:\n"
        "    def tables(self, n):\n"
        "        if self._t is None:\n"
        "            self._t = torch.zeros(n)\n"
        "        return self._t\n"
        "    def launch(self, head, n):\n"
        "        tensors = head + (n,)\n"
        "        tensors += (self.tables(n),)\n"
        "        offset = 0\n"
        "        for length in self.tables(n):\n"
        "            offset += length\n"
        "        return tensors, offset\n",
        # the holder is built earlier in the same call: the check finds the field missing every time
        "import torch\n"
        "class Metadata:\n"
        "    def __init__(self):\n"
        "        self.seq_lens = None\n"
        "class Backend:\n"
        "    def plan(self, n):\n"
        "        metadata = Metadata()\n"
        "        if metadata.seq_lens is None:\n"
        "            metadata.seq_lens = torch.zeros(n)\n"
        "        metadata.seq_lens[0] = n\n"
        "        self.metadata = metadata\n",
        # a closure's `nonlocal`: a local of one call of the enclosing function, made again by the next call
        "import torch\n"
        "class VAE:\n"
        "    def decode(self, parts):\n"
        "        dec = None\n"
        "        def write(part):\n"
        "            nonlocal dec\n"
        "            if dec is None:\n"
        "                dec = torch.empty(8)\n"
        "            dec[:4].copy_(part)\n"
        "        for part in parts:\n"
        "            write(part)\n"
        "        return dec\n",
        # a repair of what is there (a NaN tensor replaced), not an allocation of the first call's
        "import torch\n"
        "class Sched:\n"
        "    def verify(self, v):\n"
        "        if isinstance(self.t, torch.Tensor) and torch.isnan(self.t).any():\n"
        "            self.t = torch.ones(1)\n"
        "        self.t[0] = v\n",
        # beside a lazy buffer, under its check, a store of something new each call is no buffer of the first's
        "import torch\n"
        "class Attn:\n"
        "    def forward(self, q, k):\n"
        "        if self._cu_q is None:\n"
        "            self._cu_q = torch.zeros(2)\n"
        "            self.calls = 0\n"
        "        self.calls += 1\n",
        # a field of an object the caller hands in (a batch, a per-step record): whether it outlives the call
        # is the caller's
        "import torch\n"
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Metadata:\n"
        "    tile_buf: torch.Tensor | None = None\n"
        "class Backend:\n"
        "    def tile(self, x, metadata: Metadata):\n"
        "        buf = metadata.tile_buf\n"
        "        if buf is None or buf.shape != x.shape:\n"
        "            buf = torch.zeros(x.shape)\n"
        "            metadata.tile_buf = buf\n"
        "        buf[:, 0] = x[:, 0]\n"
        "        return buf\n"
        "    def prepare(self, batch: Metadata, n):\n"
        "        if batch.tile_buf is None:\n"
        "            batch.tile_buf = torch.full((n,), 0)\n"
        "        batch.tile_buf[0] = n\n"
        "def run(backend, steps):\n"
        "    for x, n in steps:\n"
        "        metadata = Metadata()\n"
        "        backend.tile(x, metadata)\n"
        "        backend.prepare(metadata, n)\n",
        # a holder made for one call: every instance is kept in a local, handed to a field of an object the
        # call sets afresh, returned to callers that do so, or given to builtins; its lazy buffer is made
        # again with the next holder
        "import torch\n"
        "class DraftInput:\n"
        "    def prepare(self, n):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty(n)\n"
        "        self._buf[:n].fill_(0)\n"
        "    @classmethod\n"
        "    def idle(cls):\n"
        "        return cls()\n"
        "def make_draft_input():\n"
        "    draft = DraftInput()\n"
        "    return draft\n"
        "class Worker:\n"
        "    def step(self, batch, n):\n"
        "        batch.spec_info = make_draft_input()\n"
        "        batch.spec_info.prepare(n)\n"
        "        DraftInput.idle().prepare(1)\n"
        "        return isinstance(batch.spec_info, DraftInput)\n"
        "def serve(worker, batches):\n"
        "    for batch in batches:\n"
        "        worker.step(batch, 4)\n",
        # a field a record declares, where a record is handed on for one step and none is kept or leaves the
        # project: each step builds its own
        "import dataclasses, torch\n"
        "@dataclasses.dataclass\n"
        "class DraftInput:\n"
        "    seq_lens_buf: torch.Tensor | None = None\n"
        "    def prepare(self, n):\n"
        "        if self.seq_lens_buf is None:\n"
        "            self.seq_lens_buf = torch.empty(n)\n"
        "        self.seq_lens_buf[:n].fill_(0)\n"
        "@dataclasses.dataclass\n"
        "class Result:\n"
        "    draft: DraftInput\n"
        "def make_draft_input():\n"
        "    return DraftInput()\n"
        "class Worker:\n"
        "    def forward(self, batch, n):\n"
        "        draft = make_draft_input()\n"
        "        draft.prepare(n)\n"
        "        return Result(draft=draft)\n"
        "    def step(self, batch, n):\n"
        "        result = self.forward(batch, n)\n"
        "        self.last = result\n"
        "        batch.spec_info = DraftInput()\n"
        "def serve(worker, batches):\n"
        "    for batch in batches:\n"
        "        worker.step(batch, 4)\n",
        # a subclass's store into the base class's dict cache inserts a tensor, it writes none
        "import torch\n"
        "class Runner:\n"
        "    def capture(self, k, x):\n"
        "        if k not in self.out:\n"
        "            self.out[k] = torch.empty_like(x)\n"
        "        return self.out[k]\n"
        "class NpuRunner(Runner):\n"
        "    def capture(self, k, x):\n"
        "        self.out[k] = x.clone()\n"
        "        return self.out[k]\n",
        # the code fixes the grad mode: the allocation and each update under torch's inference mode (a with, a
        # decorator, a helper called under one), or the allocation under `inference_mode(False)`
        "import torch\n"
        "class Commit:\n"
        "    def hook(self, kv, stream):\n"
        "        with torch.cuda.stream(stream), torch.inference_mode():\n"
        "            if self.kvs is None:\n"
        "                self.kvs = torch.zeros(8)\n"
        "            self.kvs[:4].copy_(kv)\n"
        "    @torch.inference_mode()\n"
        "    def flush(self):\n"
        "        with torch.no_grad():\n"
        "            self.kvs.zero_()\n"
        "    def stash(self, kv):\n"
        "        fill(self.kvs, kv)\n"
        "    def grow(self, n):\n"
        "        with torch.inference_mode(False):\n"
        "            if self.big is None:\n"
        "                self.big = torch.zeros(n)\n"
        "    def step(self, x):\n"
        "        self.big.add_(x)\n"
        "@torch.inference_mode()\n"
        "def fill(buf, kv):\n"
        "    buf.copy_(kv)\n",
        # appended to under a check that finds the list there (a feature switch), not one that finds it
        # empty: each call adds a new tensor, no kept buffer of the first call's
        "import torch\n"
        "class Recorder:\n"
        "    def step(self, x):\n"
        "        if self.history is not None:\n"
        "            self.history.append(torch.zeros(4))\n"
        "        self.history[-1].add_(x)\n",
        "import torch\n"
        "class MoE:\n"
        "    def __init__(self, n):\n"
        "        self._out = torch.empty(n)\n"
        "    def forward(self, x):\n"
        "        self._out.zero_()\n",
        # a property that builds a new tensor each time, and torch's function form on a fresh one
        "import torch\n"
        "class Backend:\n"
        "    @property\n"
        "    def workspace(self):\n"
        "        return torch.empty(64)\n"
        "    def forward(self, x):\n"
        "        self.workspace.zero_()\n"
        "        torch.clamp_(torch.ones(3), 0, 1)\n",
        # in place by name, but no write of the buffer's data
        "import torch\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            self._out = torch.empty_like(x)\n"
        "        torch.nn.utils.clip_grad_norm_(self._out, 1.0)\n"
        "        torch.Tensor.requires_grad_(self._out, False)\n"
        "        self._out.requires_grad_(False)\n",
        "import torch\n"
        "class MoE:\n"
        "    def __init__(self, n):\n"
        "        self._out = torch.empty(n)\n"
        "    def forward(self, x):\n"
        "        self._out.view(-1)[: x.numel()].zero_()\n"
        "        scratch(x).zero_()\n",
        "import torch\n"
        "class MoE:\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            self._out = torch.empty_like(x)\n"
        "            self._out.zero_()\n"
        "        return self._out\n",
        # the update writes a new tensor the field or a local was rebound to first (torch: none raises)
        "import torch\n"
        "class Sched:\n"
        "    def set_timesteps(self, n):\n"
        "        if self.timesteps is None:\n"
        "            self.timesteps = torch.zeros(n)\n"
        "    def rewind(self, i, v):\n"
        "        self.timesteps = self.timesteps.clone()\n"
        "        self.timesteps[i] = v\n"
        "class Stopping:\n"
        "    def __call__(self, x):\n"
        "        if self.history is None:\n"
        "            self.history = torch.full((4, x.shape[0]), -1)\n"
        "        self.history = torch.roll(self.history, shifts=-1, dims=0)\n"
        "        self.history[-1] = x\n"
        "    def extend(self, x):\n"
        "        h = self.history\n"
        "        h = torch.cat([h, x[None]])\n"
        "        h[0] = x\n"
        "    def widen(self):\n"
        "        h = self.history\n"
        "        h = h.repeat(2, 1)\n"
        "        h.zero_()\n",
        # the same beside a project class with a `clone()` of its own, and across sibling withs that are
        # known to switch no inference mode on (torch: none raises)
        "import threading, torch\n"
        "class Params:\n"
        "    def clone(self):\n"
        "        return Params()\n"
        "class Sched:\n"
        "    def forward(self, n, i, v):\n"
        "        if self.a is None:\n"
        "            self.a = torch.zeros(n)\n"
        "        if self.b is None:\n"
        "            self.b = torch.zeros(n)\n"
        "        self.a = self.a.clone()\n"
        "        self.a[i] = v\n"
        "        with torch.no_grad(), torch.autocast('cpu'):\n"
        "            self.b = torch.roll(self.b, 1)\n"
        "        with torch.no_grad():\n"
        "            self.b[i] = v\n",
        # every update runs after a method of the same object bound the field to a new tensor: the lazy
        # placeholder's tensor is never the one written
        _QUIET_PLACEHOLDER +
        "    def launch(self, n):\n"
        "        if n < 0:\n"
        "            raise ValueError(n)\n"
        "        self.ws = torch.zeros(n).to(\"cpu\")\n"
        "        self._relaunch()\n"
        "    def _relaunch(self):\n"
        "        self.ws.zero_()\n"
        "    def _check(self):\n"
        "        self.ws[:4].zero_()\n"
        "    def validate(self):\n"
        "        self._check()\n"
        "    def run(self, n, check):\n"
        "        self.prepare()\n"
        "        self.launch(n)\n"
        "        if check:\n"
        "            self.validate()\n"
        "class Wide(Tester):\n"
        "    def validate(self):\n"
        "        super().validate()\n"
        "        self.ws.add_(1)\n",
        # a local bound from one cache in an if's body and from another in its else, or after the update: an
        # update in one branch writes that branch's buffer only
        _CACHE_B +
        "def fwd(x, n, pad):\n"
        "    if pad:\n"
        "        g = x[:n]\n"
        "        g[:3].copy_(x)\n"
        "    elif n > 4:\n"
        "        g = get_b(n)\n"
        "    else:\n"
        "        g = None\n"
        "    return g\n",
        _CACHE_B +
        "def fwd(x, n, pad, again):\n"
        "    if pad:\n"
        "        g = x[:n]\n"
        "        g[:3].copy_(x)\n"
        "    if again:\n"
        "        g = get_b(n)\n"
        "    return g\n",
        # a local bound from the cache only where a parameter is None, and updated only where it is not (an
        # if's test, an assert, an early raise, return or continue): no call does both
        _CACHE_B +
        "def fwd(x, n, state=None, out=None):\n"
        "    if state is not None:\n"
        "        g = state\n"
        "    elif out is None:\n"
        "        g = get_b(n)\n"
        "    else:\n"
        "        g = out\n"
        "    if n > 4:\n"
        "        assert state is not None\n"
        "        g.zero_()\n"
        "    if not state:\n"
        "        return g\n"
        "    g.add_(1)\n"
        "    return g\n",
        _CACHE_B +
        "def fwd(xs, n, state):\n"
        "    if state is None:\n"
        "        g = get_b(n)\n"
        "    else:\n"
        "        g = state\n"
        "    for x in xs:\n"
        "        if state is None:\n"
        "            continue\n"
        "        g.copy_(x)\n"
        "    if state is None:\n"
        "        raise ValueError(n)\n"
        "    g.zero_()\n",
        # the same through a test the function bound to a local, and an early raise on two parameters
        _CACHE_B +
        "def fwd(x, n, state=None, index=None):\n"
        "    has_index = index is not None\n"
        "    if has_index and state is None:\n"
        "        raise ValueError(n)\n"
        "    if state is not None:\n"
        "        g = state\n"
        "    else:\n"
        "        g = get_b(n)\n"
        "    if n > 4:\n"
        "        assert index is not None\n"
        "        g.index_copy_(0, index, x)\n"
        "    return g\n",
        # the field set to None and made lazily again after the binding, before the update: a tensor of the same call
        # of `run`, which the next call replaces
        "import torch\n"
        "class T:\n"
        "    def __init__(self):\n"
        "        self.ws = None\n"
        "    def reset(self):\n"
        "        self.ws = None\n"
        "    def validate(self):\n"
        "        if self.ws is None:\n"
        "            self.ws = torch.zeros(8)\n"
        "        self.ws.zero_()\n"
        "    def run(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "        self.reset()\n"
        "        self.validate()\n",
        # the same behind a decorated caller (its decorator is no statement of its body)
        _QUIET_PLACEHOLDER +
        "    def launch(self, n):\n"
        "        self.ws = torch.zeros(n)\n"
        "    def validate(self):\n"
        "        self.ws.zero_()\n"
        "    @torch.no_grad()\n"
        "    def run(self, n):\n"
        "        self.prepare()\n"
        "        self.launch(n)\n"
        "        self.validate()\n",
        # a method each object runs once, on an object its caller has just built (a class, an item of a registry
        # of classes, a factory of either): what it allocates and then updates is that run's
        _SCALES +
        "def make(name, n):\n"
        "    return REGISTRY[name](n)\n"
        "def build(values, name):\n"
        "    scales = make(name, 4)\n"
        "    scales.load(values)\n"
        "    return scales\n"
        "def build_all(rows, name):\n"
        "    out = []\n"
        "    for values in rows:\n"
        "        kind = REGISTRY.get(name)\n"
        "        one = kind(4)\n"
        "        one.load(values)\n"
        "        out.append(one)\n"
        "    return out\n",
    )

    def check(self, analysis: ProjectAnalysis) -> Iterator[Finding]:
        for alloc, mutations in analysis.kept_buffers.updated:
            if not alloc.lazy:  # eager allocations are GM202's, where their grad modes differ
                continue
            if alloc.per_holder:  # made again with each holder, or of an object the caller hands in
                continue
            if _modes_fixed_alike(analysis, alloc, mutations) or _one_run_per_object(analysis, alloc, mutations):
                continue
            first = mutations[0]
            yield self.finding(analysis, alloc.fid, alloc.line, alloc.col,
                               f"`{alloc.key.text()}` is lazily allocated and updated in place",
                               (f"buffer: {alloc.why_lazy}",
                                f"updated in place: {first.how} at {analysis.project.where(first.fid, first.line)}"))


def _one_run_per_object(analysis: ProjectAnalysis, alloc: Allocation, mutations: list[Mutation]) -> bool:
    """Whether a method that runs once per object (``lints/once_per_object.py``) allocates ``self.<field>`` and
    is where each update of it is written, on ``self``'s field, which holds only tensors made for the object:
    every update writes the tensor that same run made (or an eager one, which is GM202's), never one a run under
    another grad mode left."""
    key = alloc.key
    if key.kind != "attr":
        return False
    fn = analysis.project.function(alloc.fid)
    field = ["n", f"self.{key.name}"]
    if not any(fact.line == alloc.line and fact.col == alloc.col and fact.target == field for fact in fn["assigns"]):
        return False
    if not all(m.fid == alloc.fid and not m.entry_fid and _writes(fn, m, field) for m in mutations):
        return False
    once = analysis.once_per_object
    return once.runs_once(alloc.fid) and once.field_made_here(alloc.fid, key.name, alloc.line)


def _writes(fn: dict, mutation: Mutation, field: list) -> bool:
    """Whether the update is written on ``field`` itself or an item of it (``self.ws.copy_(x)``,
    ``self.ws[:n] = x``, ``out=self.ws``), not on another object's field of that name."""
    def on_field(expr: list) -> bool:
        while expr[0] == "s":
            expr = expr[1]
        return expr == field

    at = (mutation.line, mutation.col)
    for call in fn["calls"]:
        if (call.line, call.col) == at:
            receiver, _method = method_call(call.func)
            if receiver is not None and on_field(receiver):
                return True
            out = call.kwargs.get("out")
            return out is not None and on_field(out)
    return any((fact.line, fact.col) == at and on_field(fact.target) for fact in fn["assigns"])


def _modes_fixed_alike(analysis: ProjectAnalysis, alloc: Allocation, mutations: list[Mutation]) -> bool:
    """Whether the code itself fixes the grad mode so that no update can crash, whatever the first call's
    callers do: the allocation under ``inference_mode(False)`` (never an inference tensor), or it and every
    update under torch's inference mode (a with or decorator around each, in its own function, with no
    alternative)."""
    regions = analysis.regions
    state = regions.fixed_inference_state(alloc.fid, alloc.with_index)
    if state == INFERENCE_OFF:
        return True
    if state != INFERENCE:
        return False
    # each update fixed where it is written: a function between the call that hands the buffer over and the
    # writer may switch the mode again
    return all(regions.fixed_inference_state(m.fid, m.with_index) == INFERENCE for m in mutations)
