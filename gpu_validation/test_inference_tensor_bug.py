"""The bug and its fix on the toy runner: eager serving everywhere, CUDA graph capture/replay on a GPU."""
from __future__ import annotations

import pytest
import torch

from gpu_validation import checks, runner_buggy, runner_fixed
from gpu_validation.checks import INFERENCE_TENSOR_ERROR, requires_cuda


@pytest.mark.parametrize("device", checks.devices())
def test_buggy_warmup_then_eager_forward_raises(device):
    runner = checks.new_runner(runner_buggy, device)
    runner.warmup()  # runs the layer under inference mode: its lazily allocated buffers are inference tensors
    assert runner.layer._ws.is_inference()
    assert runner.layer._topk_idx_out.is_inference()
    x_full, x_small = checks.make_inputs(runner.layer, (runner.max_batch_size, 3))
    # Smaller batch: `topk_idx_out[num_tokens:prev_n].fill_(-1)` is the first in-place update.
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        runner.forward_eager(x_small)
    # Same batch: empty slice, but `fill_`/`copy_`/`out=`/`+=` on an inference tensor all raise.
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        runner.forward_eager(x_full)


@pytest.mark.parametrize("device", checks.devices())
def test_buggy_final_hidden_states_iadd_raises(device):
    """`final_hidden_states += shared_output` alone (the FlashInfer MoE case) raises too."""
    runner = checks.new_runner(runner_buggy, device)
    runner.warmup()
    layer = runner.layer
    (x,) = checks.make_inputs(layer, (4,))
    with torch.no_grad():
        final_hidden_states = layer._ws[:4]
        shared_output = torch.ones_like(x)
        with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
            final_hidden_states += shared_output


@pytest.mark.parametrize("device", checks.devices())
def test_buggy_runner_works_when_every_phase_uses_inference_mode(device):
    """The bug is the mismatch between phases: serving under inference mode too does not crash."""
    runner = checks.new_runner(runner_buggy, device)
    runner.warmup()
    for x in checks.make_inputs(runner.layer, (3, 16, 7)):
        with torch.inference_mode():
            out = runner.layer.forward(x).clone()
        ref, _ = checks.reference_forward(runner.layer, x)
        torch.testing.assert_close(out.float(), ref, **checks.tolerances(runner.layer.dtype))


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("capture_warmup_iters", [2, 0], ids=["side-stream-warmup", "inside-torch.cuda.graph"])
def test_buggy_warmup_then_cuda_graph_capture_raises(capture_warmup_iters):
    runner = checks.new_runner(runner_buggy, "cuda")
    runner.warmup()
    graphs = runner_buggy.CudaGraphRunner(runner, checks.GRAPH_BATCH_SIZES, capture_warmup_iters=capture_warmup_iters)
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        graphs.capture()
    # The failed capture leaves the process usable.
    torch.cuda.synchronize()
    assert torch.ones(4, device="cuda").sum().item() == 4.0


@pytest.mark.parametrize("device", checks.devices())
def test_fixed_runner_warmup_eager_and_graphs(device):
    checks.check_fixed_runner(runner_fixed, device)


def test_fixed_differs_from_buggy_only_in_grad_mode_lines():
    """runner_fixed.py is runner_buggy.py with the inference_mode wrappers removed, nothing else."""
    import difflib
    from pathlib import Path

    here = Path(__file__).parent
    buggy = (here / "runner_buggy.py").read_text().splitlines()
    fixed = (here / "runner_fixed.py").read_text().splitlines()
    removed = [line[1:].strip() for line in difflib.unified_diff(buggy, fixed, lineterm="", n=0)
               if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in difflib.unified_diff(buggy, fixed, lineterm="", n=0)
             if line.startswith("+") and not line.startswith("+++")]
    assert removed == ["with torch.inference_mode():", "yield", "with run_ctx or torch.inference_mode():"]
    assert added == ["yield", "with run_ctx or contextlib.nullcontext():"]
