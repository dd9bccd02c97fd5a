"""The findings of this checkout and of another commit's on the benchmark corpora, and what changed.

    git worktree add ../gm-old <commit>                      # the commit to compare with
    python bench/compare_findings.py --old ../gm-old         # every corpus of bench/corpus.py
    python bench/compare_findings.py --old ../gm-old vllm-0.34.0

In each corpus folder (fetched by ``bench/corpus.py``, default settings) both run
``python -m lints PACKAGE --format json --no-cache --select GM1,GM202`` (every rule but the opt-in
GM201; ``--select GM201`` for that one), each with its own checkout first on ``PYTHONPATH``. Prints per tree the findings by code and
the lines added (+) and gone (-); the reports go to ``.bench/results/compare-{old,new}-<tree>-<codes>.json``.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / ".bench" / "results"
SELECT = "GM1,GM202"


def findings(checkout: Path, name: str, tag: str, select: str = SELECT) -> tuple[list[dict], float]:
    package = corpus.CORPORA[name][2]
    env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR",)}
    env["PYTHONPATH"] = str(checkout)
    out = RESULTS / f"compare-{tag}-{name}-{select.replace(',', '_')}.json"
    start = time.perf_counter()
    with open(out, "w") as handle:
        subprocess.run([sys.executable, "-m", "lints", package, "--format", "json", "--no-cache", "--select", select],
                       cwd=corpus.project_dir(name), env=env, stdout=handle, stderr=subprocess.DEVNULL, check=False)
    return json.loads(out.read_text())["findings"], time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, type=Path, help="a checkout of the commit to compare with")
    parser.add_argument("--select", default=SELECT, help=f"the codes to compare (default {SELECT})")
    parser.add_argument("trees", nargs="*", default=list(corpus.CORPORA))
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name in args.trees:
        old, _ = findings(args.old.resolve(), name, "old", args.select)
        new, seconds = findings(REPO, name, "new", args.select)
        key = lambda f: (f["path"], f["line"], f["code"])  # noqa: E731
        counts = dict(sorted(collections.Counter(f["code"] for f in new).items()))
        print(f"{name}: {counts or 'none'} ({seconds:.1f} s)")
        for sign, found in (("+", {key(f) for f in new} - {key(f) for f in old}),
                            ("-", {key(f) for f in old} - {key(f) for f in new})):
            for path, line, code in sorted(found):
                print(f"  {sign} {code} {path}:{line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
