"""Time the fix paths on one file with many findings (each a GM101 in a warmup function of its own).

    python bench/many_fixes.py [--findings N] [--base CHECKOUT]

Times, in fresh processes on a generated one-file project: `python -m lints --format json` (every
finding's edits), `python -m lints.codemod --diff` and `python -m lints.codemod` (writing). With
``--base`` (e.g. a `git worktree` of another commit) each command also runs on that checkout,
interleaved, and the ratio is printed. The file is generated here: no upstream code.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def generated(findings: int) -> str:
    parts = ["import torch\n"]
    for i in range(findings):
        parts.append(f"def warmup_{i}(model):\n    with torch.inference_mode():\n        model()\n")
    return "".join(parts)


def timed(checkout: Path, folder: Path, args: list[str], text: str) -> float:
    (folder / "a.py").write_text(text)
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("GRADMODE_CACHE_DIR", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", *args, "a.py"], cwd=folder, env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed in {checkout}: {proc.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", type=int, default=200)
    parser.add_argument("--base", type=Path, default=None, help="another checkout to compare with")
    options = parser.parse_args()
    text = generated(options.findings)
    commands = [["lints", "--format", "json", "--no-cache"], ["lints.codemod", "--diff"], ["lints.codemod"]]
    print(f"one file, {options.findings} GM101 findings, {len(text.splitlines())} lines")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pyproject.toml").write_text("[tool.gradmode]\n")
        for args in commands:
            now = timed(HERE, folder, args, text)
            line = f"python -m {' '.join(args)} a.py: {now:.1f} s"
            if options.base is not None:
                base = timed(options.base.resolve(), folder, args, text)
                line += f"; base {base:.1f} s; base / this {base / now:.2f}x"
            print(line, flush=True)


if __name__ == "__main__":
    main()
