"""Whole-project analysis: multi-module packages, one per behaviour, with their exact findings.

Each package is a {relative path: source} dict written into tmp_path (with a pyproject.toml, so
that tmp_path is the project root) and linted with ``lint_project``; expected findings are
``# expect: CODE:COL`` comments on the offending lines, in any file.
"""
from __future__ import annotations

import pytest

from lints.options import Config

from .helpers import ALL_ON, FIXTURES, as_set, expected_in_files, lint_run, run_module

DEFAULT = Config()

# A serving root that runs under no_grad: the serving grad mode is inferred as no_grad.
WORKER_NO_GRAD = (
    "import torch\n"
    "class Worker:\n"
    "    @torch.no_grad()\n"
    "    def execute_model(self, batch):\n"
    "        return self.model(batch)\n"
)


def check(tmp_path, files, config=DEFAULT):
    """Lint the package; its findings must be exactly the expected ones. Returns the run."""
    run = lint_run(tmp_path, files, config)
    assert not run.errors, run.errors
    assert as_set(run.findings) == expected_in_files(files)
    return run


def only(run, code):
    (finding,) = [f for f in run.findings if f.code == code]
    return finding


def notes_of(finding) -> str:
    return "\n".join(finding.notes)


# --------------------------------------------------------------------------------------------------
# warm paths across modules
# --------------------------------------------------------------------------------------------------
WARM_HELPER = {
    "engine/kernels.py":
        "import torch\n"
        "def prepare_kernels(model):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        model()\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.kernels import prepare_kernels\n"
        "class Runner:\n"
        "    def warmup(self):\n"
        "        prepare_kernels(self.model)\n"
        "    def execute_model(self, batch):\n"
        "        with torch.no_grad():\n"
        "            return self.model(batch)\n",
}


def test_cross_module_warm_helper(tmp_path):
    """A helper whose name matches nothing, called only from warmup in another module, is warm."""
    run = check(tmp_path, WARM_HELPER)
    finding = only(run, "GM101")
    assert finding.fixable == "safe"
    assert "`Runner.warmup()` at engine/runner.py:5" in notes_of(finding)
    assert "`warmup` matches `*warmup*`" in notes_of(finding)


# `engine/kernels.py` beside the package `engine/kernels/`: both are module `engine.kernels`.
SHADOWED_MODULE = {
    "engine/kernels.py":
        "import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        model()\n"
        "def prepare_kernels(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n",
    "engine/kernels/__init__.py":
        "import torch\n"
        "def prepare_kernels(model):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        model()\n",
    "engine/runner.py": WARM_HELPER["engine/runner.py"],
}


def test_a_module_shadowed_by_a_package_of_its_name_is_still_analysed(tmp_path):
    """Imports find the package, as Python's do, so only its `prepare_kernels` is warm; the shadowed
    file's own findings are still reported (it used to be left out of the analysis, silently, and
    being first in path order it took the package's place)."""
    run = check(tmp_path, SHADOWED_MODULE)
    assert [f.path for f in run.findings] == ["engine/kernels.py", "engine/kernels/__init__.py"]


CALLER_WRAP = {
    "engine/warm.py":
        "class Warmer:\n"
        "    def __init__(self, model):\n"
        "        self.model = model\n"
        "    def compile_units(self):\n"
        "        self.model.units()\n"
        "    def warmup(self):\n"
        "        self.compile_units()\n",
    "engine/server.py":
        "import torch\n"
        "from engine.warm import Warmer\n"
        "class Server:\n"
        "    def __init__(self, model):\n"
        "        self.warmer = Warmer(model)\n"
        "    def start(self):\n"
        "        with torch.inference_mode():\n"
        "            self.warmer.warmup()  # expect: GM104:13\n",
}


def test_cross_module_caller_wrap(tmp_path):
    run = check(tmp_path, CALLER_WRAP)
    finding = only(run, "GM104")
    assert "`Warmer.warmup()`" in finding.message and "(line 7)" in finding.message
    assert finding.fixable == "safe"  # the block holds nothing but the warm call


