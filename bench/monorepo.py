"""Four corpus trees linted as one project (issue 33's monorepo): cold time and peak memory, a rerun after a
one-line edit, and each part of the analysis against sglang 0.5.23 alone.

    python bench/monorepo.py                 # sglang-0.5.23 vllm-0.34.0 flashinfer-0.7.4 transformers-5.25.0

The packages (``bench/corpus.py``) are copied side by side into a temporary folder with a ``pyproject.toml``
(default settings). Runs, one each: ``python -m lints PACKAGES -q --format concise --no-libraries`` cold (an
empty cache), then again after ``_edit = 1`` is appended to one file (a change the summaries see). Peak RSS is
the largest process's (``ru_maxrss`` of the waited children). Then, in one process on each project's cached
summaries, the seconds of each part of the analysis (``lints.engine.analyse`` in one process, its parts
timed, the least of ``--repeat`` runs), with the source's growth (lines, calls) beside them. With ``--each``,
every tree is also linted alone as a project of its own and its parts timed the same way: the sum of the trees
alone against the whole tells growth that is the project's size (whole / sum above 1) from growth that is the
trees' mix (sglang alone is cheaper per call than transformers).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TREES = ["sglang-0.5.23", "vllm-0.34.0", "flashinfer-0.7.4", "transformers-5.25.0"]
EDITED = "sglang/srt/model_executor/model_runner.py"

_PARTS = r'''
import gc, json, sqlite3, sys, time
gc.disable()
from lints.callgraph import CallGraph
from lints.options import Config
from lints.phases import Phases
from lints.project import Project
from lints.regions import Regions
from lints.analysis import ProjectAnalysis
from lints.model import ServingMode
from lints.summary_records import with_records
from lints import engine
summaries = {}
with sqlite3.connect(sys.argv[1]) as db:
    for (text,) in db.execute("select summary from summaries"):
        s = with_records(json.loads(text))
        summaries[s["path"]] = s
config = Config()
parts, t = {}, time.perf_counter()
def mark(name):
    global t
    now = time.perf_counter(); parts[name] = round(now - t, 2); t = now
project = Project(summaries.values()); mark("index")
graph = CallGraph(project); graph.build(); mark("call graph")
analysis = ProjectAnalysis.__new__(ProjectAnalysis)
analysis.project, analysis.config, analysis.graph, analysis._buffers_child = project, config, graph, None
from lints.rules import ALL_RULES
analysis.buffer_holders = config.is_selected(engine.HOLDER_RULE, ALL_RULES[engine.HOLDER_RULE].DEFAULT_ENABLED)
analysis.regions = Regions(project, graph)
analysis.phases = Phases(project, graph, analysis.regions, config); mark("phases")
mode, evidence = analysis._infer_serving_mode()
analysis.serving = ServingMode(mode, "inferred", evidence); mark("grad modes")
analysis.buffers.allocations; mark("allocations")
analysis.kept_buffers; mark("updates")
engine.run_rules(analysis, config); mark("rules")
parts["calls"] = sum(len(fn["calls"]) for _, fn in project.functions.values())
parts["edges"] = sum(len(graph.runs(fid)) for fid in project.functions)
print(json.dumps(parts))
'''


def _lines(folder: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in folder.rglob("*.py"))


def _timed(command: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, peak MiB of the largest child so far) of one run."""
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _parts(cache: Path, env: dict, repeat: int = 1) -> dict:
    """Each part's seconds, the least of ``repeat`` runs (one process each): a part's time moves by a third
    from run to run on this machine, and the least is the run least disturbed."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _PARTS, str(cache)], env=env, capture_output=True, text=True,
                             check=True)
        runs.append(json.loads(out.stdout))
    return {name: min(run[name] for run in runs) for name in runs[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="*", default=TREES)
    parser.add_argument("--each", action="store_true", help="also time each tree's parts as a project of its own")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the parts, the least time of each kept")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(REPO)
    with tempfile.TemporaryDirectory(prefix="gm-monorepo-") as scratch:
        alone, whole = Path(scratch) / "alone", Path(scratch) / "whole"
        packages = []
        for tree in args.trees:
            corpus.ensure(tree)
            package = corpus.tree(tree)
            shutil.copytree(package, whole / package.name)
            packages.append(package.name)
            if tree == args.trees[0]:
                shutil.copytree(package, alone / package.name)
        for project in (alone, whole):
            (project / "pyproject.toml").write_text("[tool.gradmode]\n")
        each = {}
        if args.each:
            for tree, package in zip(args.trees, packages):
                own = Path(scratch) / f"each-{package}"
                shutil.copytree(whole / package, own / package)
                (own / "pyproject.toml").write_text("[tool.gradmode]\n")
                _timed([sys.executable, "-m", "lints", package, "-q", "--no-libraries"], own, env)  # its cache
                each[tree] = _parts(own / ".gradmode_cache" / "cache.sqlite3", env, args.repeat)
        command = [sys.executable, "-m", "lints", *packages, "-q", "--format", "concise", "--no-libraries"]
        cold, peak = _timed(command, whole, env)
        with open(whole / EDITED, "a", encoding="utf-8") as handle:
            handle.write("_edit = 1\n")
        edited, peak_after = _timed(command, whole, env)
        lines = (_lines(alone), _lines(whole))
        print(f"project: {' + '.join(args.trees)}: {lines[1]:,} lines ({lines[1] / lines[0]:.2f}x {args.trees[0]})")
        print(f"cold: {cold:.1f} s, peak {peak:.0f} MiB (largest process)")
        print(f"after `_edit = 1` in {EDITED}: {edited:.1f} s ({edited / cold:.0%} of cold)", flush=True)
        _timed([sys.executable, "-m", "lints", packages[0], "-q", "--no-libraries"], alone, env)  # its cache
        small = _parts(alone / ".gradmode_cache" / "cache.sqlite3", env, args.repeat)
        large = _parts(whole / ".gradmode_cache" / "cache.sqlite3", env, args.repeat)
    print(f"| part | {args.trees[0]} s | whole s | growth |")
    print("| --- | --- | --- | --- |")
    for name in small:
        if name in ("calls", "edges"):
            continue
        print(f"| {name} | {small[name]} | {large[name]} | {large[name] / max(small[name], 0.01):.1f}x |")
    print(f"| (source: lines, calls) | {lines[0]:,}; {small['calls']:,} | {lines[1]:,}; {large['calls']:,} | "
          f"{lines[1] / lines[0]:.1f}x; {large['calls'] / small['calls']:.1f}x |")
    print(f"| (call graph edges) | {small['edges']:,} | {large['edges']:,} | {large['edges'] / small['edges']:.1f}x |")
    if each:
        print()
        print("| part | " + " | ".join(f"{tree} s" for tree in each) + " | sum s | whole s | whole / sum |")
        print("| --- |" + " --- |" * (len(each) + 3))
        for name in small:
            total = sum(parts[name] for parts in each.values())
            cells = " | ".join(f"{parts[name]:,}" for parts in each.values())
            ratio = f"{large[name] / total:.2f}x"
            print(f"| {name} | {cells} | {round(total, 2):,} | {large[name]:,} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
