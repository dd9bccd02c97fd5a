"""Issue 12 targets in one run on sglang 0.5.15: flake8 overhead, floors, TorchFix, caches, --jobs.

    python bench/issue12_targets.py            # needs bench/corpus.py sglang-0.5.15 and the venvs
                                               # .bench/venvs/flake8 and .bench/venvs/torchfix
                                               # (python bench/run.py --print-setup)

Each command runs in a scratch copy of the corpus project folder (``.bench/i12/sglang-0.5.15/``,
marker pyproject.toml with an empty ``[tool.gradmode]``) on the relative path ``sglang``; the
150-file sample is every 17th file (first 150) copied to ``.bench/i12/sample150/sglang`` next to
the same marker. The linter under test is a snapshot of ``lints/`` in ``.bench/i12/snap`` (on
PYTHONPATH), so edits to the working tree during the run do not change it. The flake8 baseline
is ``.bench/venvs/flake8`` (flake8 7.5.0 alone: flake8 runs every installed plugin whatever
``--select`` says, so the baseline needs an install without ours); the GM runs use the project
venv's flake8 (same 7.5.0, same pyflakes / pycodestyle) with the plugin. A run under ~60 s is
repeated 3 times (median), a longer one runs once. Raw figures: ``.bench/results/issue12.json``.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".bench"
BASE = BENCH / "i12"
CORPUS = BENCH / "corpus" / "sglang-0.5.15"
PY = str(REPO / ".venv" / "bin" / "python")
FLAKE8_GM = str(REPO / ".venv" / "bin" / "flake8")
FLAKE8 = str(BENCH / "venvs" / "flake8" / "bin" / "flake8")
TORCHFIX = str(BENCH / "venvs" / "torchfix" / "bin" / "torchfix")
MARKER = "# issue 12 bench: project root, default settings.\n[tool.gradmode]\n"
RESULTS: dict = {"runs": {}, "commands": {}}
OUT = BENCH / "results" / "issue12.json"


def save() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(RESULTS, indent=1))


def rel(p) -> str:
    s = str(p)
    return os.path.relpath(s, REPO) if s.startswith(str(REPO)) else s


def run_once(argv: list[str], cwd: Path, env_extra: dict | None = None, timeout: float | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONPATH", "FLAKE8_CONFIG")}
    env["PYTHONPATH"] = str(BASE / "snap")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(env_extra or {})
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:  # a lower bound: the run was stopped unfinished
        return {"wall": round(time.perf_counter() - start, 3), "rc": None, "timed_out": True, "out_lines": 0,
                "err_tail": ["(stopped after the timeout, unfinished)"], "out_tail": []}
    wall = time.perf_counter() - start
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench: {argv} exited {proc.returncode}\n{err[-3000:]}")
    return {"wall": round(wall, 3), "rc": proc.returncode, "out_lines": out.count("\n"),
            "err_tail": err.strip().splitlines()[-2:], "out_tail": out.strip().splitlines()[-1:]}


def measure(key: str, argv: list[str], cwd: Path, prepare=None, env=None, max_runs: int = 3,
            long_s: float = 60.0, timeout: float | None = None) -> float:
    """Median wall of up to ``max_runs`` runs (1 run if the first takes >= ``long_s``)."""
    shown = " ".join(rel(a) for a in argv)
    if env:
        shown = " ".join(f"{k}={rel(v)}" for k, v in env(0).items()) + " " + shown
    RESULTS["commands"][key] = f"(cwd {rel(cwd)}) {shown}"
    runs = []
    for i in range(max_runs):
        if prepare:
            prepare(i)
        r = run_once(argv, cwd, env(i) if env else None, timeout)
        runs.append(r)
        print(f"  {key:<28} run {i + 1}: {r['wall']:7.2f} s  rc {r['rc']}  out {r['out_lines']} lines  "
              f"{' | '.join(r['err_tail'])[:160]}", flush=True)
        if r["wall"] >= long_s:
            break
    RESULTS["runs"][key] = runs
    save()
    return statistics.median(r["wall"] for r in runs)


def setup() -> tuple[Path, Path]:
    shutil.rmtree(BASE / "snap", ignore_errors=True)
    shutil.copytree(REPO / "lints", BASE / "snap" / "lints", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([PY, "-m", "compileall", "-q", str(BASE / "snap" / "lints")], check=True)
    proj = BASE / "sglang-0.5.15"
    shutil.rmtree(proj, ignore_errors=True)
    shutil.copytree(CORPUS, proj, ignore=shutil.ignore_patterns(".gradmode_cache", ".complete"))
    files = sorted(p for p in (proj / "sglang").rglob("*.py"))
    sample = BASE / "sample150"
    shutil.rmtree(sample, ignore_errors=True)
    for p in files[::17][:150]:
        t = sample / p.relative_to(proj)
        t.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, t)
    (sample / "pyproject.toml").write_text(MARKER)
    RESULTS["tree"] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    sfiles = list((sample / "sglang").rglob("*.py"))
    RESULTS["sample"] = {"files": len(sfiles), "bytes": sum(p.stat().st_size for p in sfiles)}
    return proj, sample


def fresh(name: str) -> Path:
    d = BASE / "caches" / name
    shutil.rmtree(d, ignore_errors=True)
    return d


def flake8_block(tag: str, cwd: Path) -> None:
    common = ["--isolated", "-j", "2", "--exit-zero", "sglang"]
    measure(f"{tag}:flake8 E,F,W", [FLAKE8, "--select", "E,F,W", *common], cwd)
    measure(f"{tag}:flake8 E,F,W,GM cold", [FLAKE8_GM, "--select", "E,F,W,GM", *common], cwd,
            env=lambda i: {"GRADMODE_CACHE_DIR": str(fresh(f"{tag}-f8-cold-{i}"))})
    warm = BASE / "caches" / f"{tag}-f8-warm"
    shutil.rmtree(warm, ignore_errors=True)
    run_once([FLAKE8_GM, "--select", "E,F,W,GM", *common], cwd, {"GRADMODE_CACHE_DIR": str(warm)})  # fill
    measure(f"{tag}:flake8 E,F,W,GM warm", [FLAKE8_GM, "--select", "E,F,W,GM", *common], cwd,
            env=lambda i: {"GRADMODE_CACHE_DIR": str(warm)})


def main() -> int:
    RESULTS["date"] = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    RESULTS["uptime_before"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    RESULTS["git"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
    RESULTS["lints_diff"] = subprocess.run(["git", "-C", str(REPO), "status", "--short", "--", "lints"],
                                           capture_output=True, text=True).stdout.strip()
    proj, sample = setup()
    print(f"bench: tree {RESULTS['tree']}, sample {RESULTS['sample']}, git {RESULTS['git']}", flush=True)
    save()
    # 1a. flake8 on the sample
    flake8_block("sample", sample)
    # 1b. flake8 on the whole tree
    flake8_block("tree", proj)
    lint = [PY, "-m", "lints", "sglang"]
    # 2. lints vs floors
    measure("lints default --no-cache -j2", lint + ["-j", "2", "--no-cache"], proj)
    measure("lints every-rule --no-cache -j2", lint + ["-j", "2", "--no-cache", "--extend-select", "GM201"], proj)
    floor = [PY, str(REPO / "bench" / "parse_floor.py")]
    measure("libcst floor -j2", floor + ["--jobs", "2", "sglang"], proj, max_runs=2, long_s=1e9)
    measure("libcst floor -j1 every4 scaled", floor + ["--every", "4", "sglang"], proj, max_runs=1)
    measure("ast floor -j2", floor + ["--parser", "ast", "--jobs", "2", "sglang"], proj)
    measure("ast floor -j1", floor + ["--parser", "ast", "sglang"], proj)
    # 3. TorchFix
    # On 2026-12-03 TorchFix had not finished after 653 s and was stopped; cap it (a lower bound).
    measure("torchfix -j2", [TORCHFIX, "-j", "2", "sglang"], proj, max_runs=2, long_s=120, timeout=600)
    # 4. cache: cold / warm / touch, and 5. -j 1 cold
    edit = proj / "sglang" / "srt" / "model_executor" / "model_runner.py"
    cache = BASE / "caches" / "lints-j2"
    cached = lint + ["-j", "2", "--cache-dir", str(cache)]
    cold, warm, touch = [], [], []
    for i in range(3):
        shutil.rmtree(cache, ignore_errors=True)
        cold.append(measure(f"lints cold -j2 r{i}", cached, proj, max_runs=1))
        warm.append(measure(f"lints warm -j2 r{i}", cached, proj, max_runs=1))
        os.utime(edit)
        touch.append(measure(f"lints touch -j2 r{i}", cached, proj, max_runs=1))
    RESULTS["cache_medians"] = {"cold": statistics.median(cold), "warm": statistics.median(warm),
                                "touch": statistics.median(touch)}
    measure("lints cold -j1", lint + ["-j", "1", "--cache-dir", str(BASE / "caches" / "lints-j1")], proj,
            prepare=lambda i: fresh("lints-j1"), max_runs=3, long_s=1e9)
    RESULTS["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    save()
    print(json.dumps({k: statistics.median(r["wall"] for r in v) for k, v in RESULTS["runs"].items()}, indent=1))
    print(RESULTS["uptime_before"], "\n", RESULTS["uptime_after"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
