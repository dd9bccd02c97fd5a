"""A small MoE-style model runner: warmup/autotune, eager serving, CUDA graph capture and replay.

Used by gpu_validation. runner_buggy.py runs warmup/autotune under
torch.inference_mode() while serving and graph capture run under
torch.no_grad(); runner_fixed.py is what `python -m lints.codemod` makes of it.
Everything but CudaGraphRunner also runs on CPU (pass device="cpu").
"""
from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Optional, Sequence

import torch
import torch.nn.functional as F

Gemm = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def torch_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` with ``weight`` stored row-major as [out_features, in_features]."""
    return x @ weight.t()


@contextlib.contextmanager
def autotune_context(tuner: Optional[Callable[[], ContextManager]] = None):
    """Enter the kernel autotuner (e.g. flashinfer.autotuner.autotune) for the duration of warmup."""
    with tuner() if tuner is not None else contextlib.nullcontext():
        with torch.inference_mode():
            yield


class ToyMoELayer:
    """Top-k routed experts plus a shared expert, writing into reusable, lazily allocated workspaces.

    The router and the routed experts run in torch; the shared expert's two
    matrix products go through ``gemm`` (torch by default, a FlashInfer kernel
    in the FlashInfer test).
    """

    def __init__(self, hidden_size: int = 64, intermediate_size: int = 128, num_experts: int = 8,
                 top_k: int = 2, *, device="cpu", dtype: torch.dtype = torch.float32, seed: int = 0,
                 gemm: Optional[Gemm] = None):
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_experts = num_experts
        self.top_k = top_k
        self.device = torch.device(device)
        self.dtype = dtype
        self.gemm: Gemm = gemm if gemm is not None else torch_linear
        gen = torch.Generator(device="cpu").manual_seed(seed)

        def param(*shape: int) -> torch.Tensor:
            weight = torch.randn(*shape, generator=gen) / shape[-1] ** 0.5
            return weight.to(device=self.device, dtype=dtype).contiguous()

        self.w_router = param(num_experts, hidden_size)
        self.w_up = param(num_experts, intermediate_size, hidden_size)
        self.w_down = param(num_experts, hidden_size, intermediate_size)
        self.w_shared_up = param(intermediate_size, hidden_size)
        self.w_shared_down = param(hidden_size, intermediate_size)
        # Reusable buffers, allocated on first use and grown on demand.
        self._ws: Optional[torch.Tensor] = None
        self._topk_idx_out: Optional[torch.Tensor] = None
        self._prev_n = 0

    def route(self, hidden_states: torch.Tensor):
        router_logits = hidden_states.float() @ self.w_router.float().t()
        topk_weights, topk_ids = torch.topk(torch.softmax(router_logits, dim=-1), self.top_k, dim=-1)
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        return topk_weights.to(self.dtype), topk_ids

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """MoE output for ``hidden_states`` [num_tokens, hidden]: a view into the workspace."""
        num_tokens = hidden_states.shape[0]
        if self._ws is None or self._ws.shape[0] < num_tokens:
            self._ws = torch.empty(num_tokens, self.hidden_size, device=self.device, dtype=self.dtype)
        if self._topk_idx_out is None or self._topk_idx_out.shape[0] < num_tokens:
            self._topk_idx_out = torch.empty(num_tokens, self.top_k, device=self.device, dtype=torch.int32)
        prev_n = self._prev_n
        self._prev_n = num_tokens

        topk_weights, topk_ids = self.route(hidden_states)
        topk_idx_out = self._topk_idx_out
        # Rows left over from a larger previous batch must not look like routed tokens.
        topk_idx_out[num_tokens:prev_n].fill_(-1)
        topk_idx_out[:num_tokens].copy_(topk_ids)

        up = F.silu(torch.einsum("th,eih->tei", hidden_states, self.w_up))
        down = torch.einsum("tei,ehi->teh", up, self.w_down)
        picked = down.gather(1, topk_ids[:, :, None].expand(-1, -1, self.hidden_size))
        final_hidden_states = self._ws[:num_tokens]
        torch.sum(picked * topk_weights[:, :, None], dim=1, out=final_hidden_states)

        shared_output = self.gemm(F.silu(self.gemm(hidden_states, self.w_shared_up)), self.w_shared_down)
        final_hidden_states += shared_output
        return final_hidden_states


class ModelRunner:
    """Owns the layer; warms it up (and autotunes its kernels) and serves eagerly under no_grad."""

    def __init__(self, layer: ToyMoELayer, max_batch_size: int,
                 tuner: Optional[Callable[[], ContextManager]] = None, seed: int = 1):
        self.layer = layer
        self.max_batch_size = max_batch_size
        self.tuner = tuner
        self.seed = seed

    def dummy_input(self, batch_size: int) -> torch.Tensor:
        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        x = torch.randn(batch_size, self.layer.hidden_size, generator=gen)
        return x.to(device=self.layer.device, dtype=self.layer.dtype)

    def warmup(self, run_ctx: Optional[ContextManager] = None) -> None:
        """Run the layer once at the largest batch size: autotuning covers batch sizes up to it."""
        x = self.dummy_input(self.max_batch_size)

        def run_once():
            self.layer.forward(x)

        with autotune_context(self.tuner):
            with run_ctx or torch.inference_mode():
                run_once()
        if self.layer.device.type == "cuda":
            torch.cuda.synchronize(self.layer.device)

    def forward_eager(self, hidden_states: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.layer.forward(hidden_states).clone()


class CudaGraphRunner:
    """Captures one CUDA graph per batch size (largest first, one memory pool) and replays them."""

    def __init__(self, model_runner: ModelRunner, batch_sizes: Sequence[int], capture_warmup_iters: int = 2):
        self.model_runner = model_runner
        self.layer = model_runner.layer
        self.batch_sizes = sorted(batch_sizes)
        self.capture_warmup_iters = capture_warmup_iters
        self.graphs: dict = {}
        self.static_inputs: dict = {}
        self.static_outputs: dict = {}
        self.pool = None

    def capture(self) -> None:
        with torch.no_grad():
            for batch_size in reversed(self.batch_sizes):
                self.capture_one(batch_size)
        torch.cuda.synchronize(self.layer.device)

    def capture_one(self, batch_size: int) -> None:
        layer = self.layer
        static_input = torch.zeros(batch_size, layer.hidden_size, device=layer.device, dtype=layer.dtype)
        stream = torch.cuda.Stream(device=layer.device)
        stream.wait_stream(torch.cuda.current_stream(layer.device))
        with torch.cuda.stream(stream):
            for _ in range(self.capture_warmup_iters):
                layer.forward(static_input)
        torch.cuda.current_stream(layer.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            static_output = layer.forward(static_input)
        if self.pool is None:
            self.pool = graph.pool()
        self.graphs[batch_size] = graph
        self.static_inputs[batch_size] = static_input
        self.static_outputs[batch_size] = static_output

    def replay(self, hidden_states: torch.Tensor) -> torch.Tensor:
        num_tokens = hidden_states.shape[0]
        batch_size = next(bs for bs in self.batch_sizes if bs >= num_tokens)
        static_input = self.static_inputs[batch_size]
        with torch.no_grad():
            static_input[:num_tokens].copy_(hidden_states)
            static_input[num_tokens:].zero_()
            self.graphs[batch_size].replay()
            return self.static_outputs[batch_size][:num_tokens].clone()
