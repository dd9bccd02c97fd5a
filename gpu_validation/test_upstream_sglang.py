"""The REAL upstream SGLang warmup code (sglang 0.5.15 with the bug, its codemod rewrite, 0.5.23 with the fix).

The files come from the pinned wheels (``python gpu_validation/fetch_upstream.py``); they are loaded by
file path with only their SGLang imports stubbed (sglang_upstream.py lists every stub). Three versions:

* ``0.5.15``: as released. ``flashinfer_autotune_context`` wraps its ``yield`` in
  ``with torch.inference_mode(), autotune(True, cache=...), maybe_skip_logits:`` and ``BaseRunner._dummy_run``
  ends in ``with torch.inference_mode(), run_ctx or empty_context(): run_once()``.
* ``0.5.15+codemod``: the same two files after ``python -m lints.codemod`` (on a temp copy).
* ``0.5.23``: as released, with the upstream fix (sgl-project/sglang#33788, closing #33470).

Three paths are driven:

1. ``run_flashinfer_autotune_forward`` alone (GPU + FlashInfer): the real context around a forward of the
   model at the largest batch size, whose shared-expert GEMMs are ``flashinfer.mm_bf16`` (cuBLASLt), so
   FlashInfer's real autotuner profiles them.
2. The whole warmup chain (GPU + FlashInfer): the real ``BaseRunner._flashinfer_autotune`` ->
   ``run_flashinfer_autotune_forward`` -> ``flashinfer_autotune_context`` -> ``BaseRunner._dummy_run`` ->
   ``run_once`` -> ``model.forward``, with the dummy decode buffers from the real ``_alloc_dummy_decode_buffers``.
3. ``BaseRunner._dummy_run`` alone (CPU everywhere, CUDA where present; torch GEMM, no FlashInfer).

Each path then serves under ``torch.no_grad()`` as SGLang does (eager forwards at changing batch sizes, then
on CUDA one graph per batch size captured with ``torch.cuda.graph`` and replayed), checked against the
float32 reference of checks.py. The serving side is the project's toy runner (``runner_fixed.ModelRunner.
forward_eager`` and ``runner_fixed.CudaGraphRunner``), not SGLang's graph runner. The lazily allocated buffers
are ``ToyMoELayer._ws`` / ``_topk_idx_out``: made in the first forward (the warmup), updated in place later.
0.5.15 must leave them inference tensors and make eager serving and graph capture raise the exact error;
the other two must not.
"""
from __future__ import annotations

import time

import pytest
import torch

from gpu_validation import checks, runner_fixed, sglang_upstream as su
from gpu_validation.checks import INFERENCE_TENSOR_ERROR, requires_cuda

# The sglang wheels (~52 MB) are fetched on first use: part of the full suite, not the quick one.
pytestmark = pytest.mark.slow

# Every test takes the session fixture `upstream_files` (conftest.py): it fetches the pinned files when absent
# and pip can download them, and skips with `python gpu_validation/fetch_upstream.py` as the way to get them.

VARIANTS = ("0.5.15", "0.5.15+codemod", "0.5.23")
BUGGY_VARIANTS = {"0.5.15"}
GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
SERVE_BATCH_SIZES = (64, 17, 1, 40, 8, 3, 64, 33)
LAYER = {"hidden_size": 128, "intermediate_size": 256, "num_experts": 8, "top_k": 2}


@pytest.fixture(scope="module")
def codemodded(upstream_files, tmp_path_factory):
    return su.codemod_copies(tmp_path_factory.mktemp("upstream-codemod"))


def _files(variant: str, codemodded) -> tuple:
    if variant == "0.5.15+codemod":
        return codemodded["flashinfer_autotune"], codemodded["base_runner"]
    return su.upstream_path(variant, su.FA_MEMBER), su.upstream_path(variant, su.BR_MEMBER)


@pytest.fixture(scope="module")
def flashinfer():
    return pytest.importorskip(
        "flashinfer", reason="flashinfer-python is not installed (pip install flashinfer-python==0.7.2.post1)")


def _mm_bf16(flashinfer, backend: str = "cublaslt"):
    major, minor = torch.cuda.get_device_capability()
    if not flashinfer.mm_bf16.is_backend_supported(backend, major * 10 + minor):
        pytest.skip(f"flashinfer.mm_bf16 backend {backend!r} does not support sm{major}{minor}")

    def gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return flashinfer.mm_bf16(x, weight.t(), backend=backend)
    return gemm


