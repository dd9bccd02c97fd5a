"""How far ``--jobs 2`` can go with this design: cold ``-j 1`` and ``-j 2`` runs, beside their parts
measured inside one process, in one run on the same tree.

    python bench/corpus.py sglang-0.5.15
    python bench/jobs_ceiling.py            # about 7 minutes on 2 cores

A cold ``-j 1`` run is start-up, summarising every module, the whole-project analysis and the
cache write. Any design that summarises in worker processes and analyses the project in one
process pays at ``-j 2`` at least start-up, the summarising split over two workers that hand
nothing back, and the analysis (the cache write counted as free, beside it). The ceiling is
``-j 1`` over that least ``-j 2``; the hand-over is what handing the summaries back costs. This
design as it is (every summary handed back, the analysis after the last) pays the summarising with
the hand-over instead: ``-j 1`` over that is its own ceiling. With the workers encoding the cache
text and handing nothing back, as if the main process received the summaries for free, the same
sum bounds every design that analyses in one process after the last summary. And
no run takes less than its CPU time over the cores: the CLI runs' CPU is measured too. The same
runs with ``--no-cache`` show what the forked cache writer costs a cold ``-j 2`` run (its page
copies slow the analysis beside it, and the run waits for it) and the peak RSS without it. How well
the machine itself runs such work on two cores is the ``ast`` parse-only floor's own speed-up.
Each figure is the median of 5 interleaved rounds, after one untimed run. Raw figures: .bench/results/jobs_ceiling.json.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import targets  # noqa: E402
from targets import BENCH, PY, REPO, environment, fresh  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants: workers, the cache writer
    return usage.ru_utime + usage.ru_stime


def cli_run(tree: Path, package: str, jobs: int, cache: bool = True) -> tuple[float, float, float]:
    """Wall and CPU seconds (the process and its children, user + system) and peak RSS (MiB) of one
    cold run; without ``cache``, a ``--no-cache`` run (no summaries to write, so no writer process)."""
    cpu = _children_cpu()
    where = ["--cache-dir", str(fresh(f"ceiling-j{jobs}"))] if cache else ["--no-cache"]
    result = targets.run([PY, "-m", "lints", package, "-q", "-j", str(jobs), *where], tree, linter=REPO)
    return result["wall"], _children_cpu() - cpu, result["rss_mib"]


def probe_run(tree: Path, part: str) -> dict:
    """One part of the probe, in a fresh process (a heap that just freed every summary runs faster)."""
    proc = subprocess.run([PY, str(Path(__file__).resolve()), "--probe", part, str(fresh("ceiling-probe"))],
                          cwd=tree, env=environment(REPO), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench: probe {part} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _key_only(job):
    """Summarise one file in a worker and hand back nothing but its content hash."""
    from lints import summary_jobs

    key, _, _ = summary_jobs._summarize_job(job)
    return key


def _key_after_encoding(job):
    """Summarise one file in a worker, encode the cache's JSON text of it as the hand-over does, and
    hand back nothing but its content hash: a hand-over that cost the main process nothing."""
    from lints import summary_jobs

    key = summary_jobs._pack_summary(summary_jobs._summarize_job(job))[0]
    return key


def _parse_only(job) -> int:
    """The ``ast`` parse-only floor of one file: read and parse it, hand back nothing."""
    import ast
    import warnings

    try:
        with open(job.path, "rb") as handle:
            raw = handle.read()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(raw)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    return 0


def probe(part: str, cache_dir: str) -> None:
    """The parts of a cold run, each timed in this process (the tree is the working folder)."""
    from lints import engine, summary_jobs
    from lints.gc_pause import collector_paused
    from lints.options import Config
    from lints.sources import MAX_FILE_BYTES
    from lints.summary_cache import SummaryCache
    from lints.summary_jobs import SUMMARY_BATCH_BYTES, collect_summaries
    from lints.workers import run_jobs

    config = Config()
    out = {}
    weight = summary_jobs._job_weight

    def timed(name, call):
        start, cpu, workers = time.perf_counter(), time.process_time(), _children_cpu()
        result = call()
        out[name] = time.perf_counter() - start
        out[name + "_cpu_main"] = time.process_time() - cpu
        out[name + "_cpu_workers"] = _children_cpu() - workers  # the pool's, waited for when it shuts down
        return result

    with collector_paused():
        jobs = [summary_jobs._Job(e.path, e.module, e.is_package, MAX_FILE_BYTES)
                for e in engine.project_files(".", config, read_keys=False)]
        if part == "j2":  # workers forked from a process that holds no summaries yet, as the CLI's are
            timed("parse_floor_j2", lambda: run_jobs(_parse_only, jobs, 2, weight=weight,
                                                     batch_weight=SUMMARY_BATCH_BYTES))
            timed("summarise_j2_no_handover", lambda: run_jobs(_key_only, jobs, 2, weight=weight,
                                                               batch_weight=SUMMARY_BATCH_BYTES))
            timed("summarise_j2_encoded", lambda: run_jobs(
                _key_after_encoding, jobs, 2, weight=weight, batch_weight=SUMMARY_BATCH_BYTES))
            timed("summarise_j2", lambda: collect_summaries(
                engine.project_files(".", config, read_keys=False), 2, None))
        else:  # as a cold -j 1 run does it: summarise, write the cache, analyse
            timed("parse_floor_j1", lambda: run_jobs(_parse_only, jobs, 1))
            cache = SummaryCache(Path(cache_dir))
            entries = engine.project_files(".", config, read_keys=False)
            summaries, _ = timed("summarise_j1", lambda: collect_summaries(entries, 1, cache))
            timed("cache_write_j1", lambda: cache.save()())
            timed("analysis", lambda: engine.run_rules(engine.analyse(summaries, config), config))
    print(json.dumps(out))


def _derived(row: dict, cores: int) -> dict:
    """The bounds, from the medians: each is a sum of parts timed in different processes, and one
    slow process in a round would move a per-round difference by more than the hand-over."""
    least = row["cli_j1"] - row["summarise_j1"] - row["cache_write_j1"] + row["summarise_j2_no_handover"]
    # this design as it is: the workers hand every summary back, and the analysis waits for the last
    least_handed_back = row["cli_j1"] - row["summarise_j1"] - row["cache_write_j1"] + row["summarise_j2"]
    # any design that analyses in one process after the last summary, writes the cache the workers
    # encoded, and receives the summaries for free
    least_free_handover = (row["cli_j1"] - row["summarise_j1"] - row["cache_write_j1"]
                           + row["summarise_j2_encoded"])
    return {"speedup": row["cli_j1"] / row["cli_j2"],
            "floor_speedup": row["parse_floor_j1"] / row["parse_floor_j2"],
            "summarise_speedup": row["summarise_j1"] / row["summarise_j2_no_handover"],
            "no_cache_speedup": row["cli_j1_no_cache"] / row["cli_j2_no_cache"],
            "writer": row["cli_j2"] - row["cli_j2_no_cache"],
            "least_j2_by_cpu": row["cli_j2_cpu"] / cores,
            "least_j2": least, "ceiling": row["cli_j1"] / least,
            "least_j2_free_handover": least_free_handover,
            "ceiling_free_handover": row["cli_j1"] / least_free_handover,
            "least_j2_handed_back": least_handed_back, "ceiling_handed_back": row["cli_j1"] / least_handed_back,
            "handover": row["summarise_j2"] - row["summarise_j2_no_handover"],
            "handover_cpu_main": row["summarise_j2_cpu_main"] - row["summarise_j2_no_handover_cpu_main"],
            "handover_cpu_workers": row["summarise_j2_cpu_workers"] - row["summarise_j2_no_handover_cpu_workers"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang-0.5.15", help="a folder of .bench/corpus (bench/corpus.py)")
    parser.add_argument("--package", default="sglang")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--probe", nargs=2, metavar=("PART", "CACHE_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        sys.path.insert(0, str(REPO))
        probe(*args.probe)
        return
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    tree = BENCH / "corpus" / args.tree
    if not (tree / args.package).is_dir():
        raise SystemExit(f"bench: no {tree / args.package}: run python bench/corpus.py {args.tree}")
    if not Path(PY).is_file():
        raise SystemExit(f"bench: no {PY}: set up the project venv first (README)")
    # Worker CPU is counted through RUSAGE_CHILDREN: with another start method a forkserver (never
    # waited for) would be the workers' parent, and their CPU would be missing.
    start_method = subprocess.run([PY, "-c", "import multiprocessing as m; print(m.get_start_method())"],
                                  capture_output=True, text=True).stdout.strip()
    if start_method != "fork":
        raise SystemExit(f"bench: the worker start method is {start_method!r}, not 'fork': CPU would be undercounted")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cli_run(tree, args.package, 2)  # untimed: the first read of the tree was up to 2 s slower
    runs: dict[str, list[float]] = {}
    for i in range(args.rounds):
        row = {}
        for jobs in (1, 2):
            for cache, suffix in ((True, ""), (False, "_no_cache")):
                name = f"cli_j{jobs}{suffix}"
                row[name], row[name + "_cpu"], row[name + "_rss"] = cli_run(tree, args.package, jobs, cache)
        row.update(**probe_run(tree, "j2"), **probe_run(tree, "j1"))
        for name, value in row.items():
            runs.setdefault(name, []).append(round(value, 3))
        print(f"  round {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)

    medians = {name: statistics.median(values) for name, values in runs.items()}
    derived = _derived(medians, cores)

    def cell(name: str) -> str:
        if name in derived:
            return f"{derived[name]:.2f}"
        values = runs[name]
        return f"{medians[name]:.2f} ({min(values):.2f}-{max(values):.2f})"

    rows = [
        ("cold `-j 1` (CLI)", "cli_j1", "cli_j1_cpu", None),
        ("cold `-j 2` (CLI)", "cli_j2", "cli_j2_cpu", None),
        ("cold `-j 1 --no-cache` (CLI)", "cli_j1_no_cache", "cli_j1_no_cache_cpu", None),
        ("cold `-j 2 --no-cache` (CLI: no cache writer)", "cli_j2_no_cache", "cli_j2_no_cache_cpu", None),
        ("cache writer's share of cold `-j 2` (the difference of lines 2 and 4)", "writer", None, None),
        ("summarising, in process (`-j 1`)", "summarise_j1", None, None),
        ("cache write, in process (`-j 1`)", "cache_write_j1", None, None),
        ("whole-project analysis and rules", "analysis", None, None),
        ("summarising, 2 workers, summaries handed back", "summarise_j2", "summarise_j2_cpu_main",
         "summarise_j2_cpu_workers"),
        ("summarising, 2 workers, nothing handed back", "summarise_j2_no_handover",
         "summarise_j2_no_handover_cpu_main", "summarise_j2_no_handover_cpu_workers"),
        ("summarising, 2 workers, each encoding the cache text, nothing handed back", "summarise_j2_encoded",
         "summarise_j2_encoded_cpu_main", "summarise_j2_encoded_cpu_workers"),
        ("hand-over (summaries handed back less nothing handed back)", "handover", "handover_cpu_main",
         "handover_cpu_workers"),
        ("`ast` parse-only floor, in process", "parse_floor_j1", None, None),
        ("`ast` parse-only floor, 2 workers, nothing handed back", "parse_floor_j2", "parse_floor_j2_cpu_main",
         "parse_floor_j2_cpu_workers"),
        (f"least `-j 2` by CPU: its CPU / {cores} cores", "least_j2_by_cpu", None, None),
        ("least `-j 2` by design: `-j 1` - summarising - cache write + nothing handed back", "least_j2", None, None),
        ("least `-j 2` with a free hand-over: `-j 1` - summarising - cache write + each encoding the cache text",
         "least_j2_free_handover", None, None),
        ("least `-j 2` handing every summary back: `-j 1` - summarising - cache write + summaries handed back",
         "least_j2_handed_back", None, None),
    ]
    print(f"\n{args.tree} at {commit}: {cores} cores, start method {start_method}; "
          f"median (min-max) of {args.rounds} interleaved rounds; the last five lines from the medians\n")
    print("| part | wall s | CPU s, main process (CLI: all processes) | CPU s, workers |\n| --- | --- | --- | --- |")
    for label, wall, cpu_main, cpu_workers in rows:
        print(f"| {label} | {cell(wall)} | {cell(cpu_main) if cpu_main else ''} | "
              f"{cell(cpu_workers) if cpu_workers else ''} |")
    print(f"\nspeed-up, `-j 1` / `-j 2`: {cell('speedup')}x (both `--no-cache`: {cell('no_cache_speedup')}x); "
          f"ceiling by design, `-j 1` / least `-j 2`: {cell('ceiling')}x, with a free hand-over: "
          f"{cell('ceiling_free_handover')}x, handing every summary back: {cell('ceiling_handed_back')}x; "
          f"2 workers against 1 process, nothing "
          f"handed back: summarising {cell('summarise_speedup')}x, the `ast` parse-only floor "
          f"{cell('floor_speedup')}x")
    print("\npeak RSS MiB of the CLI runs (sampled every 0.2 s, summed over the process tree), median (min-max): "
          + "; ".join(f"`{name[4:].replace('_no_cache', ' --no-cache').replace('j', '-j ', 1)}` {cell(name + '_rss')}"
                      for name in ("cli_j1", "cli_j2", "cli_j1_no_cache", "cli_j2_no_cache")))
    (BENCH / "results").mkdir(parents=True, exist_ok=True)
    (BENCH / "results" / "jobs_ceiling.json").write_text(json.dumps(
        {"tree": args.tree, "commit": commit, "cores": cores, "start_method": start_method, "runs": runs,
         "from_medians": derived}, indent=1))


if __name__ == "__main__":
    main()
