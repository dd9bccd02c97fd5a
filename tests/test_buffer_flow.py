"""Buffers through factories, pools and objects: each shape is a small engine written for the test, in several
modules. ``prime()`` runs it once under ``PRIME_MODE`` (no warm name: the phase names play no part), then
``execute_model()`` serves under ``torch.no_grad()``. With ``PRIME_MODE`` = inference mode, GM202 reports the
kept tensor at its allocation, and the engine, run with CPU torch, raises torch's exact error; with no_grad
(the fixed form) it is silent and runs.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lints.options import Config

from .helpers import as_set, expected_in_files, lint_run, write_package

ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"
BUGGY_MODE, FIXED_MODE = "torch.inference_mode()", "torch.no_grad()"


def _runner(build: str, serve: str, prime: str = "        self.execute_model(x)\n") -> str:
    """An engine entry: ``prime`` under PRIME_MODE, serving under no_grad, a main that runs both."""
    return ("import torch\n"
            f"{build}"
            "    def prime(self, x):\n"
            "        with PRIME_MODE:\n"
            f"    {prime}"
            "    @torch.no_grad()\n"
            "    def execute_model(self, x):\n"
            f"{serve}"
            "def main():\n"
            "    runner = Runner()\n"
            "    x = torch.ones(8)\n"
            "    runner.prime(x)\n"
            "    runner.execute_model(x[:4])\n"
            "    print('served')\n"
            "if __name__ == '__main__':\n"
            "    main()\n")


SHAPES = {
    # a pool fed by a factory lambda (FlashInfer's acquire_workspace(key, factory))
    "pool-factory": {
        "engine/pool.py":
            "_POOL = {}\n"
            "def acquire(key, factory):\n"
            "    ws = _POOL.get(key)\n"
            "    if ws is None:\n"
            "        ws = factory()  # expect: GM202:9\n"
            "        _POOL[key] = ws\n"
            "    return ws\n",
        "engine/runner.py": _runner(
            "from engine.pool import acquire\n"
            "class Runner:\n",
            "        topk = acquire('topk', lambda: torch.full((8,), -1))\n"
            "        topk[x.shape[0]:].fill_(-1)\n"),
    },
    # a method of a kernel object that a factory returns, the workspace a field of the object it builds,
    # filled through a parameter in another module
    "kernel-object": {
        "engine/kernel.py":
            "import dataclasses, torch\n"
            "@dataclasses.dataclass\n"
            "class Workspace:\n"
            "    topk_idx: torch.Tensor\n"
            "class Kernel:\n"
            "    def prepare_workspace(self, n):\n"
            "        return Workspace(topk_idx=torch.zeros(n, dtype=torch.long))\n"
            "def make_kernel() -> Kernel:\n"
            "    return Kernel()\n",
        "engine/stage.py":
            "def stage(ws, n, prev_n):\n"
            "    ws.topk_idx[n:prev_n].fill_(-1)\n",
        "engine/runner.py": _runner(
            "from engine.kernel import make_kernel\n"
            "from engine.stage import stage\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self._kernel = make_kernel()\n"
            "        self._ws = None\n"
            "    def _ensure_workspace(self, n):\n"
            "        if self._ws is None:\n"
            "            self._ws = self._kernel.prepare_workspace(n)  # expect: GM202:13\n"
            "        return self._ws\n",
            "        ws = self._ensure_workspace(8)\n"
            "        stage(ws, x.shape[0], 8)\n"),
    },
    # a plain helper that returns torch.full(...)
    "helper-return": {
        "engine/buffers.py":
            "import torch\n"
            "def make_buffer(n):\n"
            "    return torch.full((n,), 0.0)\n",
        "engine/runner.py": _runner(
            "from engine.buffers import make_buffer\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self._buf = None\n",
            "        if self._buf is None:\n"
            "            self._buf = make_buffer(8)  # expect: GM202:13\n"
            "        self._buf[: x.shape[0]].add_(x)\n"),
    },
    # a wrapper given a new tensor (as `pin_memory(torch.empty(...))`)
    "wrapper": {
        "engine/memory.py":
            "def pinned(t):\n"
            "    return t\n",
        "engine/runner.py": _runner(
            "from engine.memory import pinned\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self._host = None\n",
            "        if self._host is None:\n"
            "            self._host = pinned(torch.empty(8))  # expect: GM202:13\n"
            "        self._host[: x.shape[0]].copy_(x)\n"),
    },
    # a tuple of workspaces made with new_empty, written through `out=` on a narrow view inside a zip loop
    "tuple-zip-out": {
        "engine/runner.py": _runner(
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self._ws = None\n",
            "        if self._ws is None:\n"
            "            self._ws = (x.new_empty(8), x.new_empty(8))  # expect: GM202:13\n"
            "        n = x.shape[0]\n"
            "        for out, src in zip(self._ws, (x, x * 2)):\n"
            "            torch.add(src, 1, out=out.narrow(0, 0, n))\n"),
    },
    # the same built by a comprehension (lmdeploy's workspaces)
    "comprehension-zip-out": {
        "engine/runner.py": _runner(
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self._ws = None\n",
            "        if self._ws is None:\n"
            "            self._ws = tuple(x.new_empty(8) for _ in range(2))  # expect: GM202:13\n"
            "        n = x.shape[0]\n"
            "        for out, src in zip(self._ws, (x, x * 2)):\n"
            "            torch.add(src, 1, out=out.narrow(0, 0, n))\n"),
    },
    # a module-level list grown with .append under a check of its length
    "append": {
        "engine/buffers.py":
            "import torch\n"
            "BUFFERS = []\n"
            "def scratch(n):\n"
            "    if len(BUFFERS) == 0:\n"
            "        BUFFERS.append(torch.zeros(n))  # expect: GM202:9\n"
            "    return BUFFERS[0]\n",
        "engine/runner.py": _runner(
            "from engine.buffers import scratch\n"
            "class Runner:\n",
            "        scratch(8)[: x.shape[0]].fill_(1)\n"),
    },
    # an eager torch.zeros in the constructor of an object built on the first (inference-mode) call
    "constructor": {
        "engine/buffers.py":
            "import torch\n"
            "class CpuGpuBuffer:\n"
            "    def __init__(self, n):\n"
            "        self.cpu = torch.zeros(n)  # expect: GM202:9\n",
        "engine/runner.py": _runner(
            "from engine.buffers import CpuGpuBuffer\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.input_ids = None\n",
            "        if self.input_ids is None:\n"
            "            self.input_ids = CpuGpuBuffer(8)\n"
            "        self.input_ids.cpu[: x.shape[0]].copy_(x)\n"),
    },
    # a field rebound to a copy (`self.k = self.k.to(...)`) on the first call
    "rebound-copy": {
        "engine/runner.py": _runner(
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.k = torch.zeros(8)\n"
            "        self.converted = False\n",
            "        if not self.converted:\n"
            "            self.k = self.k.to(torch.float64)  # expect: GM202:13\n"
            "            self.converted = True\n"
            "        self.k[: x.shape[0]].add_(x)\n"),
    },
    # a registered buffer of a module built on the first call
    "registered-buffer": {
        "engine/rope.py":
            "import torch\n"
            "class Rope(torch.nn.Module):\n"
            "    def __init__(self, n):\n"
            "        super().__init__()\n"
            "        self.register_buffer('cos', torch.zeros(n))  # expect: GM202:9\n"
            "    def update(self, x):\n"
            "        self.cos[: x.shape[0]].copy_(x)\n",
        "engine/runner.py": _runner(
            "from engine.rope import Rope\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.rope = None\n",
            "        if self.rope is None:\n"
            "            self.rope = Rope(8)\n"
            "        self.rope.update(x)\n"),
    },
    # a registered buffer updated through `named_buffers()`, in another module
    "named-buffers": {
        "engine/rope.py":
            "import torch\n"
            "class Rope(torch.nn.Module):\n"
            "    def __init__(self, n):\n"
            "        super().__init__()\n"
            "        self.register_buffer('cos', torch.zeros(n))  # expect: GM202:9\n",
        "engine/loading.py":
            "def load_buffer(model, name, value):\n"
            "    dict(model.named_buffers())[name][: value.shape[0]] = value\n",
        "engine/runner.py": _runner(
            "from engine.loading import load_buffer\n"
            "from engine.rope import Rope\n"
            "class Runner:\n"
            "    def __init__(self):\n"
            "        self.rope = None\n",
            "        if self.rope is None:\n"
            "            self.rope = Rope(8)\n"
            "        load_buffer(self.rope, 'cos', x)\n"),
    },
}


def _form(files: dict[str, str], mode: str) -> dict[str, str]:
    out = {"engine/__init__.py": ""}
    for name, text in files.items():
        text = text.replace("PRIME_MODE", mode)
        if mode == FIXED_MODE:
            text = text.replace("  # expect: GM202:9", "").replace("  # expect: GM202:13", "")
        out[name] = text
    return out


def _run(folder) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.runner"], cwd=folder, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_is_found_and_its_fixed_form_is_silent(tmp_path, shape):
    buggy = _form(SHAPES[shape], BUGGY_MODE)
    run = lint_run(tmp_path / "buggy", buggy, Config(libraries=False))
    assert not run.errors
    assert as_set(run.findings) == expected_in_files(buggy), [f"{f.path}:{f.line} {f.message}" for f in run.findings]
    (finding,) = run.findings
    assert "allocated under inference mode: `torch.inference_mode()` in `Runner.prime()`" in "\n".join(finding.notes)
    assert "outside inference mode:" in "\n".join(finding.notes)
    good = _form(SHAPES[shape], FIXED_MODE)
    assert as_set(lint_run(tmp_path / "fixed", good, Config(libraries=False)).findings) == set()


@pytest.mark.e2e  # runs the engine under CPU torch in a process of its own
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_crashes_under_torch_and_its_fixed_form_runs(tmp_path, shape):
    pytest.importorskip("torch")
    write_package(tmp_path / "buggy", _form(SHAPES[shape], BUGGY_MODE))
    crash = _run(tmp_path / "buggy")
    assert crash.returncode != 0 and ERROR in crash.stderr, crash.stderr[-2000:]
    write_package(tmp_path / "fixed", _form(SHAPES[shape], FIXED_MODE))
    ok = _run(tmp_path / "fixed")
    assert ok.returncode == 0 and "served" in ok.stdout, ok.stderr[-2000:]


# A constructor's default (`if epoch is None: epoch = torch.zeros(1)`) is no lazy buffer: GM201 (opt-in) is
# silent on it, while a lazy buffer beside it is reported.
DEFAULT_ARGUMENT = {
    "engine/__init__.py": "",
    "engine/sched.py":
        "import torch\n"
        "class Sched:\n"
        "    def __init__(self, epoch=None):\n"
        "        if epoch is None:\n"
        "            epoch = torch.zeros(1)\n"
        "        self.epoch = epoch\n"
        "        self._ws = None\n"
        "    def step(self, n):\n"
        "        if self._ws is None:\n"
        "            self._ws = torch.zeros(n)  # expect: GM201:13\n"
        "        self._ws.zero_()\n"
        "        self.epoch.add_(1)\n",
}


def test_a_constructor_default_is_no_lazy_buffer(tmp_path):
    run = lint_run(tmp_path, DEFAULT_ARGUMENT, Config(extend_select=("GM201",), libraries=False))
    assert as_set(run.findings) == expected_in_files(DEFAULT_ARGUMENT)


# `symm_mem.empty(...)` into a state object returned to the caller. Symmetric memory needs CUDA and a process
# group, so this shape is linted only (the GPU suite runs the allocation kind it stands for).
SYMMETRIC = {
    "engine/__init__.py": "",
    "engine/state.py":
        "import dataclasses\n"
        "import torch\n"
        "import torch.distributed._symmetric_memory as symm_mem\n"
        "@dataclasses.dataclass\n"
        "class CombineState:\n"
        "    buf: torch.Tensor\n"
        "def make_state(n):\n"
        "    return CombineState(buf=symm_mem.empty(n, device='cuda'))\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.state import make_state\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.state = None\n"
        "    def prime(self, n):\n"
        "        with PRIME_MODE:\n"
        "            self.combine(n)\n"
        "    def combine(self, n):\n"
        "        if self.state is None:\n"
        "            self.state = make_state(n)  # expect: GM202:13\n"
        "        self.state.buf.zero_()\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, n):\n"
        "        self.combine(n)\n"
        "if __name__ == '__main__':\n"
        "    Runner().execute_model(4)\n",
}


def test_symmetric_memory_in_a_returned_state_object(tmp_path):
    buggy = _form(SYMMETRIC, BUGGY_MODE)
    assert as_set(lint_run(tmp_path / "buggy", buggy, Config(libraries=False)).findings) == expected_in_files(buggy)
    fixed = _form(SYMMETRIC, FIXED_MODE)
    assert lint_run(tmp_path / "fixed", fixed, Config(libraries=False)).findings == []


def test_updates_through_overrides_come_in_call_order_whatever_the_hash_seed(tmp_path):
    """A buffer handed to a method that four subclasses override: the updates through each override are listed
    in the call's order (the base's method, then its overrides), not in a set's order, which changes with
    Python's string hashing from one process to the next."""
    overrides = "".join(f"class {name}(Base):\n    def _scatter(self, out):\n        clear(out)\n" for name in "ABCD")
    write_package(tmp_path, {"eng/engine.py": (
        "import torch\n"
        "def clear(t):\n"
        "    t.zero_()\n"
        "class Base:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def step(self, n):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty(n)\n"
        "        self._scatter(self._buf)\n"
        "    def _scatter(self, out):\n"
        "        clear(out)\n" + overrides)})
    outputs = set()
    for seed in range(6):
        run = subprocess.run([sys.executable, "-m", "lints", "eng", "--select", "GM201", "--no-cache"],
                             cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": str(seed)})
        assert run.returncode == 1, run.stderr
        outputs.add(run.stdout)
    assert len(outputs) == 1
    assert "on parameter `out` of `Base._scatter()`, passed at eng/engine.py:10" in outputs.pop()


@pytest.mark.parametrize("mode, updates_sought", [(BUGGY_MODE, True), (FIXED_MODE, False)])
def test_gm202_in_one_process_seeks_updates_only_for_an_inference_mode_allocation(tmp_path, monkeypatch, mode,
                                                                                  updates_sought):
    """Default rules, one job (the flake8 plugin, the language server): the in-place updates of every buffer
    (the costly part) are found only where some kept allocation may run under inference mode."""
    from lints.buffers import Buffers

    sought = []
    mutations = Buffers.mutations

    def recording(self):
        sought.append(True)
        return mutations(self)

    monkeypatch.setattr(Buffers, "mutations", recording)
    files = _form(SHAPES["pool-factory"], mode)
    run = lint_run(tmp_path, files, Config(libraries=False), jobs=1)
    assert bool(sought) == updates_sought
    assert bool(run.findings) == updates_sought
