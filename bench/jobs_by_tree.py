"""``--jobs 2`` against ``--jobs 1`` on every corpus tree present, cold (an empty cache folder each run).

    python bench/corpus.py sglang-0.5.15 sglang-0.5.23 vllm-0.11.0 transformers-5.25.0
    python bench/jobs_by_tree.py [--rounds 3]     # about 4 minutes on 2 cores with all four

Runs ``python -m lints PACKAGE -q -j N --cache-dir EMPTY`` in each corpus folder, on a snapshot of
``lints/`` (``targets.py``'s), the trees and the two job counts interleaved round by round. Prints
the median wall seconds and the speed-up as a markdown table.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
from targets import PY, REPO, SNAP, fresh, run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [name for name in corpus.CORPORA if corpus.tree(name).is_dir()]
    if not trees:
        raise SystemExit("bench: no corpus tree; run bench/corpus.py first")
    shutil.rmtree(SNAP, ignore_errors=True)
    shutil.copytree(REPO / "lints", SNAP / "lints", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([PY, "-m", "compileall", "-q", str(SNAP / "lints")], check=True)
    walls: dict[tuple[str, int], list[float]] = {}
    for round_number in range(args.rounds):
        for name in trees:
            package = corpus.CORPORA[name][2]
            for jobs in (1, 2):
                argv = [PY, "-m", "lints", package, "-q", "-j", str(jobs), "--cache-dir", str(fresh(f"jobs-{jobs}"))]
                wall = run(argv, corpus.project_dir(name))["wall"]
                walls.setdefault((name, jobs), []).append(wall)
                print(f"  round {round_number + 1} {name} -j {jobs}: {wall:.2f} s", flush=True)
    print("\n| tree | files | `-j 1` s | `-j 2` s | speed-up |\n| --- | --- | --- | --- | --- |")
    for name in trees:
        files = sum(1 for _ in corpus.tree(name).rglob("*.py"))
        one, two = (statistics.median(walls[name, jobs]) for jobs in (1, 2))
        print(f"| {name} | {files} | {one:.2f} | {two:.2f} | {one / two:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
