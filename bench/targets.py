"""Issue 12's questions, in one run on the same real tree: peers, parse floors, flake8 overhead,
``--jobs`` scaling, caches, big files and memory. Prints the tables of bench/RESULTS.md.

    python bench/corpus.py sglang-0.5.15 sglang-0.5.23    # the trees: pinned wheels, sha256 checked
    python bench/targets.py --setup                        # the peers' venvs under .bench/venvs
    python bench/targets.py                                # about 15 minutes on 2 cores

Everything runs on a scratch copy of ``.bench/corpus/sglang-0.5.15`` (its marker pyproject.toml
means default settings) on the relative path ``sglang``, and on a 150-file sample of it (every
17th file). The linter under test is a snapshot of ``lints/`` in ``.bench/targets/snap`` on
PYTHONPATH: the caches are keyed on the tool's files, so edits during the run must not reach it.
Each figure is the median of 3 runs (interleaved where two tools are compared), or 1 run where a
run takes over a minute. Peak RSS is the sampled sum over the process and its children. Raw
figures: ``.bench/results/targets.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import big_files  # noqa: E402
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".bench"
BASE = BENCH / "targets"
SNAP = BASE / "snap"
VENVS = BENCH / "venvs"
PY = str(REPO / ".venv" / "bin" / "python")
FLAKE8_GM = str(REPO / ".venv" / "bin" / "flake8")  # the project venv: flake8 with our plugin
FLAKE8 = str(VENVS / "flake8" / "bin" / "flake8")  # flake8 alone: it runs every installed plugin
BUGBEAR = str(VENVS / "flake8-bugbear" / "bin" / "flake8")
TORCHFIX = str(VENVS / "torchfix" / "bin" / "torchfix")
PEERS = {  # venv -> pip install arguments (TorchFix without torch: --no-deps)
    "flake8": ["flake8==7.5.0"],
    "flake8-bugbear": ["flake8==7.5.0", "flake8-bugbear==26.10.27"],
    "torchfix": ["--no-deps", "torchfix==0.7.0", "libcst>=1.5,<1.6", "PyYAML", "flake8==7.5.0", "pyflakes",
                 "pycodestyle", "mccabe"],
}
TREE = "sglang-0.5.15"
BIG_TREE = "sglang-0.5.23"
EDITED = Path("sglang", "srt", "model_executor", "model_runner.py")
TORCHFIX_CAP_S = 120
RAW: dict = {"runs": {}}
PAGE = os.sysconf("SC_PAGE_SIZE")


# running ---------------------------------------------------------------------------------------
def _descendants(root: int) -> set[int]:
    """``root`` and its descendants, from each thread's ``children`` list (no scan of all of /proc)."""
    found, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        found.add(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as handle:
                    frontier.extend(int(child) for child in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def _rss(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total


def environment(linter: Path = SNAP, **extra: str) -> dict:
    """This process's environment, with ``linter`` (a folder holding ``lints/``) first on the path
    and no cache folder of the user's."""
    environ = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(linter), PYTHONDONTWRITEBYTECODE="1", **extra)
    return environ


def run(argv: list[str], cwd: Path, env: dict | None = None, timeout: float | None = None,
        linter: Path = SNAP) -> dict:
    """Wall seconds, exit status and peak RSS (MiB, sampled sum over the process tree) of one command."""
    environ = environment(linter, **(env or {}))
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss(_descendants(proc.pid)))
            done.wait(0.2)  # light: the sampler shares the 2 cores with the runs it measures

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        timed_out = True
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if not timed_out and proc.returncode not in (0, 1):
        raise SystemExit(f"bench: {argv} exited {proc.returncode}\n{err.decode(errors='replace')[-3000:]}")
    return {"wall": round(wall, 3), "rc": proc.returncode, "timed_out": timed_out,
            "rss_mib": round(peak[0] / 2**20), "err": err.decode(errors="replace").strip().splitlines()[-1:]}


def measure(key: str, argv: list[str], cwd: Path, env=None, rounds: int = 3, prepare=None,
            timeout: float | None = None) -> dict:
    """Median wall (and max peak RSS) of up to ``rounds`` runs; one run if it takes over a minute."""
    runs = []
    for i in range(rounds):
        if prepare:
            prepare()
        runs.append(run(argv, cwd, env() if callable(env) else env, timeout))
        print(f"  {key:<34} {runs[-1]['wall']:8.2f} s {runs[-1]['rss_mib']:6d} MiB  {runs[-1]['err']}", flush=True)
        if runs[-1]["wall"] > 60:
            break
    RAW["runs"][key] = runs
    return {"wall": statistics.median(r["wall"] for r in runs), "rss_mib": max(r["rss_mib"] for r in runs),
            "runs": [r["wall"] for r in runs], "timed_out": any(r["timed_out"] for r in runs)}


def fresh(name: str) -> Path:
    folder = BASE / "caches" / name
    shutil.rmtree(folder, ignore_errors=True)
    return folder


# set-up ----------------------------------------------------------------------------------------
def setup_peers() -> None:
    for name, args in PEERS.items():
        venv = VENVS / name
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *args], check=True)


