"""How far ``--jobs 2`` can go with this design: cold ``-j 1`` and ``-j 2`` runs, beside their parts
measured inside one process, in one run on the same tree.

    python bench/corpus.py sglang-0.5.15
    python bench/jobs_ceiling.py            # about 2 minutes on 2 cores

A cold ``-j 1`` run is start-up, summarising every module, the whole-project analysis and the
cache write. Any design that summarises in worker processes and analyses the project in one
process pays at ``-j 2`` at least start-up, the summarising split over two workers that hand
nothing back, and the analysis (the cache write counted as free, beside it). The ceiling is
``-j 1`` over that least ``-j 2``; the hand-over is what handing the summaries back costs. And
no run takes less than its CPU time over the cores: the CLI runs' CPU is measured too.
Each figure is the median of 3 interleaved rounds. Raw figures: .bench/results/jobs_ceiling.json.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".bench"
WORK = BENCH / "jobs_ceiling"
PY = str(REPO / ".venv" / "bin" / "python")


def _env() -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    return environ


def _fresh(name: str) -> Path:
    folder = WORK / name
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants: workers, the cache writer
    return usage.ru_utime + usage.ru_stime


def cli_run(tree: Path, package: str, jobs: int) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its children, user + system) of one cold run."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run([PY, "-m", "lints", package, "-q", "-j", str(jobs), "--cache-dir", str(_fresh(f"j{jobs}"))],
                          cwd=tree, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench: -j {jobs} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
    return wall, _children_cpu() - cpu


def probe_run(tree: Path) -> dict:
    proc = subprocess.run([PY, str(Path(__file__).resolve()), "--probe", str(_fresh("probe"))], cwd=tree, env=_env(),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench: probe failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _key_only(job):
    """Summarise one file in a worker and hand back nothing but its content hash."""
    from lints import engine

    key, _ = engine._summarize_job(job)
    return key


def probe(cache_dir: str) -> None:
    """The parts of a cold run, each timed in this process (the tree is the working folder)."""
    from lints import engine, files
    from lints.options import Config

    config = Config()
    out = {}

    def timed(name, call):
        start, cpu, workers = time.perf_counter(), time.process_time(), _children_cpu()
        result = call()
        out[name] = time.perf_counter() - start
        out[name + "_cpu_main"] = time.process_time() - cpu
        out[name + "_cpu_workers"] = _children_cpu() - workers  # the pool's, waited for when it shuts down
        return result

    with files.collector_paused():
        # the workers first, forked from a process that holds no summaries yet (as the CLI's are)
        jobs = [engine._Job(e.path, e.module, e.is_package, files.MAX_FILE_BYTES)
                for e in engine.project_files(".", config, read_keys=False)]
        timed("summarise_j2_no_handover", lambda: files.run_jobs(_key_only, jobs, 2, weight=engine._job_weight,
                                                                 batch_weight=engine.SUMMARY_BATCH_BYTES))
        handed = timed("summarise_j2", lambda: engine.collect_summaries(
            engine.project_files(".", config, read_keys=False), 2, None))
        del handed
        cache = engine.SummaryCache(Path(cache_dir))
        entries = engine.project_files(".", config, read_keys=False)
        summaries, _ = timed("summarise_j1", lambda: engine.collect_summaries(entries, 1, cache))
        timed("cache_write_j1", lambda: cache.save()())
        timed("analysis", lambda: engine.run_rules(engine.analyse(summaries, config), config))
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang-0.5.15", help="a folder of .bench/corpus (bench/corpus.py)")
    parser.add_argument("--package", default="sglang")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probe", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        sys.path.insert(0, str(REPO))
        probe(args.probe)
        return
    tree = BENCH / "corpus" / args.tree
    if not (tree / args.package).is_dir():
        raise SystemExit(f"bench: no {tree / args.package}: run python bench/corpus.py {args.tree}")
    runs: dict[str, list[float]] = {}
    for i in range(args.rounds):
        (j1, j1_cpu), (j2, j2_cpu) = cli_run(tree, args.package, 1), cli_run(tree, args.package, 2)
        row = {"cli_j1": j1, "cli_j2": j2, "cli_j1_cpu": j1_cpu, "cli_j2_cpu": j2_cpu, **probe_run(tree)}
        for name, value in row.items():
            runs.setdefault(name, []).append(round(value, 3))
        print(f"  round {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    m = {name: statistics.median(values) for name, values in runs.items()}
    least_j2 = m["cli_j1"] - m["summarise_j1"] - m["cache_write_j1"] + m["summarise_j2_no_handover"]
    rows = [
        ("cold `-j 1` (CLI)", m["cli_j1"]),
        ("cold `-j 2` (CLI)", m["cli_j2"]),
        ("CPU of the cold `-j 1` run (user + system, its processes)", m["cli_j1_cpu"]),
        ("CPU of the cold `-j 2` run", m["cli_j2_cpu"]),
        (f"least `-j 2` by CPU = its CPU / {os.cpu_count()} cores", m["cli_j2_cpu"] / os.cpu_count()),
        ("summarising, in process (`-j 1`)", m["summarise_j1"]),
        ("cache write, in process (`-j 1`)", m["cache_write_j1"]),
        ("whole-project analysis and rules", m["analysis"]),
        ("summarising, 2 workers, summaries handed back", m["summarise_j2"]),
        ("summarising, 2 workers, nothing handed back", m["summarise_j2_no_handover"]),
        ("least `-j 2` = `-j 1` - summarising - cache write + the line above", least_j2),
    ]
    print(f"\n{args.tree}, {os.cpu_count()} CPUs, median of {args.rounds} interleaved rounds\n")
    print("| part | s |\n| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value:.2f} |")
    for name in ("summarise_j2", "summarise_j2_no_handover"):
        print(f"{name}: CPU of the main process {m[name + '_cpu_main']:.2f} s, of the workers "
              f"{m[name + '_cpu_workers']:.2f} s")
    print(f"\n`-j 2` / `-j 1`: {m['cli_j1'] / m['cli_j2']:.2f}x; ceiling (-j 1 / least -j 2): "
          f"{m['cli_j1'] / least_j2:.2f}x; hand-over: {m['summarise_j2'] - m['summarise_j2_no_handover']:.2f} s")
    (BENCH / "results").mkdir(parents=True, exist_ok=True)
    (BENCH / "results" / "jobs_ceiling.json").write_text(json.dumps({"tree": args.tree, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