def _autotune_kwargs(up) -> dict:
    """0.5.15 takes ``skip_logits`` (SGLang's own call passes True); 0.5.23 ``run_lm_head`` (SGLang passes False)."""
    import inspect

    params = inspect.signature(up.fa.run_flashinfer_autotune_forward).parameters
    return {"skip_logits": True} if "skip_logits" in params else {"run_lm_head": False}


def _check_serving(variant: str, model: su.ToyModel, device: str, graph_batch_sizes, serve_batch_sizes) -> str:
    """Eager serving then (CUDA) graph capture + replay under no_grad; for 0.5.15, both must raise."""
    layer = model.layer
    serving = runner_fixed.ModelRunner(layer, max_batch_size=max(graph_batch_sizes))  # only forward_eager is used
    if variant in BUGGY_VARIANTS:
        assert layer._ws.is_inference() and layer._topk_idx_out.is_inference(), \
            "0.5.15's warmup should have left the lazily allocated buffers inference tensors"
        # A batch smaller than the warmup's, so the forward reuses the buffers warmup allocated.
        (x,) = checks.make_inputs(layer, (max(graph_batch_sizes) // 2 + 1,))
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR) as eager_err:
            serving.forward_eager(x)
        said = f"eager serving raised: {str(eager_err.value).splitlines()[0]}"
        if device == "cuda":
            graphs = runner_fixed.CudaGraphRunner(serving, graph_batch_sizes)
            with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
                graphs.capture()
            torch.cuda.synchronize()
            assert torch.ones(4, device="cuda").sum().item() == 4.0  # the process stays usable
            said += "; CUDA graph capture raised the same error"
        return said
    assert not layer._ws.is_inference() and not layer._topk_idx_out.is_inference(), \
        f"{variant}: warmup made the lazily allocated buffers inference tensors"
    checks.check_eager_serving(serving, serve_batch_sizes)
    said = f"eager serving at batches {list(serve_batch_sizes)} matches the float32 reference"
    if device == "cuda":
        checks.check_graph_capture_and_replay(runner_fixed, serving, graph_batch_sizes, serve_batch_sizes)
        said += f"; {len(graph_batch_sizes)} CUDA graphs captured, replays match the reference and eager"
    return said


def _report(capsys, text: str) -> None:
    with capsys.disabled():
        print(f"\n  [{text}]")


# ----------------------------------------------------------------------------------- 1. autotune context alone

@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("variant", VARIANTS)
def test_real_flashinfer_autotune_context_then_serving(variant, flashinfer, codemodded, tmp_path, capsys):
    from flashinfer.autotuner import AutoTuner

    gemm = _mm_bf16(flashinfer)
    layer = runner_fixed.ToyMoELayer(device="cuda", dtype=torch.bfloat16, gemm=gemm, **LAYER)
    model = su.ToyModel(layer)
    mr = su.fake_model_runner(model, "cuda")
    max_bs = max(GRAPH_BATCH_SIZES)
    input_ids = torch.arange(max_bs, device="cuda") % model.vocab_size
    tuner = AutoTuner.get()
    tuner.clear_cache()
    with su.upstream_runtime(*_files(variant, codemodded), cache_dir=tmp_path) as up:
        start = time.perf_counter()
        up.fa.run_flashinfer_autotune_forward(mr, lambda: model.forward(input_ids, None, None), **_autotune_kwargs(up))
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - start
        record = up.record
    tuned = len(tuner.profiling_cache)
    (call,) = model.calls
    assert call["tuning"] is True, "the forward did not run inside FlashInfer's autotune(True)"
    assert call["stream"] == mr.forward_stream.cuda_stream, "the forward did not run on mr.forward_stream"
    assert call["inference_mode"] is (variant in BUGGY_VARIANTS)
    assert len(record.autotune_dummy_run_mode) == 1
    assert tuned > 0, "FlashInfer's autotuner profiled nothing"
    caches = sorted(p.name for p in tmp_path.rglob("*.json"))
    assert caches, "the real context wrote no FlashInfer autotune cache under SGLANG_CACHE_DIR"
    said = _check_serving(variant, model, "cuda", GRAPH_BATCH_SIZES, SERVE_BATCH_SIZES)
    _report(capsys, f"sglang {variant} run_flashinfer_autotune_forward: inference_mode={call['inference_mode']} "
                    f"in the forward, {tuned} tuning-cache entries in {tune_s:.1f} s, cache {caches}; {said}")


# ----------------------------------------------------------------------------------- 2. the whole warmup chain

@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("variant", VARIANTS)
def test_real_base_runner_flashinfer_autotune_chain_then_serving(variant, flashinfer, codemodded, tmp_path, capsys):
    from flashinfer.autotuner import AutoTuner

    gemm = _mm_bf16(flashinfer)
    layer = runner_fixed.ToyMoELayer(device="cuda", dtype=torch.bfloat16, gemm=gemm, **LAYER)
    model = su.ToyModel(layer)
    mr = su.fake_model_runner(model, "cuda")
    max_bs = max(GRAPH_BATCH_SIZES)
    tuner = AutoTuner.get()
    tuner.clear_cache()
    with su.upstream_runtime(*_files(variant, codemodded), cache_dir=tmp_path) as up:
        runner = su.toy_runner(up.br, mr)
        buffers = su.alloc_dummy_buffers(runner, max_bs)
        assert not buffers.input_ids.is_inference()
        runner._flashinfer_autotune(buffers=buffers, batch_size=max_bs)
        torch.cuda.synchronize()
        record = up.record
    (call,) = model.calls
    assert call["num_tokens"] == max_bs and call["tuning"] is True
    assert call["stream"] == mr.forward_stream.cuda_stream
    assert call["inference_mode"] is (variant in BUGGY_VARIANTS)
    assert record.forward_context == 1 and len(record.set_dp_buffer_len) == 1  # run_once() ran once
    assert len(record.autotune_dummy_run_mode) == 1
    tuned = len(tuner.profiling_cache)
    assert tuned > 0
    said = _check_serving(variant, model, "cuda", GRAPH_BATCH_SIZES, SERVE_BATCH_SIZES)
    _report(capsys, f"sglang {variant} BaseRunner._flashinfer_autotune -> _dummy_run: "
                    f"inference_mode={call['inference_mode']} in model.forward, {tuned} tuning-cache entries; {said}")


# ----------------------------------------------------------------------------------- 3. _dummy_run alone

@pytest.mark.parametrize("device", checks.devices())
@pytest.mark.parametrize("run_ctx", ["none", "no_grad"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_real_base_runner_dummy_run_then_serving(variant, run_ctx, device, codemodded, tmp_path, capsys):
    """``_dummy_run`` as SGLang's warmup calls it, with no run_ctx or the caller's ``torch.no_grad()``.

    With 0.5.15, ``torch.inference_mode()`` is entered before the caller's run_ctx, so even
    ``run_ctx=torch.no_grad()`` leaves the buffers inference tensors.
    """
    layer = runner_fixed.ToyMoELayer(device=device)
    model = su.ToyModel(layer)
    mr = su.fake_model_runner(model, device)
    graph_bs = checks.GRAPH_BATCH_SIZES
    max_bs = max(graph_bs)
    with su.upstream_runtime(*_files(variant, codemodded), cache_dir=tmp_path) as up:
        runner = su.toy_runner(up.br, mr)
        buffers = su.alloc_dummy_buffers(runner, max_bs)
        runner._dummy_run(max_bs, run_ctx=torch.no_grad() if run_ctx == "no_grad" else None, buffers=buffers)
        record = up.record
    (call,) = model.calls
    assert call["num_tokens"] == max_bs
    assert record.forward_context == 1 and len(record.set_dp_buffer_len) == 1
    assert call["inference_mode"] is (variant in BUGGY_VARIANTS)
    if variant not in BUGGY_VARIANTS:
        assert call["grad_enabled"] is (run_ctx == "none"), "the caller's run_ctx should decide the grad mode"
    said = _check_serving(variant, model, device, graph_bs, checks.SERVE_BATCH_SIZES)
    _report(capsys, f"sglang {variant} BaseRunner._dummy_run(run_ctx={run_ctx}) on {device}: "
                    f"inference_mode={call['inference_mode']} grad_enabled={call['grad_enabled']}; {said}")
