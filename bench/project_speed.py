"""Whole-project mode vs the old per-file mode, caches, --jobs scaling and parse floors (issues 9, 12).

    python bench/project_speed.py                 # sglang 0.5.15, median of 3 rounds
    python bench/project_speed.py --repeat 1 --tree vllm-0.11.0

One run measures, interleaved round by round (the order flips every round, so that a
burst of load from other processes does not land on one tool only):

* old per-file mode, commit 3f0f5d8 (a git worktree in ``.bench/old``, created if missing):
  ``python -m lints TREE --no-cache -j 2``;
* the new whole-project mode: cold ``-j 2`` and cold ``-j 1`` (empty ``--cache-dir``), a warm
  rerun, a rerun after ``touch`` on one file (same content), a rerun after appending a comment
  line to that file (new content);
* floors: ``ast.parse`` of every file and libcst ``parse_module`` of every ``--floor-every``-th
  file, scaled by bytes (``bench/parse_floor.py``, one process each).

The new tool is a snapshot of the working tree's ``lints/`` copied to ``.bench/snap/`` at the
start, so that edits to ``lints/`` during the run (which invalidate the caches by design) do
not leak into it. The tree is a scratch copy (``.bench/scratch/``) of the corpus from
``bench/corpus.py``: the touch/append steps edit it. Each command runs in the copy's project
folder with the tree given as a relative path, PYTHONPATH set to the tool under test, and
GRADMODE_CACHE_DIR unset. Wall time is the median of ``--repeat`` rounds; peak RSS is the
maximum over rounds, both as the largest single process (``wait4`` rusage, like
``/usr/bin/time -f %M``) and as the sampled sum over the process and its workers.
Prints markdown tables; the raw figures go to ``.bench/results/project_speed-<tree>.json``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".bench"
OLD_COMMIT = "3f0f5d8"
OLD = BENCH / "old"
SNAP = BENCH / "snap"
SCRATCH = BENCH / "scratch"
PY = sys.executable
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pids: set[int]) -> set[int]:
    """``pids`` and all their descendants (one scan of /proc per level)."""
    found = set(pids)
    while True:
        more = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    stat = handle.read()
                ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in found and int(entry.name) not in found:
                more.add(int(entry.name))
        if not more:
            return found
        found |= more


def _rss(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total


def run(argv: list[str], cwd: Path, tool: Path, ok=(0, 1)) -> dict:
    """Wall seconds, exit code, peak RSS (largest process; sampled sum over the tree), stderr tail."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tool)
    err_path, out_path = SCRATCH / "stderr.txt", SCRATCH / "stdout.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, env=env)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _rss(_children({proc.pid})))
                done.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
    stderr = err_path.read_text("utf-8", "replace")
    stdout = out_path.read_text("utf-8", "replace").strip().splitlines()
    if proc.returncode not in ok:
        raise SystemExit(f"bench: {' '.join(argv)} (in {cwd}) exited {proc.returncode}:\n{stderr[-3000:]}")
    return {"wall": wall, "rc": proc.returncode, "maxrss_mb": usage.ru_maxrss / 1024,
            "tree_rss_mb": peak[0] / 2**20, "stderr": stderr[-2000:],
            "last_line": stdout[-1] if stdout else ""}


def ensure_old() -> Path:
    if not (OLD / "lints" / "__init__.py").exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(OLD), OLD_COMMIT], check=True)
    return OLD


def snapshot() -> tuple[Path, str]:
    """Copy the working tree's lints/ to .bench/snap/lints; (folder for PYTHONPATH, git describe)."""
    shutil.rmtree(SNAP, ignore_errors=True)
    shutil.copytree(REPO / "lints", SNAP / "lints", ignore=shutil.ignore_patterns("__pycache__"))
    described = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                               capture_output=True, text=True).stdout.strip()
    return SNAP, described


def scratch_copy(name: str) -> Path:
    src = corpus.project_dir(name)
    dest = SCRATCH / name
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".gradmode_cache", ".complete"))
    return dest


