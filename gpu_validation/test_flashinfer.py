"""FlashInfer's real autotuner around a real FlashInfer kernel inside the runner's warmup.

The shared expert's two matrix products run through ``flashinfer.mm_bf16``
(backends cuBLASLt and TinyGEMM, both run on Hopper sm90). Warmup runs under
``flashinfer.autotuner.autotune(True)`` at the largest batch size, so tuning
covers every smaller one; then eager serving, CUDA graph capture and replays
are compared with a float32 torch reference. The first ``mm_bf16`` call of
each backend is timed: on a fresh machine it JIT-builds the kernel module.
"""
from __future__ import annotations

import time

import pytest
import torch

from gpu_validation import checks, runner_buggy, runner_fixed
from gpu_validation.checks import INFERENCE_TENSOR_ERROR, requires_cuda

pytestmark = [pytest.mark.gpu, requires_cuda]

BACKENDS = ("cublaslt", "tinygemm")
GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
SERVE_BATCH_SIZES = (64, 17, 1, 40, 8, 3, 64, 33)
LAYER = {"hidden_size": 128, "intermediate_size": 256, "num_experts": 8, "top_k": 2}


@pytest.fixture(scope="module")
def flashinfer():
    return pytest.importorskip(
        "flashinfer", reason="flashinfer-python is not installed (pip install flashinfer-python==0.7.2.post1)")


def _supported_or_skip(flashinfer, backend: str) -> None:
    major, minor = torch.cuda.get_device_capability()
    if not flashinfer.mm_bf16.is_backend_supported(backend, major * 10 + minor):
        pytest.skip(f"flashinfer.mm_bf16 backend {backend!r} does not support sm{major}{minor}")


def _flashinfer_gemm(flashinfer, backend: str):
    def gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # weight is [out, in] row-major, so weight.t() is the (k, n) column-major operand mm_bf16 wants.
        return flashinfer.mm_bf16(x, weight.t(), backend=backend)
    return gemm


def _timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return result, time.perf_counter() - start


@pytest.mark.parametrize("backend", BACKENDS)
def test_flashinfer_autotune_in_fixed_warmup_then_cuda_graphs(flashinfer, backend, capsys):
    from flashinfer.autotuner import AutoTuner, autotune

    _supported_or_skip(flashinfer, backend)
    gemm = _flashinfer_gemm(flashinfer, backend)
    layer = runner_fixed.ToyMoELayer(device="cuda", dtype=torch.bfloat16, gemm=gemm, **LAYER)

    (x,) = checks.make_inputs(layer, (4,))
    with torch.no_grad():
        y, first_s = _timed(lambda: gemm(x, layer.w_shared_up))
        _, second_s = _timed(lambda: gemm(x, layer.w_shared_up))
    torch.testing.assert_close(y.float(), x.float() @ layer.w_shared_up.float().t(), rtol=2e-2, atol=2e-2)

    tuner = AutoTuner.get()
    cached_before = len(tuner.profiling_cache)
    runner = runner_fixed.ModelRunner(layer, max_batch_size=max(GRAPH_BATCH_SIZES), tuner=lambda: autotune(True))
    _, tune_s = _timed(runner.warmup)
    tuned = len(tuner.profiling_cache) - cached_before
    assert not layer._ws.is_inference() and not layer._topk_idx_out.is_inference()

    checks.check_eager_serving(runner, SERVE_BATCH_SIZES)
    _, graphs_s = _timed(lambda: checks.check_graph_capture_and_replay(
        runner_fixed, runner, GRAPH_BATCH_SIZES, SERVE_BATCH_SIZES))

    with capsys.disabled():
        print(f"\n[flashinfer {flashinfer.__version__}] mm_bf16 backend={backend}: first call (JIT build + load) "
              f"{first_s:.1f} s, second call {second_s * 1e3:.2f} ms; autotune warmup at batch "
              f"{runner.max_batch_size}: {tune_s:.1f} s, {tuned} new tuning-cache entries; "
              f"capture of {len(GRAPH_BATCH_SIZES)} graphs + checked replays: {graphs_s:.1f} s")
    assert tuned > 0, "the autotuner profiled nothing during warmup"


def test_flashinfer_autotune_in_buggy_warmup_still_crashes_serving(flashinfer):
    """Same layer and autotuner, buggy runner: the first in-place update in serving raises."""
    from flashinfer.autotuner import autotune

    backend = "cublaslt"
    _supported_or_skip(flashinfer, backend)
    layer = runner_buggy.ToyMoELayer(device="cuda", dtype=torch.bfloat16,
                                     gemm=_flashinfer_gemm(flashinfer, backend), **LAYER)
    runner = runner_buggy.ModelRunner(layer, max_batch_size=max(GRAPH_BATCH_SIZES), tuner=lambda: autotune(True))
    runner.warmup()
    assert layer._ws.is_inference()
    (x,) = checks.make_inputs(layer, (17,))
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        runner.forward_eager(x)
    graphs = runner_buggy.CudaGraphRunner(runner, GRAPH_BATCH_SIZES)
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        graphs.capture()