def prepare_trees() -> tuple[Path, Path, Path]:
    shutil.rmtree(SNAP, ignore_errors=True)
    shutil.copytree(REPO / "lints", SNAP / "lints", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([PY, "-m", "compileall", "-q", str(SNAP / "lints")], check=True)
    trees = []
    for name in (TREE, BIG_TREE):
        if not corpus.tree(name).is_dir():
            raise SystemExit(f"bench: run `python bench/corpus.py {name}` first")
        copy = BASE / name
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(corpus.project_dir(name), copy, ignore=shutil.ignore_patterns(".gradmode_cache", ".complete"))
        trees.append(copy)
    sample = BASE / "sample150"
    shutil.rmtree(sample, ignore_errors=True)
    for path in sorted((trees[0] / "sglang").rglob("*.py"))[::17][:150]:
        target = sample / path.relative_to(trees[0])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    shutil.copy2(trees[0] / "pyproject.toml", sample / "pyproject.toml")
    for folder in (trees[0], sample, trees[1]):
        files = list((folder / "sglang").rglob("*.py"))
        lines = sum(p.read_bytes().count(b"\n") for p in files)
        RAW.setdefault("trees", {})[folder.name] = {"files": len(files), "lines": lines,
                                                    "mb": round(sum(p.stat().st_size for p in files) / 1e6, 1)}
    return trees[0], sample, trees[1]


def versions() -> dict:
    def pip_version(python: str, package: str) -> str:
        code = f"import importlib.metadata as m; print(m.version({package!r}))"
        return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()

    return {"python": platform.python_version(), "libcst": pip_version(PY, "libcst"),
            "flake8": pip_version(PY, "flake8"), "flake8-bugbear": pip_version(str(VENVS / "flake8-bugbear" / "bin"
                                                                                  / "python"), "flake8-bugbear"),
            "torchfix": pip_version(str(VENVS / "torchfix" / "bin" / "python"), "torchfix"),
            "commit": subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                                     capture_output=True, text=True).stdout.strip(),
            "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


# the questions ---------------------------------------------------------------------------------
def lint(*args: str) -> list[str]:
    return [PY, "-m", "lints", "sglang", "-q", *args]


def peers_and_floors(tree: Path, sample: Path) -> dict:
    out = {}
    for where, folder in (("tree", tree), ("sample", sample)):
        out[f"{where}:ours"] = measure(f"{where}: lints -j2 --no-cache", lint("-j", "2", "--no-cache"), folder)
        out[f"{where}:every"] = measure(f"{where}: lints every rule", lint("-j", "2", "--no-cache", "--extend-select",
                                                                           "GM201"), folder)
        out[f"{where}:flake8"] = measure(f"{where}: flake8 E,F,W", [FLAKE8, "--select", "E,F,W", "--isolated", "-j",
                                                                    "2", "--exit-zero", "sglang"], folder)
        bugbear = [BUGBEAR, "--select", "B", "--isolated", "-j", "2", "--exit-zero", "sglang"]
        out[f"{where}:bugbear"] = measure(f"{where}: flake8 + bugbear (B)", bugbear, folder)
        out[f"{where}:torchfix"] = measure(f"{where}: torchfix -j2", [TORCHFIX, "-j", "2", "sglang"], folder,
                                           rounds=1 if where == "tree" else 3, timeout=TORCHFIX_CAP_S)
        floor = [PY, str(REPO / "bench" / "parse_floor.py"), "--jobs", "2", "sglang"]
        out[f"{where}:libcst"] = measure(f"{where}: libcst parse floor -j2", floor, folder)
        out[f"{where}:ast"] = measure(f"{where}: ast parse floor -j2", floor[:2] + ["--parser", "ast"] + floor[2:],
                                      folder)
    return out


def flake8_overhead(tree: Path, sample: Path) -> dict:
    out = {}
    for where, folder in (("sample", sample), ("tree", tree)):
        common = ["--isolated", "-j", "2", "--exit-zero", "sglang"]
        out[f"{where}:plain"] = measure(f"{where}: flake8 E,F,W (no plugin)", [FLAKE8, "--select", "E,F,W", *common],
                                        folder)
        out[f"{where}:cold"] = measure(f"{where}: flake8 E,F,W,GM cold", [FLAKE8_GM, "--select", "E,F,W,GM", *common],
                                       folder, env=lambda: {"GRADMODE_CACHE_DIR": str(fresh("flake8-cold"))})
        warm = fresh("flake8-warm")
        run([FLAKE8_GM, "--select", "E,F,W,GM", *common], folder, {"GRADMODE_CACHE_DIR": str(warm)})  # fills it
        out[f"{where}:warm"] = measure(f"{where}: flake8 E,F,W,GM warm", [FLAKE8_GM, "--select", "E,F,W,GM",
                                                                          *common], folder,
                                       env={"GRADMODE_CACHE_DIR": str(warm)})
    return out


def jobs_and_caches(tree: Path) -> dict:
    out: dict = {"j1": [], "j2": [], "warm": [], "touch": [], "edit": []}
    edited = tree / EDITED
    original = edited.read_bytes()
    for i in range(3):  # interleaved: -j 1 cold, -j 2 cold, then reruns of the -j 2 cache
        out["j1"].append(run(lint("-j", "1", "--cache-dir", str(fresh("j1"))), tree))
        cache = fresh("j2")
        out["j2"].append(run(lint("-j", "2", "--cache-dir", str(cache)), tree))
        out["warm"].append(run(lint("-j", "2", "--cache-dir", str(cache)), tree))
        os.utime(edited)
        out["touch"].append(run(lint("-j", "2", "--cache-dir", str(cache)), tree))
        edited.write_bytes(original + b"# one more line\n")
        out["edit"].append(run(lint("-j", "2", "--cache-dir", str(cache)), tree))
        edited.write_bytes(original)
        print("  round", i + 1, {k: v[-1]["wall"] for k, v in out.items()}, flush=True)
    RAW["runs"]["jobs_and_caches"] = out
    return {k: {"wall": statistics.median(r["wall"] for r in v), "runs": [r["wall"] for r in v],
                "rss_mib": max(r["rss_mib"] for r in v)} for k, v in out.items()}


def big_tree_memory(big: Path) -> dict:
    return {f"j{jobs}": measure(f"{BIG_TREE}: lints -j{jobs} cold", lint("-j", jobs, "--cache-dir",
                                                                          str(BASE / "caches" / "big")), big,
                                rounds=1, prepare=lambda: fresh("big")) for jobs in ("1", "2")}


def big_file_rows(sizes=(1, 2, 5)) -> list[dict]:
    rows = []
    for size in sizes:
        folder = BASE / f"big-{size}mb"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "pyproject.toml").write_text("[tool.gradmode]\n")
        path = folder / "engine_big.py"
        path.write_text(big_files.generate(size * 10**6))
        mb = path.stat().st_size / 1e6
        result = measure(f"big file {size} MB -j1 --no-cache",
                         [PY, "-m", "lints", path.name, "-q", "-j", "1", "--no-cache", "--max-file-size",
                          str(10**8)], folder)
        rows.append({"mb": round(mb, 2), "lines": path.read_bytes().count(b"\n"), **result,
                     "s_per_mb": round(result["wall"] / mb, 2), "mib_per_mb": round(result["rss_mib"] / mb)})
    return rows


