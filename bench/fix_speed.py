"""Time the codemod on one real file: torch's autograd/graph.py with one planted GM101.

    python bench/fix_speed.py            # best of 3 `fix_text` calls, and a lint of the same text

Run it on two checkouts (e.g. a `git worktree` of an older commit, with
PYTHONPATH pointing at it) in one session to get a ratio.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from lints.codemod import FixOptions, fix_text
from lints.config import Config
from lints.engine import analyze_text
from lints.files import SourceFile

PLANTED = "\n\ndef kernel_warmup(model):\n    with torch.inference_mode():\n        model()\n"


def best_of(runs: int, call) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    path = Path(torch.__file__).parent / "autograd" / "graph.py"
    text = path.read_text() + PLANTED
    source = SourceFile(str(path), text, "utf-8", text.encode())
    options = FixOptions(Config(), write=False)
    fixed, remaining, error = fix_text(source, options)
    assert error is None and fixed is not None and not remaining, (error, remaining)
    print(f"file: {path} + planted GM101 ({len(text.encode()) // 1024} KB)")
    print(f"fix_text: best of 3 {best_of(3, lambda: fix_text(source, options)):.2f} s")
    print(f"lint (analyze_text): best of 3 {best_of(3, lambda: analyze_text(text, str(path), Config())):.2f} s")


if __name__ == "__main__":
    main()
