"""Time the codemod on one real file: torch's autograd/graph.py with one planted GM101.

    python bench/fix_speed.py            # best of 3: the whole-project lint of it, and `fix_text`

The file is copied into a temporary one-file project (the linter always analyses a whole
project). Run it on two checkouts (e.g. a `git worktree` of another commit, with PYTHONPATH
pointing at it) in one session to get a ratio.
"""
from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

from lints.file_fixes import FixOptions, fix_text
from lints.options import Config
from lints.engine import lint_project
from lints.sources import SourceFile

PLANTED = "\n\ndef kernel_warmup(model):\n    with torch.inference_mode():\n        model()\n"


def best_of(runs: int, call) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    torch_dir = Path(importlib.util.find_spec("torch").submodule_search_locations[0])
    original = torch_dir / "autograd" / "graph.py"
    text = original.read_text() + PLANTED
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pyproject.toml").write_text("[tool.gradmode]\n")
        path = Path(tmp) / "graph.py"
        path.write_text(text)
        config = Config()

        def lint():
            return lint_project([str(path)], config, jobs=1, use_cache=False)

        run = lint()
        findings = {str(path): [f for f in run.findings if f.path == str(path)]}
        assert any(f.code == "GM101" for f in findings[str(path)]), run.findings
        source = SourceFile(str(path), text, "utf-8", text.encode())
        options = FixOptions(config, write=False, findings=findings)
        fixed, _remaining, error = fix_text(source, options)
        assert error is None and fixed is not None, (error, _remaining)
        print(f"file: torch/autograd/graph.py + planted GM101 ({len(text.encode()) // 1024} KB), "
              f"findings: {', '.join(f.code for f in findings[str(path)])}")
        print(f"lint_project (one-file project, no cache): best of 3 {best_of(3, lint):.2f} s")
        print(f"fix_text: best of 3 {best_of(3, lambda: fix_text(source, options)):.2f} s")


if __name__ == "__main__":
    main()