# report ----------------------------------------------------------------------------------------
def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def report(v: dict, peers: dict, f8: dict, jc: dict, big: dict, files: list[dict]) -> None:
    trees = RAW["trees"]
    t, s, b = trees[TREE], trees["sample150"], trees[BIG_TREE]
    print(f"\nDate {v['date']}, {v['cores']} cores, commit {v['commit']}; CPython {v['python']}, libcst "
          f"{v['libcst']}, flake8 {v['flake8']}, flake8-bugbear {v['flake8-bugbear']}, TorchFix {v['torchfix']}.")
    print(f"Tree: {TREE}, {t['files']} files, {t['lines']:,} lines, {t['mb']} MB; sample: {s['files']} files, "
          f"{s['mb']} MB; big tree: {BIG_TREE}, {b['files']} files, {b['lines']:,} lines.\n")
    print("| against (same files, -j 2) | tree: their s | ours / theirs | sample: their s | ours / theirs |")
    print("| --- | --- | --- | --- | --- |")
    for key, label in (("torchfix", "TorchFix"), ("bugbear", "flake8 + bugbear (`--select B`)"),
                       ("flake8", "flake8 (`--select E,F,W`)"), ("libcst", "libcst parse floor"),
                       ("ast", "`ast` parse floor")):
        cells = []
        for where in ("tree", "sample"):
            theirs = peers[f"{where}:{key}"]
            bound = ">" if theirs["timed_out"] else ""
            ours = peers[f"{where}:ours"]["wall"]
            cells += [f"{bound}{theirs['wall']:.2f}", ("<" if bound else "") + ratio(ours, theirs["wall"])]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (("ours", "ours, default rules"), ("every", "ours, every rule (GM201 on)")):
        cells = [f"{peers[f'{where}:{key}']['wall']:.2f} | "
                 f"{ratio(peers[f'{where}:{key}']['wall'], peers[f'{where}:libcst']['wall'])} of the libcst floor"
                 for where in ("tree", "sample")]
        print(f"| **{label}** | " + " | ".join(cells) + " |")
    print("\n| flake8 `-j 2` | E,F,W s | E,F,W,GM cold s | warm s | cold ratio | warm ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for where in ("sample", "tree"):
        plain, cold, warm = (f8[f"{where}:{k}"]["wall"] for k in ("plain", "cold", "warm"))
        print(f"| {where} | {plain:.2f} | {cold:.2f} | {warm:.2f} | {ratio(cold, plain)} | {ratio(warm, plain)} |")
    print("\n| run (cache on) | median s | runs | / cold -j 2 | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- |")
    cold = jc["j2"]["wall"]
    for key, label in (("j1", "cold, `-j 1`"), ("j2", "cold, `-j 2`"), ("warm", "rerun, nothing changed"),
                       ("touch", "rerun after `touch` of one file"), ("edit", "rerun after a one-line edit")):
        print(f"| {label} | {jc[key]['wall']:.2f} | {', '.join(f'{w:.2f}' for w in jc[key]['runs'])} | "
              f"{ratio(jc[key]['wall'], cold)} | {jc[key]['rss_mib']} |")
    print(f"\n`-j 2` speed-up over `-j 1`: {ratio(jc['j1']['wall'], cold)}")
    print(f"\n{BIG_TREE} ({b['lines']:,} lines), cold: `-j 1` {big['j1']['wall']:.2f} s, peak RSS "
          f"{big['j1']['rss_mib']} MiB; `-j 2` {big['j2']['wall']:.2f} s, peak RSS {big['j2']['rss_mib']} MiB")
    print("\n| one module | lines | s (`-j 1`) | s/MB | peak RSS MiB | MiB per MB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in files:
        print(f"| {row['mb']} MB | {row['lines']:,} | {row['wall']:.2f} | {row['s_per_mb']} | {row['rss_mib']} | "
              f"{row['mib_per_mb']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="create the peers' venvs and stop")
    args = parser.parse_args()
    if args.setup:
        setup_peers()
        return 0
    missing = [p for p in (FLAKE8, BUGBEAR, TORCHFIX) if not os.path.exists(p)]
    if missing:
        raise SystemExit(f"bench: missing {missing}: run `python bench/targets.py --setup`")
    v = versions()
    RAW["versions"] = v
    tree, sample, big = prepare_trees()
    print(f"bench: {v}", flush=True)
    jc = jobs_and_caches(tree)
    peers = peers_and_floors(tree, sample)
    f8 = flake8_overhead(tree, sample)
    big_mem = big_tree_memory(big)
    files = big_file_rows()
    RAW.update(peers=peers, flake8=f8, jobs_and_caches=jc, big_tree=big_mem, big_files=files)
    (BENCH / "results").mkdir(parents=True, exist_ok=True)
    (BENCH / "results" / "targets.json").write_text(json.dumps(RAW, indent=1))
    report(v, peers, f8, jc, big_mem, files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