def versions(tool: Path) -> dict:
    code = ("import importlib.metadata as m, platform; "
            "print(platform.python_version(), m.version('libcst'), m.version('flake8'))")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return {"python": out[0], "libcst": out[1], "flake8": out[2]}


def med(runs: list[dict], key: str = "wall") -> float:
    return statistics.median(r[key] for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", default="sglang-0.5.15", choices=list(corpus.CORPORA))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--floor-every", type=int, default=4, help="libcst floor on every K-th file (default 4)")
    parser.add_argument("--edit-file", default=None, help="file (relative to the tree's project folder) to touch "
                        "and edit (default: the package's srt/model_executor/model_runner.py, else its largest file)")
    args = parser.parse_args(argv)

    corpus.ensure(args.tree)
    old = ensure_old()
    new, described = snapshot()
    for tool in (old, new):
        subprocess.run([PY, "-m", "compileall", "-q", str(tool / "lints")], check=True)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    project = scratch_copy(args.tree)
    package = corpus.CORPORA[args.tree][2]
    files = sorted(project.rglob("*.py"))
    edit = project / (args.edit_file or f"{package}/srt/model_executor/model_runner.py")
    if not edit.is_file():
        edit = max(files, key=lambda p: p.stat().st_size)
    original = edit.read_bytes()
    lint = [PY, "-m", "lints", package]
    load_before = os.getloadavg()
    started = datetime.datetime.now()
    print(f"bench: {args.tree}: {len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB; "
          f"new tool = {described}; edit file = {edit.relative_to(project)}", flush=True)

    results: dict[str, list[dict]] = {k: [] for k in
                                      ("old", "cold2", "warm", "touch", "append", "cold1", "ast")}

    def step(key: str, argv: list[str], tool: Path) -> None:
        r = run(argv, project, tool)
        results[key].append(r)
        print(f"  round {rnd + 1} {key:<7} {r['wall']:7.2f} s  rss {r['maxrss_mb']:6.0f} MB "
              f"(tree {r['tree_rss_mb']:6.0f} MB)  rc {r['rc']}", flush=True)

    for rnd in range(args.repeat):
        cache2, cache1 = SCRATCH / f"cache-{rnd}-j2", SCRATCH / f"cache-{rnd}-j1"
        for c in (cache1, cache2):
            shutil.rmtree(c, ignore_errors=True)
        edit.write_bytes(original)
        order = ["old", "new", "cold1", "ast"] if rnd % 2 == 0 else ["cold1", "ast", "new", "old"]
        for what in order:
            if what == "old":
                step("old", lint + ["--no-cache", "-j", "2"], old)
            elif what == "cold1":
                step("cold1", lint + ["-j", "1", "--cache-dir", str(cache1)], new)
            elif what == "ast":
                step("ast", [PY, str(REPO / "bench" / "parse_floor.py"), "--parser", "ast", package], new)
            else:
                cached = lint + ["-j", "2", "--cache-dir", str(cache2)]
                step("cold2", cached, new)
                step("warm", cached, new)
                os.utime(edit)  # content unchanged
                step("touch", cached, new)
                edit.write_bytes(original + b"\n# bench: appended comment line\n")
                step("append", cached, new)
                edit.write_bytes(original)
    print("  libcst floor (once) ...", flush=True)
    floor_run = run([PY, str(REPO / "bench" / "parse_floor.py"), "--every", str(args.floor_every), package],
                    project, new)
    floor_json = json.loads(floor_run["last_line"])
    ast_json = [json.loads(r["last_line"]) for r in results["ast"]]
    load_after = os.getloadavg()
    edit.write_bytes(original)

    v = versions(new)
    w = {k: med(rs) for k, rs in results.items()}
    rss = {k: max(r["maxrss_mb"] for r in rs) for k, rs in results.items()}
    trss = {k: max(r["tree_rss_mb"] for r in rs) for k, rs in results.items()}
    rss["libcst"], trss["libcst"] = floor_run["maxrss_mb"], floor_run["tree_rss_mb"]
    # scaled by bytes: the in-process parse time x (all bytes / parsed bytes), plus the process's start-up
    libcst_scaled = floor_json.get("scaled_seconds", floor_json["seconds"]) + floor_run["wall"] - floor_json["seconds"]

    raw = {"tree": args.tree, "files": len(files), "new_tool": described, "old_tool": OLD_COMMIT,
           "started": started.isoformat(timespec="minutes"), "load_before": load_before, "load_after": load_after,
           "versions": v, "edit_file": str(edit.relative_to(project)), "repeat": args.repeat,
           "runs": {k: [{x: y for x, y in r.items() if x != "stderr"} for r in rs] for k, rs in results.items()},
           "libcst_floor": {k: y for k, y in floor_run.items() if k != "stderr"},
           "libcst_floor_inside": floor_json, "floor_every": args.floor_every,
           "ast_floor_inside": ast_json, "last_stderr": {k: rs[-1]["stderr"] for k, rs in results.items()}}
    out_dir = BENCH / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"project_speed-{args.tree}.json").write_text(json.dumps(raw, indent=1))

    def verdict(x: float, limit: float, le: bool = True) -> str:
        return "met" if (x <= limit if le else x >= limit) else "**missed**"

    def row(label: str, key: str) -> str:
        walls = ", ".join(f"{r['wall']:.1f}" for r in results[key])
        return f"| {label} | {w[key]:.2f} | {walls} | {rss[key]:.0f} | {trss[key]:.0f} |"

    n = args.repeat
    print(f"\n{args.tree}: {len(files)} files; median of {n}; python {v['python']}, libcst {v['libcst']}, "
          f"flake8 {v['flake8']}; new tool {described}, old tool {OLD_COMMIT}; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; edited file `{edit.relative_to(project)}`\n")
    head = "| run | median wall s | runs | peak RSS MB (largest process) | peak RSS MB (sum over workers, sampled) |"
    print(head + "\n| --- | --- | --- | --- | --- |")
    print(row("old per-file, `--no-cache -j 2`", "old"))
    print(row("new whole-project, cold, `-j 2`", "cold2"))
    print(row("new, warm rerun (nothing changed)", "warm"))
    print(row("new, rerun after `touch` of one file", "touch"))
    print(row("new, rerun after appending a comment line to one file", "append"))
    print(row("new, cold, `-j 1`", "cold1"))
    print(row("floor: `ast.parse` every file, 1 process", "ast"))
    print(f"| floor: libcst `parse_module`, every {args.floor_every}th file, scaled by bytes, "
          f"1 process, 1 run | {libcst_scaled:.2f} | {floor_run['wall']:.1f} (measured) | {rss['libcst']:.0f} | "
          f"{trss['libcst']:.0f} |")
    print()
    print("| target | value | limit | verdict |\n| --- | --- | --- | --- |")
    x = w["cold2"] / w["old"]
    print(f"| issue 9: cold whole-project / old per-file (`-j 2`) | {x:.2f}x | <= 1.5x | {verdict(x, 1.5)} |")
    for key, label in (("touch", "after `touch`"), ("append", "after a one-line edit"), ("warm", "unchanged")):
        x = w[key] / w["cold2"]
        print(f"| issue 9: rerun {label} / cold | {x:.3f}x | <= 0.10x | {verdict(x, 0.10)} |")
    peak = max(max(rss.values()), max(trss.values()))
    print(f"| issue 9: peak RSS, any run | {peak:.0f} MB | < 2048 MB | {verdict(peak, 2048)} |")
    x = w["cold2"] / libcst_scaled
    print(f"| issue 12: default run (cold `-j 2`) / libcst floor (1 process) | {x:.2f}x | <= 0.5x | "
          f"{verdict(x, 0.5)} |")
    x = w["cold1"] / w["cold2"]
    print(f"| issue 12: speed-up `-j 2` over `-j 1` (cold) | {x:.2f}x | >= 1.8x | {verdict(x, 1.8, le=False)} |")
    print(f"\nast floor inside the process (after imports): "
          f"{statistics.median(a['seconds'] for a in ast_json):.2f} s; libcst floor: {json.dumps(floor_json)}")
    print("\nlast stderr of each step:")
    for k, rs in results.items():
        print(f"  {k}: " + " | ".join(line for line in rs[-1]["stderr"].strip().splitlines()[-2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