SHARED_HELPER = {
    "engine/forward.py":
        "import torch\n"
        "def run_forward(model, x):\n"
        "    with torch.inference_mode():\n"
        "        return model(x)\n",
    "engine/worker.py":
        "from engine.forward import run_forward\n"
        "class Worker:\n"
        "    def execute_model(self, x):\n"
        "        return run_forward(self.model, x)\n",
    "engine/warm.py":
        "from engine.forward import run_forward\n"
        "def warmup(model, x):\n"
        "    run_forward(model, x)\n",
}


def test_shared_helper_is_not_reported_inside(tmp_path):
    """Called from execute_model and from warmup: serving's code is never rewritten."""
    check(tmp_path, SHARED_HELPER)


# --------------------------------------------------------------------------------------------------
# GM202: the lazy buffer, its inference-mode region and its in-place update in different modules
# --------------------------------------------------------------------------------------------------
GM202_DICT_CACHE = {
    "engine/pool.py":
        "import torch\n"
        "_CACHE = {}\n"
        "def get_scratch(n, device):\n"
        "    buf = _CACHE.get(device)\n"
        "    if buf is None or buf.numel() < n:\n"
        "        buf = torch.zeros(n, device=device)  # expect: GM202:9\n"
        "        _CACHE[device] = buf\n"
        "    return buf\n",
    "engine/attn.py":
        "from engine.pool import get_scratch\n"
        "def attend(x):\n"
        "    scratch = get_scratch(x.shape[0], x.device)\n"
        "    scratch.zero_()\n"
        "    return scratch\n",
    "engine/warm.py":
        "import torch\n"
        "from engine import attn\n"
        "def kernel_warmup(x):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        attn.attend(x)\n",
    "engine/serve.py":
        "import torch\n"
        "from engine import attn\n"
        "@torch.no_grad()\n"
        "def serve(x):\n"
        "    return attn.attend(x)\n",
}

GM202_WORKSPACE_FIELD = {
    "engine/workspace.py":
        "import dataclasses\n"
        "import torch\n"
        "@dataclasses.dataclass\n"
        "class Workspace:\n"
        "    topk_idx: torch.Tensor\n"
        "class WorkspacePool:\n"
        "    def __init__(self):\n"
        "        self._topk = None\n"
        "    def acquire(self, n):\n"
        "        if self._topk is None or self._topk.shape[0] < n:\n"
        "            self._topk = torch.empty(n, dtype=torch.int32)  # expect: GM202:13\n"
        "        return Workspace(topk_idx=self._topk)\n",
    "engine/moe.py":
        "from engine.workspace import WorkspacePool\n"
        "class MoE:\n"
        "    def __init__(self):\n"
        "        self.pool = WorkspacePool()\n"
        "    def forward(self, x, n, prev_n):\n"
        "        ws = self.pool.acquire(prev_n)\n"
        "        ws.topk_idx[n:prev_n].fill_(-1)\n"
        "        return x\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.moe import MoE\n"
        "class ModelRunner:\n"
        "    def __init__(self):\n"
        "        self.moe = MoE()\n"
        "    def _dummy_run(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.moe.forward(x, 4, 8)\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.moe.forward(x, 4, 8)\n",
}

GM202_ARGUMENT = {
    "engine/layer.py":
        "import torch\n"
        "from engine.ops import write_into\n"
        "class Layer:\n"
        "    def __init__(self):\n"
        "        self._out = None\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            self._out = torch.empty_like(x)  # expect: GM202:13\n"
        "        write_into(self._out, x)\n"
        "        return self._out\n",
    "engine/ops.py":
        "def write_into(out, x):\n"
        "    out.copy_(x)\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.layer import Layer\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.layer = Layer()\n"
        "    def autotune(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.layer.forward(x)\n"
        "    def execute_model(self, x):\n"
        "        with torch.no_grad():\n"
        "            return self.layer.forward(x)\n",
}


