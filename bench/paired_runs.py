"""Two commands timed in pairs, A B A B ...: each pair's ratio A/B, so that a drift of the machine's speed
during the run moves both sides of a pair alike. The cold-time tables in RESULTS.md come from it.

    python bench/paired_runs.py -n 7 --vs "env PYTHONPATH=../gm-old python -m lints sglang --no-cache -q" \\
        -- env PYTHONPATH=. python -m lints sglang --no-cache -q --no-libraries

Each run is one whole process, its start-up included, with its output thrown away; its CPU seconds and peak
memory are the kernel's accounting of it and the processes it waited for (``os.wait4``; peak: the largest
of them, not their sum). Printed: min, median and max of each figure, and of the pairs' ratios. Quote the
median ratio; a wide min-max says the machine was noisy.
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time


def timed(command: list[str]) -> dict[str, float]:
    start = time.monotonic()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return {"wall s": wall, "cpu s": usage.ru_utime + usage.ru_stime,
            "peak MiB": usage.ru_maxrss / 1024, "exit": process.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5, help="pairs to time (default 5)")
    parser.add_argument("--warmup", type=int, default=0, help="untimed pairs first (default 0)")
    parser.add_argument("--vs", required=True, help="command B (the baseline), one string split as a shell would")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="command A, after --")
    args = parser.parse_args(argv)
    a = args.command[1:] if args.command[:1] == ["--"] else args.command
    b = shlex.split(args.vs)
    if not a:
        parser.error("command A is missing (after --)")
    for _ in range(args.warmup):
        timed(a)
        timed(b)
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for _ in range(args.n):
        runs["A"].append(timed(a))
        runs["B"].append(timed(b))
    print(f"{'':14}{'min':>10}{'median':>10}{'max':>10}   n = {args.n} pairs")
    for side in ("A", "B"):
        exits = sorted({int(run["exit"]) for run in runs[side]})
        for figure in ("wall s", "cpu s", "peak MiB"):
            values = [run[figure] for run in runs[side]]
            print(f"{side} {figure:<12}{min(values):>10.2f}{statistics.median(values):>10.2f}{max(values):>10.2f}")
        print(f"{side} exit codes    {exits}")
    for figure in ("wall s", "cpu s"):
        ratios = [x[figure] / y[figure] for x, y in zip(runs["A"], runs["B"])]
        print(f"A/B {figure[:-2]:<10}{min(ratios):>10.3f}{statistics.median(ratios):>10.3f}{max(ratios):>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
