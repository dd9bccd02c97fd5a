"""A package with no project marker (an unzipped wheel, a copied tree): is it cached like a project?

    python bench/markerless.py                  # sglang-0.5.23 (fetched by bench/corpus.py)
    python bench/markerless.py vllm-0.34.0 --runs 3

Copies the corpus tree's package into a new temporary folder (no pyproject.toml, setup.py or .git
above it), then lints it there ``--runs`` times in a row (``python -m lints PACKAGE -q --format
concise``, default settings, this checkout on ``PYTHONPATH``), with an empty user cache folder
(``XDG_CACHE_HOME``) of its own. Prints each run's wall seconds, the later runs as a share of the
first (issue 33's target: the second at most 10%), whether every run printed the same findings,
and that nothing was written into the temporary folder.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", default="sglang-0.5.23", choices=sorted(corpus.CORPORA))
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    package = corpus.CORPORA[args.tree][2]
    source = corpus.ensure(args.tree)
    with tempfile.TemporaryDirectory(prefix="markerless-") as scratch:
        folder, user_cache = Path(scratch) / "unzipped", Path(scratch) / "user-cache"
        folder.mkdir()
        shutil.copytree(source, folder / package)
        env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
        env.update(PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(user_cache))
        times, outputs = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "lints", package, "-q", "--format", "concise"], cwd=folder,
                                  env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if proc.returncode not in (0, 1):
                print(proc.stderr, file=sys.stderr)
                return 2
            outputs.append(proc.stdout)
        for index, seconds in enumerate(times):
            share = "" if index == 0 else f"  ({seconds / times[0]:.1%} of the first)"
            print(f"{args.tree} without a marker, run {index + 1}: {seconds:.2f} s{share}")
        print(f"same findings every run: {all(out == outputs[0] for out in outputs)}")
        print(f"written beside the package: {sorted(p.name for p in folder.iterdir() if p.name != package) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