@pytest.mark.parametrize("files, alloc, region, update", [
    (GM202_DICT_CACHE, "engine/pool.py:6", "`kernel_warmup()` at engine/warm.py:4",
     "`.zero_()` in `attend()` at engine/attn.py:4"),
    (GM202_WORKSPACE_FIELD, "engine/workspace.py:11", "`ModelRunner._dummy_run()` at engine/runner.py:7",
     "`.fill_()` in `MoE.forward()` at engine/moe.py:7"),
    (GM202_ARGUMENT, "engine/layer.py:8", "`Runner.autotune()` at engine/runner.py:7",
     "`.copy_()` on parameter `out` of `write_into()`, passed at engine/layer.py:9 in `write_into()` at engine/ops.py:2"),
], ids=["getter-dict-cache", "workspace-field", "argument"])
def test_gm202_across_modules_names_alloc_region_and_update(tmp_path, files, alloc, region, update):
    run = check(tmp_path, files)
    finding = only(run, "GM202")
    assert finding.severity == "error"
    notes = finding.notes[1:] if finding.notes[0] != notes_of_start(finding) else finding.notes
    assert notes[0].startswith("buffer: ") and notes[0].endswith(alloc), notes
    assert notes[1].startswith("allocated under inference mode: `torch.inference_mode()` in ") \
        and notes[1].endswith(region), notes
    assert f"updated in place: {update}" in notes, notes
    assert any(n.startswith("outside inference mode: `") for n in notes), notes


def notes_of_start(finding) -> str:
    """The first note after the full message (a message cut to 100 characters comes whole as the first note)."""
    return next(n for n in finding.notes if n.startswith("buffer: "))


def test_gm202_chain_lists_the_calls_from_the_region_to_the_allocation(tmp_path):
    """Both chains: from the inference-mode switch down to the allocation, from the no_grad switch down to
    the update."""
    notes = only(check(tmp_path, GM202_DICT_CACHE), "GM202").notes
    assert notes[1:4] == ("allocated under inference mode: `torch.inference_mode()` in `kernel_warmup()` at "
                          "engine/warm.py:4",
                          "  `kernel_warmup()` calls `attend()` at engine/warm.py:5",
                          "  `attend()` calls `get_scratch()` at engine/attn.py:3")
    assert notes[4:7] == ("updated in place: `.zero_()` in `attend()` at engine/attn.py:4",
                          "outside inference mode: `@torch.no_grad()` in `serve()` at engine/serve.py:3",
                          "  `serve()` calls `attend()` at engine/serve.py:5")
    assert notes[7].startswith("fix: drop the inference mode at engine/warm.py:4"), notes


INFERENCE_OFF_GUARD = {
    "engine/layer.py":
        "import torch\n"
        "class Layer:\n"
        "    def __init__(self):\n"
        "        self._out = None\n"
        "    def forward(self, x):\n"
        "        if self._out is None:\n"
        "            with torch.inference_mode(False):\n"
        "                self._out = torch.empty_like(x)\n"
        "        self._out.copy_(x)\n"
        "        return self._out\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.layer import Layer\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.layer = Layer()\n"
        "    def warmup(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.layer.forward(x)\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.layer.forward(x)\n",
}


def test_inference_mode_false_guard_is_the_workaround(tmp_path):
    """Allocated under `torch.inference_mode(False)`: a normal tensor, no GM202 (GM101 still fires)."""
    check(tmp_path / "guarded", INFERENCE_OFF_GUARD)
    # without the guard it is the crash (a project beside it, not inside: that would be one project)
    unguarded = dict(INFERENCE_OFF_GUARD)
    unguarded["engine/layer.py"] = unguarded["engine/layer.py"].replace(
        "            with torch.inference_mode(False):\n                self._out", "            self._out")
    run = lint_run(tmp_path / "unguarded", unguarded, DEFAULT)
    assert {(f.path, f.code, f.line) for f in run.findings} == {
        ("engine/layer.py", "GM202", 7), ("engine/runner.py", "GM101", 7)}


KERNEL_ONLY = {
    "engine/kernels.py":
        "import triton\n"
        "import triton.language as tl\n"
        "@triton.jit\n"
        "def fill_kernel(out_ptr, n, BLOCK: tl.constexpr):\n"
        "    tl.store(out_ptr + tl.arange(0, BLOCK), 0)\n",
    "engine/layer.py":
        "import torch\n"
        "from engine.kernels import fill_kernel\n"
        "class Layer:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def forward(self, x):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty_like(x)\n"
        "        grid = (1,)\n"
        "        fill_kernel[grid](self._buf, x.numel(), BLOCK=128)\n"
        "        return self._buf\n",
    "engine/runner.py":
        "import torch\n"
        "from engine.layer import Layer\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.layer = Layer()\n"
        "    def warmup(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.layer.forward(x)\n",
}


