"""Big serving modules for the big-file rows of bench/targets.py.

A module repeats the sample engine (examples/engine/model_runner.py: a MoE layer with lazily
allocated workspaces and in-place updates, a model runner with an autotune context and a dummy
run under inference mode, a serving function) under fresh names until it reaches the size, so
every block is analysed and the findings grow with the size.
"""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SAMPLE = os.path.join(ROOT, "examples", "engine", "model_runner.py")


def generate(size_bytes: int) -> str:
    """The sample engine's MoE layer, runner and serving function, repeated under fresh names."""
    with open(SAMPLE, encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("\nclass ")
    header, block = text[:start], text[start:]
    parts, total, i = [header], len(header), 0
    while total < size_bytes:
        part = (re.sub(r"\b(FlashInferFusedMoE|ModelRunner)\b", rf"\g<1>{i}", block)
                .replace("def serve(", f"def serve_{i}("))
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)
