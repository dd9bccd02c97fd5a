"""Whether two checkouts report the same findings, every field, on sglang 0.5.15/0.5.23 and vLLM 0.11.0.

    git worktree add ../gm-before <commit>                           # the commit to compare with
    python bench/same_findings.py run ../gm-before before.json       # its findings, saved
    python bench/same_findings.py run . after.json                   # this checkout's
    python bench/same_findings.py compare before.json after.json     # exit 1 when any list differs
    python bench/same_findings.py run . after.json --warm            # also a warm run (fresh cache, second run)
    python bench/same_findings.py run . all.json --select GM1,GM2    # every rule, the opt-in GM201 too

In each corpus folder (fetched by ``bench/corpus.py``) ``run`` calls
``python -m lints PACKAGE --format json --no-cache`` (the default rules) with the checkout alone on
``PYTHONPATH``, and saves the ``findings`` list per tree. With ``--warm`` it also lints each tree twice
with a new cache folder and keeps the second (warm) run's findings; ``--select`` passes its codes on
(runs named ``cold[CODES]``). ``compare`` checks the lists are
equal, field for field and in order, and prints the first difference per tree when they are not.
A move of code that keeps behaviour prints ``identical`` for every tree.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

TREES = ("sglang-0.5.15", "sglang-0.5.23", "vllm-0.11.0")


def lint(checkout: Path, tree: str, cache: Path | None, select: str | None) -> tuple[list[dict], float]:
    package = corpus.CORPORA[tree][2]
    env = {k: v for k, v in os.environ.items() if k != "GRADMODE_CACHE_DIR"}
    env["PYTHONPATH"] = str(checkout)
    cache_args = ["--no-cache"] if cache is None else ["--cache-dir", str(cache)]
    cache_args += ["--select", select] if select else []
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lints", package, "--format", "json", *cache_args],
                          cwd=corpus.project_dir(tree), env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: findings; anything else is a failed run, not a result
        sys.exit(f"{tree}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)["findings"], seconds


def run(args: argparse.Namespace) -> int:
    checkout = args.checkout.resolve()
    saved: dict[str, dict[str, list[dict]]] = {}
    codes = f"[{args.select}]" if args.select else ""
    for tree in args.trees:
        saved[tree] = {}
        saved[tree][f"cold{codes}"], seconds = lint(checkout, tree, None, args.select)
        line = f"{tree}{codes}: {len(saved[tree][f'cold{codes}'])} findings, cold {seconds:.1f} s"
        if args.warm:
            with tempfile.TemporaryDirectory() as cache:
                lint(checkout, tree, Path(cache), args.select)
                saved[tree][f"warm{codes}"], seconds = lint(checkout, tree, Path(cache), args.select)
            line += f", warm {seconds:.1f} s"
        print(line, flush=True)
    args.out.write_text(json.dumps({"checkout": str(checkout), "trees": saved}, indent=1))
    return 0


def first_difference(old: list[dict], new: list[dict]) -> str:
    for index, (before, after) in enumerate(zip(old, new)):
        if before != after:
            fields = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            return f"finding {index} differs in {', '.join(fields)}: {before} != {after}"
    return f"{len(old)} findings before, {len(new)} after"


def compare(args: argparse.Namespace) -> int:
    old = json.loads(args.old.read_text())["trees"]
    new = json.loads(args.new.read_text())["trees"]
    differ = 0
    for tree in sorted(old.keys() | new.keys()):
        for run_kind in sorted(old.get(tree, {}).keys() | new.get(tree, {}).keys()):
            before, after = old.get(tree, {}).get(run_kind), new.get(tree, {}).get(run_kind)
            if before is None or after is None:
                print(f"{tree} {run_kind}: only in {'new' if before is None else 'old'}")
                differ += 1
                continue
            counts = dict(sorted(collections.Counter(f["code"] for f in after).items()))
            if before == after:
                print(f"{tree} {run_kind}: identical ({len(after)} findings: {counts})")
            else:
                print(f"{tree} {run_kind}: DIFFERENT: {first_difference(before, after)}")
                differ += 1
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="lint the trees with a checkout and save the findings")
    run_parser.add_argument("checkout", type=Path)
    run_parser.add_argument("out", type=Path)
    run_parser.add_argument("--warm", action="store_true", help="also a second run over a fresh cache")
    run_parser.add_argument("--select", help="codes to pass on (default: the default rules)")
    run_parser.add_argument("--trees", nargs="+", default=list(TREES), choices=list(corpus.CORPORA))
    compare_parser = commands.add_parser("compare", help="compare two saved outputs of run")
    compare_parser.add_argument("old", type=Path)
    compare_parser.add_argument("new", type=Path)
    args = parser.parse_args()
    return run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