def test_kernel_only_writes_are_not_in_place_updates(tmp_path):
    """A buffer written only by a @triton.jit kernel (`kernel[grid](buf)`): no GM202, even opted in to GM201."""
    check(tmp_path, KERNEL_ONLY)
    run = lint_run(tmp_path, KERNEL_ONLY, Config(extend_select=("GM2",)))
    assert {f.code for f in run.findings} == {"GM101"}


# --------------------------------------------------------------------------------------------------
# CUDA graphs: what is a capture path
# --------------------------------------------------------------------------------------------------
GRAPH_RUNNER = {
    "engine/cuda_graph_runner.py":
        "import torch\n"
        "class PiecewiseCudaGraphRunner:\n"
        "    def __init__(self, model):\n"
        "        self.model = model\n"
        "        self.graph = torch.cuda.CUDAGraph()\n"
        "    def capture(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            with torch.cuda.graph(self.graph):\n"
        "                self.out = self.model(x)\n"
        "    @torch.inference_mode()\n"
        "    def replay(self):\n"
        "        self.graph.replay()\n"
        "        return self.out\n",
    "engine/worker.py":
        "import torch\n"
        "from engine.cuda_graph_runner import PiecewiseCudaGraphRunner\n"
        "class Worker:\n"
        "    def __init__(self, model):\n"
        "        self.runner = PiecewiseCudaGraphRunner(model)\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.runner.replay()\n",
}


def graph_runner_roots(run):
    phases = run.analysis.phases
    capture = "engine.cuda_graph_runner:PiecewiseCudaGraphRunner.capture"
    replay = "engine.cuda_graph_runner:PiecewiseCudaGraphRunner.replay"
    assert capture in phases.roots and "captures a CUDA graph" in phases.roots[capture].why
    assert replay in phases.serving_roots and "replays a CUDA graph" in phases.serving_roots[replay].why


def test_graph_runner_capture_is_a_root_and_replay_serves(tmp_path):
    """With no_grad serving: capture()'s inference_mode is reported, replay()'s decorator is not."""
    run = check(tmp_path, GRAPH_RUNNER, Config(serving_grad_mode="no_grad"))
    graph_runner_roots(run)
    finding = only(run, "GM101")
    assert "`PiecewiseCudaGraphRunner.capture()`" in finding.message
    assert "captures a CUDA graph" in notes_of(finding)


def test_graph_runner_whose_replay_serves_under_inference_mode(tmp_path):
    """replay() serving under inference mode: capture() must capture under it too, not under no_grad."""
    files = {"engine/cuda_graph_runner.py": GRAPH_RUNNER["engine/cuda_graph_runner.py"].replace(
        "        with torch.inference_mode():  # expect: GM101:14\n",
        "        with torch.no_grad():  # expect: GM105:14\n")}
    run = check(tmp_path, files)
    graph_runner_roots(run)
    assert run.analysis.serving.mode == "inference_mode"
    assert "`PiecewiseCudaGraphRunner.replay()` decorated `torch.inference_mode()`" in notes_of(only(run, "GM105"))


KV_CAPTURE = {
    "engine/kv.py":
        "import torch\n"
        "class KVCache:\n"
        "    def capture_kv(self, layer, x):\n"
        "        with torch.inference_mode():\n"
        "            return layer.kv(x)\n",
    "engine/model.py":
        "import torch\n"
        "from engine.kv import KVCache\n"
        "class Model:\n"
        "    def __init__(self):\n"
        "        self.cache = KVCache()\n"
        "    @torch.inference_mode()\n"
        "    def capture_all_layers(self, x):\n"
        "        return [self.cache.capture_kv(layer, x) for layer in self.layers]\n",
}


def test_kv_capture_names_without_any_cuda_graph_are_not_capture_paths(tmp_path):
    check(tmp_path, KV_CAPTURE)


