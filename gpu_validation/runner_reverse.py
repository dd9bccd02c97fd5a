"""The reverse direction: warmup and serving run under inference mode, CUDA graph capture outside it.

The engine serves under ``torch.inference_mode()`` throughout, as vLLM does, and warms up under it too; only
the capture entry point runs with no grad-mode context at all (the driver calls it from ``main``). Warmup
allocates the layer's workspaces as inference tensors; the capture's first in-place update of one raises.
The fix (GM106's, ``python -m lints.codemod --unsafe-fixes``) adds ``@torch.inference_mode()`` to the
capture entry. The layer is runner_buggy's ``ToyMoELayer``: it sets no grad mode itself.
"""
from __future__ import annotations

from typing import Sequence

import torch

from gpu_validation.runner_buggy import ToyMoELayer


class ModelRunner:
    def __init__(self, layer: ToyMoELayer, max_batch_size: int, seed: int = 1):
        self.layer = layer
        self.max_batch_size = max_batch_size
        self.seed = seed

    def dummy_input(self, batch_size: int) -> torch.Tensor:
        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        x = torch.randn(batch_size, self.layer.hidden_size, generator=gen)
        return x.to(device=self.layer.device, dtype=self.layer.dtype)

    @torch.inference_mode()
    def warmup(self) -> None:
        self.layer.forward(self.dummy_input(self.max_batch_size))

    @torch.inference_mode()
    def execute_model(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.layer.forward(hidden_states).clone()


class CudaGraphRunner:
    """One CUDA graph per batch size (largest first, one memory pool), replayed under inference mode."""

    def __init__(self, model_runner: ModelRunner, batch_sizes: Sequence[int]):
        self.layer = model_runner.layer
        self.batch_sizes = sorted(batch_sizes)
        self.graphs: dict = {}
        self.static_inputs: dict = {}
        self.static_outputs: dict = {}
        self.pool = None

    def capture(self) -> None:
        for batch_size in reversed(self.batch_sizes):
            self.capture_one(batch_size)
        torch.cuda.synchronize(self.layer.device)

    def capture_one(self, batch_size: int) -> None:
        layer = self.layer
        static_input = torch.zeros(batch_size, layer.hidden_size, device=layer.device, dtype=layer.dtype)
        stream = torch.cuda.Stream(device=layer.device)
        stream.wait_stream(torch.cuda.current_stream(layer.device))
        with torch.cuda.stream(stream):
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

    @torch.inference_mode()
    def execute_model(self, hidden_states: torch.Tensor) -> torch.Tensor:
        num_tokens = hidden_states.shape[0]
        batch_size = next(bs for bs in self.batch_sizes if bs >= num_tokens)
        static_input = self.static_inputs[batch_size]
        static_input[:num_tokens].copy_(hidden_states)
        static_input[num_tokens:].zero_()
        self.graphs[batch_size].replay()
        return self.static_outputs[batch_size][:num_tokens].clone()


def main(batch_sizes: Sequence[int] = (1, 2, 4, 8, 16)) -> CudaGraphRunner:
    runner = ModelRunner(ToyMoELayer(device="cuda"), max_batch_size=max(batch_sizes))
    runner.warmup()
    graphs = CudaGraphRunner(runner, batch_sizes)
    graphs.capture()
    return graphs


if __name__ == "__main__":
    main()
