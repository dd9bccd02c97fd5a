"""Checks shared by the gpu_validation tests, run on any runner module with the runner_buggy API.

The end-to-end test imports the codemod's output from a temporary path and
hands it to the same functions as runner_fixed.py.
"""
from __future__ import annotations

import types
from typing import Sequence

import pytest
import torch
import torch.nn.functional as F

INFERENCE_TENSOR_ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="CUDA is not available (CPU-only torch or no GPU)")

# Batch sizes: graphs are captured for GRAPH_BATCH_SIZES, warmup runs at the largest one,
# and eager/replay checks use SERVE_BATCH_SIZES (uneven sizes are padded up to a captured one).
GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16)
SERVE_BATCH_SIZES = (16, 5, 1, 13, 8, 3, 16, 2)


def devices() -> list:
    """``cpu`` always; ``cuda`` (marked gpu) where a GPU is visible."""
    return ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, requires_cuda])]


def tolerances(dtype: torch.dtype) -> dict:
    if dtype == torch.float32:
        return {"rtol": 1e-5, "atol": 1e-5}
    return {"rtol": 3e-2, "atol": 3e-2}  # bf16/fp16 layer against a float32 reference


def reference_forward(layer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's maths in float32, written independently: no workspaces, no in-place ops, no graphs.

    Routing is computed exactly as the layer does (float32 router), so both pick the same experts.
    Returns (output [n, hidden] float32, topk_ids [n, top_k]).
    """
    probs = torch.softmax(x.float() @ layer.w_router.float().t(), dim=-1)
    weights, ids = torch.topk(probs, layer.top_k, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).to(layer.dtype).float()
    xf = x.float()
    w_up = layer.w_up.float()[ids]  # [n, k, inter, hidden]
    w_down = layer.w_down.float()[ids]  # [n, k, hidden, inter]
    up = F.silu(torch.einsum("nh,nkih->nki", xf, w_up))
    routed = torch.einsum("nki,nkhi->nkh", up, w_down)
    out = (routed * weights[:, :, None]).sum(dim=1)
    shared = F.silu(xf @ layer.w_shared_up.float().t()) @ layer.w_shared_down.float().t()
    return out + shared, ids


def make_inputs(layer, batch_sizes: Sequence[int], seed: int = 123) -> list[torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(n, layer.hidden_size, generator=gen).to(device=layer.device, dtype=layer.dtype)
            for n in batch_sizes]


def check_eager_serving(runner, batch_sizes: Sequence[int] = SERVE_BATCH_SIZES, seed: int = 123) -> None:
    """Eager forwards (under no_grad) at changing batch sizes match the reference.

    Also checks the lazily allocated index buffer: rows left over from a larger
    previous batch are reset to -1 by the in-place slice ``fill_``.
    """
    layer = runner.layer
    for x in make_inputs(layer, batch_sizes, seed):
        n = x.shape[0]
        prev_n = layer._prev_n
        out = runner.forward_eager(x)
        ref, ref_ids = reference_forward(layer, x)
        torch.testing.assert_close(out.float(), ref, **tolerances(layer.dtype),
                                   msg=lambda m: f"eager forward, batch {n}: {m}")
        idx = layer._topk_idx_out
        assert torch.equal(idx[:n].long(), ref_ids), f"batch {n}: routed expert ids differ from the reference"
        if prev_n > n:
            assert bool((idx[n:prev_n] == -1).all()), f"batch {n}: stale routing rows were not reset to -1"


def check_graph_capture_and_replay(mod: types.ModuleType, runner, graph_batch_sizes=GRAPH_BATCH_SIZES,
                                   serve_batch_sizes=SERVE_BATCH_SIZES, seed: int = 321,
                                   replay_vs_eager_tol: dict | None = None) -> None:
    """Capture one graph per batch size, replay with changing inputs, compare with the reference and eager."""
    layer = runner.layer
    graphs = mod.CudaGraphRunner(runner, graph_batch_sizes)
    graphs.capture()
    assert sorted(graphs.graphs) == sorted(graph_batch_sizes)
    inputs = make_inputs(layer, serve_batch_sizes, seed)
    # Replay each input twice, interleaved, so every graph sees new data between replays.
    for round_ in range(2):
        for x in (inputs if round_ == 0 else inputs[::-1]):
            n = x.shape[0]
            out = graphs.replay(x)
            ref, _ = reference_forward(layer, x)
            torch.testing.assert_close(out.float(), ref, **tolerances(layer.dtype),
                                       msg=lambda m: f"graph replay, batch {n}: {m}")
    torch.cuda.synchronize(layer.device)
    # The graphs and eager serving agree on the same inputs.
    # Not bitwise: a padded replay runs at the captured batch size, eager at the real one.
    tol = replay_vs_eager_tol if replay_vs_eager_tol is not None else tolerances(layer.dtype)
    for x in inputs:
        eager = runner.forward_eager(x)
        replayed = graphs.replay(x)
        torch.testing.assert_close(replayed, eager, **tol,
                                   msg=lambda m: f"graph replay vs eager, batch {x.shape[0]}: {m}")


def new_runner(mod: types.ModuleType, device, dtype=torch.float32, max_batch_size: int = max(GRAPH_BATCH_SIZES),
               **layer_kwargs):
    layer = mod.ToyMoELayer(device=device, dtype=dtype, **layer_kwargs)
    return mod.ModelRunner(layer, max_batch_size=max_batch_size)


def check_fixed_runner(mod: types.ModuleType, device) -> None:
    """Everything the fixed runner must do: warmup, eager serving, and on CUDA graph capture + replays."""
    device = torch.device(device)
    runner = new_runner(mod, device)
    runner.warmup()
    assert runner.layer._ws is not None and runner.layer._topk_idx_out is not None, "warmup allocated nothing"
    assert not runner.layer._ws.is_inference(), "warmup made the workspace an inference tensor"
    assert not runner.layer._topk_idx_out.is_inference(), "warmup made the index buffer an inference tensor"
    check_eager_serving(runner)
    if device.type == "cuda":
        check_graph_capture_and_replay(mod, runner)
    # Warmup under an explicit serving context (the engine's run_ctx) works too.
    runner = new_runner(mod, device)
    runner.warmup(run_ctx=torch.no_grad())
    check_eager_serving(runner, batch_sizes=(7, 16, 4))