RECORD_GRAPH = {
    "engine/graphs.py":
        "import torch\n"
        "def record(model, graph, x):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        with torch.cuda.graph(graph):\n"
        "            return model(x)\n",
    "engine/worker.py":
        "import torch\n"
        "from engine.graphs import record\n"
        "class Worker:\n"
        "    def build(self, x):\n"
        "        self.graph = torch.cuda.CUDAGraph()\n"
        "        self.out = record(self.model, self.graph, x)\n",
}


def test_graph_captured_under_an_unrelated_name(tmp_path):
    run = check(tmp_path, RECORD_GRAPH)
    assert "captures a CUDA graph (`torch.cuda.graph(...)` at line 4)" in notes_of(only(run, "GM101"))


# --------------------------------------------------------------------------------------------------
# the serving grad mode, inferred from the serving entry points
# --------------------------------------------------------------------------------------------------
SERVING_INFERENCE = {
    "engine/worker.py":
        "import torch\n"
        "class Worker:\n"
        "    @torch.inference_mode()\n"
        "    def execute_model(self, batch):\n"
        "        return self.model(batch)\n"
        "    @torch.inference_mode()\n"
        "    def generate(self, prompts):\n"
        "        return self.model(prompts)\n",
    "engine/warm.py":
        "import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():\n"
        "        model()\n",
}
SERVING_NO_GRAD = {
    "engine/worker.py":
        "import torch\n"
        "class Worker:\n"
        "    def execute_model(self, batch):\n"
        "        with torch.no_grad():\n"
        "            return self.model(batch)\n"
        "    @torch.no_grad()\n"
        "    def generate(self, prompts):\n"
        "        return self.model(prompts)\n",
    "engine/warm.py":
        "import torch\n"
        "def warmup(model):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        model()\n",
}


@pytest.mark.parametrize("files, mode, evidence", [
    (SERVING_INFERENCE, "inference_mode",
     "2 serving root(s) run under inference mode, e.g. `Worker.execute_model()` decorated "
     "`torch.inference_mode()` at engine/worker.py:3"),
    (SERVING_NO_GRAD, "no_grad",
     "2 serving root(s) run under no_grad, e.g. `Worker.execute_model()` enters `torch.no_grad()` at "
     "engine/worker.py:4"),
], ids=["inference_mode", "no_grad"])
def test_serving_mode_is_inferred(tmp_path, files, mode, evidence):
    run = check(tmp_path, files)
    assert tuple(run.analysis.serving) == (mode, "inferred", evidence)
    proc = run_module("lints", "engine", cwd=tmp_path)
    assert f"gradmode-lint: serving grad mode: {mode} (inferred: {evidence})" in proc.stderr.splitlines()
    assert proc.returncode == (1 if expected_in_files(files) else 0), proc.stdout + proc.stderr


def test_serving_mode_from_the_config_wins(tmp_path):
    run = lint_run(tmp_path, SERVING_INFERENCE, Config(serving_grad_mode="no_grad"))
    assert run.analysis.serving.mode == "no_grad" and run.analysis.serving.source == "config"
    assert {(f.path, f.code, f.line) for f in run.findings} == {("engine/warm.py", "GM101", 3)}
    proc = run_module("lints", "--serving-grad-mode", "no_grad", "engine", cwd=tmp_path)
    assert "gradmode-lint: serving grad mode: no_grad (config: " in proc.stderr


def test_no_serving_evidence_defaults_to_no_grad(tmp_path):
    run = check(tmp_path, RECORD_GRAPH)
    assert run.analysis.serving.mode == "no_grad" and run.analysis.serving.source == "inferred"
    assert "the default" in run.analysis.serving.evidence


