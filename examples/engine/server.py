"""Serving side of the sample engine: eager forward under no_grad, and a caller that warms up."""
import torch
from .model_runner import ModelRunner


def serve(runner: ModelRunner, batch):
    with torch.no_grad():
        return runner.moe.forward(batch, batch, batch)


def start(runner: ModelRunner):
    # The caller switches inference mode on around warmup: GM104.
    with torch.inference_mode():
        runner.kernel_warmup()


@torch.inference_mode()
def generate(model, tokens):
    # Inference mode in a plain serving path is fine: nothing here is a warmup/capture path.
    return model(tokens)