# --------------------------------------------------------------------------------------------------
# spellings of "enter inference mode"
# --------------------------------------------------------------------------------------------------
SPELLINGS = {
    "getattr": {
        "engine/warm.py":
            "import torch\n"
            "from engine import helpers\n"
            "def warmup(model):\n"
            "    with getattr(torch, 'inference_mode')():  # expect: GM101:10\n"
            "        helpers.run(model)\n",
        "engine/helpers.py":
            "def run(model):\n"
            "    model()\n",
    },
    "lambda-local": {
        "engine/warm.py":
            "import torch\n"
            "def warmup(model):\n"
            "    ctx = lambda: torch.inference_mode()  # expect: GM103:19\n"
            "    with ctx():\n"
            "        model()\n",
    },
    "_InferenceMode": {
        "engine/warm.py":
            "import torch\n"
            "def warmup(model):\n"
            "    with torch._C._InferenceMode(True):  # expect: GM101:10\n"
            "        model()\n",
    },
    "platform-wrapper": {
        "engine/platforms.py":
            "import torch\n"
            "class CudaPlatform:\n"
            "    @classmethod\n"
            "    def inference_mode(cls):\n"
            "        return torch.inference_mode(mode=True)\n"
            "current_platform = CudaPlatform()\n",
        "engine/warm.py":
            "from engine.platforms import current_platform\n"
            "class Runner:\n"
            "    def warmup(self):\n"
            "        with current_platform.inference_mode():  # expect: GM101:14\n"
            "            self.model()\n",
    },
    "factory-function": {
        "engine/modes.py":
            "import torch\n"
            "def inference_ctx():\n"
            "    return torch.inference_mode()\n",
        "engine/warm.py":
            "from engine.modes import inference_ctx\n"
            "def warmup(model):\n"
            "    with inference_ctx():  # expect: GM101:10\n"
            "        model()\n",
    },
    "callable-form": {
        "engine/warm.py":
            "import torch\n"
            "def autotune(model, x):\n"
            "    run = torch.inference_mode()(model.forward)  # expect: GM103:11\n"
            "    return run(x)\n",
    },
    "inference_mode(1)": {
        "engine/warm.py":
            "import torch\n"
            "def warmup(model):\n"
            "    with torch.inference_mode(1):\n"
            "        model()\n"
            "    with torch.inference_mode(mode=1):\n"
            "        model()\n",
    },
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spelling(tmp_path, name):
    files = dict(SPELLINGS[name], **{"engine/worker.py": WORKER_NO_GRAD})
    run = check(tmp_path, files)
    assert run.analysis.serving.mode == "no_grad"
    if name in ("platform-wrapper", "factory-function"):
        # through a helper that may do more than switch the mode: reported, fixed only with --unsafe-fixes
        finding = only(run, "GM101")
        assert finding.fixable == "unsafe" and "through `" in finding.message


# A module-level lambda is a helper like the factory function above (which is reported).
LAMBDA_MODULE_LEVEL = {
    "engine/worker.py": WORKER_NO_GRAD,
    "engine/warm.py":
        "import torch\n"
        "ctx = lambda: torch.inference_mode()\n"
        "def warmup(model):\n"
        "    with ctx():  # expect: GM101:10\n"
        "        model()\n",
}


def test_spelling_module_level_lambda(tmp_path):
    check(tmp_path, LAMBDA_MODULE_LEVEL)


WRAPS_FACTORY = {
    "engine/worker.py": WORKER_NO_GRAD,
    "engine/modes.py":
        "import functools\n"
        "import torch\n"
        "def run_in_inference(log=False):\n"
        "    def decorator(fn):\n"
        "        @functools.wraps(fn)\n"
        "        def wrapper(*args, **kwargs):\n"
        "            with torch.inference_mode():\n"
        "                return fn(*args, **kwargs)\n"
        "        return wrapper\n"
        "    return decorator\n",
    "engine/warm.py":
        "from engine.modes import run_in_inference\n"
        "@run_in_inference(log=True)  # expect: GM102:2\n"
        "def prewarm_kernels(model):\n"
        "    model()\n"
        "def warmup(model):\n"
        "    prewarm_kernels(model)\n",
}


def test_spelling_wraps_decorator_is_reported_at_the_decorator(tmp_path):
    run = lint_run(tmp_path, WRAPS_FACTORY, DEFAULT)
    finding = only(run, "GM102")
    assert (finding.path, finding.line, finding.col) == ("engine/warm.py", 2, 1)
    assert finding.message.startswith("decorator `run_in_inference.decorator` (runs the function under ")
    assert "runs the function under `torch.inference_mode()`, engine/modes.py:8" in finding.notes[0]  # in full
    assert finding.fixable == ""  # the project's own decorator: reported without a fix


def test_spelling_wraps_decorator_factory_exact(tmp_path):
    check(tmp_path, WRAPS_FACTORY)


# A getter *method* named `get` on a project class: the same as any other name (`acquire`, `get_buffer`).
GETTER_NAMED_GET = {
    "pkg/pool.py":
        "import torch\n"
        "class Pool:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def get(self, x):\n"
        "        if self._buf is None:\n"
        "            self._buf = torch.empty_like(x)  # expect: GM202:13\n"
        "        return self._buf\n",
    "pkg/layer.py":
        "from pkg.pool import Pool\n"
        "class Layer:\n"
        "    def __init__(self):\n"
        "        self.pool = Pool()\n"
        "    def forward(self, x):\n"
        "        out = self.pool.get(x)\n"
        "        out.copy_(x)\n"
        "        return out\n",
    "pkg/warm.py":
        "import torch\n"
        "from pkg.layer import Layer\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.layer = Layer()\n"
        "    def warmup(self, x):\n"
        "        with torch.inference_mode():  # expect: GM101:14\n"
        "            self.layer.forward(x)\n"
        "    def execute_model(self, x):\n"
        "        with torch.no_grad():\n"
        "            return self.layer.forward(x)\n",
}


def test_gm202_through_a_getter_method_named_acquire(tmp_path):
    files = {path: source.replace(".get(", ".acquire(").replace("def get(", "def acquire(")
             for path, source in GETTER_NAMED_GET.items()}
    check(tmp_path, files)


def test_gm202_through_a_getter_method_named_get(tmp_path):
    check(tmp_path, GETTER_NAMED_GET)


# --------------------------------------------------------------------------------------------------
# the SGLang fixture files (tests/fixtures is excluded by this repo's config: copied into tmp_path)
# --------------------------------------------------------------------------------------------------
LINT_FIXTURES = sorted((FIXTURES / "lint").glob("*.py"))


@pytest.mark.parametrize("path", LINT_FIXTURES, ids=lambda p: p.name)
def test_lint_fixture_files_with_every_rule_on(tmp_path, path):
    files = {path.name: path.read_text()}
    check(tmp_path, files, ALL_ON)


def test_sglang_pattern_flagged_everywhere_and_fixed_version_clean(tmp_path):
    buggy = lint_run(tmp_path / "buggy", {"sglang_buggy.py": (FIXTURES / "lint" / "sglang_buggy.py").read_text()},
                     DEFAULT)
    # autotune context (GM101), run_once ctx (GM103), both lazily allocated buffers (GM202)
    assert sorted(f.code for f in buggy.findings) == ["GM101", "GM103", "GM202", "GM202"]
    fixed_files = {"sglang_fixed.py": (FIXTURES / "lint" / "sglang_fixed.py").read_text()}
    assert lint_run(tmp_path / "fixed", fixed_files, DEFAULT).findings == []
    opt_in = lint_run(tmp_path / "fixed", fixed_files, ALL_ON).findings
    assert {f.code for f in opt_in} == {"GM201"}  # the opt-in hazard is still visible


# What a name means must not depend on which names were resolved first: `Project` keeps member and
# method lookups per class (shared by every method), but not those made while a class's fields or bases
# are still being collected, which see the class half known.
ORDER_FILES = {
    "pkg/__init__.py": "",
    "pkg/config.py":
        "class PipelineConfig:\n"
        "    def deployment(self):\n"
        "        return 1\n"
        "    @classmethod\n"
        "    def build(cls):\n"
        "        return cls()\n",
    "pkg/args.py":
        "from pkg.config import PipelineConfig\n"
        "class Args:\n"
        "    pipeline: PipelineConfig\n"
        "    def first(self):\n"
        "        return self.flag.bit_length()\n"
        "    def setup(self):\n"
        "        self.deployed = self.pipeline.deployment()\n"
        "    def validate(self):\n"
        "        return self.pipeline.deployment()\n",
}


def test_resolution_does_not_depend_on_the_order_names_are_asked_in():
    from lints.project import Project
    from lints.summary import summarize

    def project():
        return Project([summarize(text, path, path[:-3].replace("/", ".").removesuffix(".__init__"),
                                  path.endswith("__init__.py")) for path, text in ORDER_FILES.items()])

    first = project()
    asked = [(fid, call.func[1]) for fid, (_summary, fn) in first.functions.items()
             for call in fn["calls"] if call.func[0] == "n"]
    assert ("pkg.args:Args.validate", "self.pipeline.deployment") in asked
    forward = {key: first.resolve(*key) for key in asked}
    second = project()
    backward = {key: second.resolve(*key) for key in reversed(asked)}
    assert forward == backward
    assert forward[("pkg.args:Args.validate", "self.pipeline.deployment")].target == \
        "pkg.config:PipelineConfig.deployment"


def test_each_function_s_edges_are_built_once():
    from lints.callgraph import CallGraph
    from lints.project import Project
    from lints.summary import summarize

    project = Project([summarize(text, path, path[:-3].replace("/", ".").removesuffix(".__init__"),
                                 path.endswith("__init__.py")) for path, text in ORDER_FILES.items()])
    graph = CallGraph(project)
    graph.callers()
    built = {fid: (graph.edges(fid), graph.edges(fid, loose=True)) for fid in project.functions}
    assert any(strict for strict, _loose in built.values())
    # asked again (as the phases' searches ask after the callers index), the same lists, not new ones
    assert all(graph.edges(fid) is strict and graph.edges(fid, loose=True) is loose
               for fid, (strict, loose) in built.items())


def test_module_names_worked_out_per_folder_are_each_file_s(tmp_path, monkeypatch):
    """``module_names_for`` names each file as ``module_name_for`` does: at the root, below it, in a folder named
    ``__init__``, outside the root, spelt relative or absolute, and for a name not ending in ``.py``."""
    import os

    from lints.module_names import module_name_for, module_names_for

    root = tmp_path / "root"
    for folder in ("pkg/sub", "__init__", "pkg/__init__"):
        (root / folder).mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    monkeypatch.chdir(tmp_path)
    paths = ["root/a.py", "root/__init__.py", "root/pkg/__init__.py", "root/pkg/sub/b.c.py", "root/pkg/sub/__init__.py",
             "root/__init__/__init__.py", "root/__init__/c.py", "root/pkg/__init__/d.py", "outside/e.py",
             "outside/__init__.py", "root/pkg/script", str(root / "pkg" / "f.py"), "./root/pkg/g.py", "root/../root/h.py"]
    base = os.path.abspath("root")
    assert module_names_for(paths, base) == [module_name_for(p, base) for p in paths]
    assert module_names_for(paths, base)[3] == ("pkg.sub.b.c", False)


def test_a_method_taken_as_a_value_may_run_where_no_call_names_it():
    """``UnnamedCalls``: a method stored, returned, handed to a call (positionally, by keyword, in a display), named
    to ``methodcaller`` or ``attrgetter``, or aliased in a class body may run unnamed; one only called may not."""
    from lints.project import Project
    from lints.summary import summarize
    from lints.summary_records import with_records
    from lints.unnamed_calls import UnnamedCalls

    source = '''import operator, threading
class Worker:
    def stored(self): ...
    def returned(self): ...
    def positional(self): ...
    def keyword(self): ...
    def displayed(self): ...
    def by_caller(self): ...
    def by_getter(self): ...
    def aliased(self): ...
    def only_called(self): ...
    refresh = aliased
    def run(self):
        self.callback = self.stored
        threading.Thread(None, self.positional).start()
        threading.Thread(target=self.keyword).start()
        hooks = [self.displayed]
        operator.methodcaller("by_caller")(self)
        operator.attrgetter("x.by_getter")(self)
        self.only_called()
        return self.returned
'''
    summary = with_records(summarize(source, "pkg/work.py", "pkg.work"))
    unnamed = UnnamedCalls(Project([summary]))
    runs_unnamed = {fn["name"] for fid, (_, fn) in unnamed.project.functions.items()
                    if fn["cls"] is not None and unnamed.may_run_unnamed(fid)}
    assert runs_unnamed == {"stored", "returned", "positional", "keyword", "displayed", "by_caller", "by_getter",
                            "aliased"}
