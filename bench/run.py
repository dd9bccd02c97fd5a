"""Benchmark gradmode-lint on real trees nobody here wrote (issue 5).

    python bench/run.py --setup                 # once: throwaway venvs and trees under .bench/
    python bench/run.py --quick                 # every 8th file of each tree, ~30 min on 2 cores
    python bench/run.py --tree vllm             # a whole tree (vllm, sglang, transformers, flashinfer, torch)
    python bench/run.py --tree /some/path --repeat 3 --write

Side by side, same tree, same core count (--jobs, default all cores):
  * ``python -m lints`` vs TorchFix                      target: ours <= 0.5x TorchFix's wall time
  * flake8 + our plugin vs flake8 alone (and + bugbear)   target: our plugin adds <= 30%
  * ``python -m lints`` vs the floor: read + libcst.parse_module every file once (bench/parse_floor.py)
                                                          target: <= 1.2x the floor
  * a second run on the unchanged tree (cache)            target: <= 10% of the cold run
  * --jobs 1 vs --jobs N scaling, files/second
Times are wall-clock seconds, best of --repeat runs. Each tool runs as a subprocess
from an empty scratch folder (no project config is picked up). With --write the
table goes into bench/RESULTS.md between markers named after --label; hand-written
notes outside the markers are kept.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".bench"  # gitignored: venvs, downloads, unpacked trees, samples
VENVS = BENCH / "venvs"
PROJECT_PY = Path(sys.executable)  # the project's venv (has gradmode-lint and libcst installed)
RESULTS = REPO / "bench" / "RESULTS.md"

# Pinned so a rerun measures the same code. name -> (pip requirement, package folder inside the wheel)
TREES = {
    "vllm": ("vllm==0.34.0", "vllm"),
    "sglang": ("sglang==0.5.23", "sglang"),
    "transformers": ("transformers==5.25.0", "transformers"),
    "flashinfer": ("flashinfer-python==0.7.2.post1", "flashinfer"),
}
FLAKE8 = "flake8==7.5.0"
TOOL_VENVS = {  # venv -> pip install arguments. TorchFix does not need torch; --no-deps keeps any torch out.
    "flake8": [FLAKE8],
    "flake8-bugbear": [FLAKE8, "flake8-bugbear==26.10.27"],
    "flake8-gm": [FLAKE8, "libcst==1.9.0", "--no-deps", "-e", str(REPO)],
    "torchfix": ["--no-deps", "torchfix==0.7.0", "libcst>=1.5,<1.6", "PyYAML", FLAKE8, "pyflakes", "pycodestyle",
                 "mccabe"],
}
# Every flake8 run uses flake8's default selection (no --select): E, F, W, C90 and each plugin's
# default codes. GM201 is opt-in (default-ignored), as in `python -m lints`.


def setup_commands() -> list[str]:
    q = shlex.quote
    cmds = []
    for name, pkgs in TOOL_VENVS.items():
        venv = VENVS / name
        pip = f"{q(str(venv / 'bin' / 'pip'))} install -q"
        if "--no-deps" in pkgs:
            i = pkgs.index("--no-deps")
            deps, nodeps = pkgs[:i], pkgs[i + 1:]
            install = (f"{pip} {' '.join(q(p) for p in deps)} && " if deps else "") + \
                f"{pip} --no-deps {' '.join(q(p) for p in nodeps)}"
        else:
            install = f"{pip} {' '.join(q(p) for p in pkgs)}"
        cmds.append(f"python3 -m venv {q(str(venv))} && {install}")
    dl = BENCH / "dl"
    for name, (req, _) in TREES.items():
        tree = BENCH / "trees" / name
        cmds.append(f"{sys.executable} -m pip download -q --no-deps -d {q(str(dl))} {q(req)} && "
                    f"rm -rf {q(str(tree))} && mkdir -p {q(str(tree))} && "
                    f"{sys.executable} -m zipfile -e \"$(ls {q(str(dl))}/{req.split('==')[0].replace('-', '_')}-"
                    f"{req.split('==')[1]}-*.whl | head -1)\" {q(str(tree))}")
    return cmds


def missing_setup() -> list[str]:
    missing = [f"venv {n}" for n in TOOL_VENVS if not (VENVS / n / "bin" / "python").exists()]
    missing += [f"tree {n}" for n, (_, pkg) in TREES.items() if not (BENCH / "trees" / n / pkg).is_dir()]
    return missing


def tree_path(spec: str) -> tuple[str, Path]:
    if spec == "torch":
        out = subprocess.run([str(PROJECT_PY), "-c", "import importlib.util as u; "
                              "print(u.find_spec('torch').submodule_search_locations[0])"],
                             capture_output=True, text=True, check=True)
        return "torch", Path(out.stdout.strip())
    if spec in TREES:
        return spec, BENCH / "trees" / spec / TREES[spec][1]
    path = Path(spec).resolve()
    if not path.is_dir():
        raise SystemExit(f"bench: --tree {spec}: not a folder nor one of {', '.join(['torch', *TREES])}")
    return path.name, path


def py_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in {"__pycache__", ".git"})
        out.extend(Path(dirpath, n) for n in sorted(names) if n.endswith(".py"))
    return sorted(out)


MARKER = "# Written by bench/run.py: makes this folder the project root; default settings.\n[tool.gradmode]\n"


def sample(name: str, root: Path, every: int) -> Path:
    """Every ``every``-th file of ``root`` (sorted), copied with its layout to
    ``.bench/samples/<name>-every<every>/<root name>/`` next to a marker ``pyproject.toml``.

    The linter analyses the whole project around the given paths (its root is the nearest folder
    with a pyproject.toml or .git): a tree inside this repository (the downloaded trees, the venv's
    torch) would otherwise be linted as part of this repository, so such a tree is always copied,
    also for ``every`` = 1. A tree elsewhere is used in place for ``every`` = 1.
    """
    inside = REPO in root.resolve().parents
    if every <= 1 and not inside:
        return root
    every = max(1, every)
    dest = BENCH / "samples" / f"{name}-every{every}"
    files = py_files(root)[::every]
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text() == str(len(files)):
        return dest / root.name
    shutil.rmtree(dest, ignore_errors=True)
    for path in files:
        target = dest / root.name / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    (dest / "pyproject.toml").write_text(MARKER)
    stamp.write_text(str(len(files)))
    return dest / root.name


class Runner:
    def __init__(self, repeat: int, scratch: Path, verbose: bool) -> None:
        self.repeat = repeat
        self.scratch = scratch
        self.verbose = verbose
        self.commands: list[str] = []

    def time(self, label: str, argv: list[str], repeat: Optional[int] = None, ok=(0, 1), prepare=None) -> dict:
        """Best wall time of ``repeat`` runs (``prepare()`` before each, untimed)."""
        shown = " ".join(shlex.quote(str(a)) for a in argv)
        self.commands.append(f"{label}: {shown}")
        best = None
        for _ in range(repeat or self.repeat):
            if prepare:
                prepare()
            out_path = self.scratch / "stdout.txt"
            with open(out_path, "wb") as out:
                start = time.perf_counter()
                proc = subprocess.run([str(a) for a in argv], cwd=self.scratch, stdout=out, stderr=subprocess.PIPE,
                                      env=_env())
                wall = time.perf_counter() - start
            stderr = proc.stderr.decode("utf-8", "replace")
            if proc.returncode not in ok:
                raise SystemExit(f"bench: {label} failed with exit {proc.returncode}:\n{shown}\n{stderr[-3000:]}")
            lines = out_path.read_bytes().count(b"\n")
            result = {"wall": wall, "rc": proc.returncode, "stdout_lines": lines, "stderr": stderr,
                      "stdout": out_path.read_text("utf-8", "replace")[-20000:]}
            if best is None or wall < best["wall"]:
                best = result
        if self.verbose:
            print(f"  {label:<34} {best['wall']:8.2f} s   (exit {best['rc']}, {best['stdout_lines']} lines)",
                  flush=True)
        return best


def _env() -> dict:
    env = dict(os.environ)
    for key in ("GRADMODE_CACHE_DIR", "PYTHONPATH", "FLAKE8_CONFIG"):
        env.pop(key, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def bench_tree(name: str, root: Path, args: argparse.Namespace, runner: Runner) -> dict:
    jobs = str(args.jobs)
    files = py_files(root)
    size = sum(p.stat().st_size for p in files)
    print(f"\n== {name}: {root} ({len(files)} files, {size / 1e6:.1f} MB) ==", flush=True)
    r: dict = {"name": name, "root": str(root), "files": len(files), "mb": size / 1e6}
    lint = [PROJECT_PY, "-m", "lints", root, "--no-cache"]
    floor = [PROJECT_PY, REPO / "bench" / "parse_floor.py", root]

    r["floor_1"] = runner.time("parse floor --jobs 1", floor + ["--jobs", "1"], ok=(0,))
    r["floor_n"] = runner.time(f"parse floor --jobs {jobs}", floor + ["--jobs", jobs], ok=(0,))
    r["floor_info"] = json.loads(r["floor_n"]["stdout"].strip().splitlines()[-1])
    r["ours_1"] = runner.time("gradmode-lint --jobs 1", lint + ["--jobs", "1"], ok=(0, 1, 2))
    r["ours_n"] = runner.time(f"gradmode-lint --jobs {jobs}", lint + ["--jobs", jobs], ok=(0, 1, 2))
    m = re.search(r"(\d+) finding\(s\) in (\d+) file\(s\)(?:.*?(\d+) file\(s\) could not)?", r["ours_n"]["stderr"])
    r["findings"], r["ours_files"], r["ours_errors"] = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) \
        if m else (None, None, None)
    if not args.skip_opt_in:
        r["ours_all"] = runner.time(f"gradmode-lint --select GM -j {jobs}", lint + ["--jobs", jobs, "--select", "GM"],
                                    repeat=1, ok=(0, 1, 2))
    cache = runner.scratch / "cache"
    cached = [PROJECT_PY, "-m", "lints", root, "--cache-dir", cache, "--jobs", jobs]
    r["cache_cold"] = runner.time("gradmode-lint cold cache", cached, ok=(0, 1, 2),
                                  prepare=lambda: shutil.rmtree(cache, ignore_errors=True))
    r["cache_warm"] = runner.time("gradmode-lint warm cache (2nd run)", cached, ok=(0, 1, 2))
    if not args.skip_torchfix:
        r["torchfix"] = runner.time(f"TorchFix -j {jobs}", [VENVS / "torchfix" / "bin" / "torchfix", "-j", jobs, root],
                                    repeat=1, ok=(0, 1))
        m = re.search(r"Finished checking (\d+) files", r["torchfix"]["stderr"] + r["torchfix"]["stdout"])
        r["torchfix_files"] = int(m.group(1)) if m else None
    for venv in ("flake8", "flake8-gm", "flake8-bugbear"):
        r[venv] = runner.time(f"{venv} -j {jobs}", [VENVS / venv / "bin" / "flake8", "--isolated", "-j", jobs,
                                                    "--exit-zero", root], ok=(0,))
    return r


def ratio_rows(r: dict, jobs: int) -> list[tuple[str, str, str, str]]:
    """(what, value, target, verdict)."""
    rows = []

    def verdict(value: float, limit: float) -> str:
        return "met" if value <= limit else "**missed**"

    w = {k: v["wall"] for k, v in r.items() if isinstance(v, dict) and "wall" in v}
    if "torchfix" in w:
        x = w["ours_n"] / w["torchfix"]
        rows.append((f"gradmode-lint / TorchFix (-j {jobs})", f"{x:.3f}x", "<= 0.5x", verdict(x, 0.5)))
    x = w["flake8-gm"] / w["flake8"]
    rows.append((f"flake8+GM / flake8 alone (-j {jobs})", f"{x:.2f}x (+{(x - 1) * 100:.0f}%)", "<= 1.30x",
                 verdict(x, 1.30)))
    x = w["flake8-bugbear"] / w["flake8"]
    rows.append(("flake8+bugbear / flake8 alone (for scale)", f"{x:.2f}x (+{(x - 1) * 100:.0f}%)", "-", "-"))
    x = w["ours_1"] / w["floor_1"]
    rows.append(("gradmode-lint / parse floor (--jobs 1)", f"{x:.2f}x", "<= 1.2x", verdict(x, 1.2)))
    x = w["ours_n"] / w["floor_n"]
    rows.append((f"gradmode-lint / parse floor (--jobs {jobs})", f"{x:.2f}x", "<= 1.2x", verdict(x, 1.2)))
    if "ours_all" in w:
        x = w["ours_all"] / w["floor_n"]
        rows.append((f"gradmode-lint --select GM (+GM201) / parse floor (-j {jobs})", f"{x:.2f}x", "<= 1.2x",
                     verdict(x, 1.2)))
    x = w["cache_warm"] / w["cache_cold"]
    rows.append(("warm cache / cold run", f"{x:.3f}x", "<= 0.10x", verdict(x, 0.10)))
    x = w["ours_1"] / w["ours_n"]
    rows.append((f"speed-up --jobs {jobs} over --jobs 1", f"{x:.2f}x", "-", "-"))
    return rows


def time_rows(r: dict, jobs: int) -> list[tuple[str, str, str]]:
    files = r["files"]
    out = []
    labels = [
        ("floor_1", "parse floor, --jobs 1"), ("floor_n", f"parse floor, --jobs {jobs}"),
        ("ours_1", "gradmode-lint --no-cache --jobs 1"), ("ours_n", f"gradmode-lint --no-cache --jobs {jobs}"),
        ("ours_all", f"gradmode-lint --no-cache --select GM (opt-in GM201 too) --jobs {jobs}"),
        ("cache_cold", f"gradmode-lint, cold cache, --jobs {jobs}"),
        ("cache_warm", f"gradmode-lint, warm cache (2nd run), --jobs {jobs}"),
        ("torchfix", f"TorchFix -j {jobs}"),
        ("flake8", f"flake8 -j {jobs}"), ("flake8-gm", f"flake8 + gradmode-lint plugin -j {jobs}"),
        ("flake8-bugbear", f"flake8 + flake8-bugbear -j {jobs}"),
    ]
    for key, label in labels:
        if key in r:
            wall = r[key]["wall"]
            out.append((label, f"{wall:.2f}", f"{files / wall:.0f}"))
    return out


def table(headers: tuple[str, ...], rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def versions() -> dict:
    def out(argv: list) -> str:
        try:
            return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError as exc:
            return f"? ({exc})"

    meta = "import importlib.metadata as m, sys; print(' '.join(f'{p}=={m.version(p)}' for p in sys.argv[1:]))"
    return {
        "python": platform.python_version(),
        "gradmode-lint venv": out([PROJECT_PY, "-c", meta, "gradmode-lint", "libcst"]),
        "torchfix venv": out([VENVS / "torchfix" / "bin" / "python", "-c", meta, "torchfix", "libcst"]),
        "flake8": out([VENVS / "flake8" / "bin" / "flake8", "--version"]).replace("\n", " "),
        "flake8-gm": out([VENVS / "flake8-gm" / "bin" / "flake8", "--version"]).replace("\n", " "),
        "flake8-bugbear": out([VENVS / "flake8-bugbear" / "bin" / "flake8", "--version"]).replace("\n", " "),
        "git": out(["git", "-C", REPO, "describe", "--always", "--dirty"]),
    }


def machine() -> str:
    cpu = "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = "?"
    try:
        kb = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{cores} cores ({cpu}), {mem} RAM, {platform.system()} {platform.release()}"


def render(results: list[dict], args: argparse.Namespace, argv: list[str], started: str, load: tuple,
           commands: list[str]) -> str:
    v = versions()
    parts = [
        f"Command: `python bench/run.py {' '.join(shlex.quote(a) for a in argv)}`  ",
        f"Run: {started}, machine: {machine()}, --jobs {args.jobs}, best of {args.repeat} "
        f"(TorchFix and --select GM: 1 run)  ",
        f"Load average before / after: {load[0]} / {load[1]}  ",
        "Versions: " + "; ".join(f"{k}: {val}" for k, val in v.items()),
        "",
    ]
    for r in results:
        findings = f"{r.get('findings')} finding(s)" + (f", {r['ours_errors']} file(s) with errors"
                                                        if r.get("ours_errors") else "")
        tf = f"; TorchFix checked {r['torchfix_files']} of them" if r.get("torchfix_files") is not None else ""
        parts += [
            f"#### {r['name']}: {r['files']} files, {r['mb']:.1f} MB (`{os.path.relpath(r['root'], REPO)}`); "
            f"gradmode-lint: {findings}{tf}",
            "",
            table(("ratio", "value", "target", "verdict"), ratio_rows(r, args.jobs)),
            "",
            table(("run", "wall s", "files/s"), time_rows(r, args.jobs)),
            "",
        ]
    parts += ["<details><summary>exact commands (cwd: an empty scratch folder)</summary>", "", "```"]
    parts += commands + ["```", "", "</details>"]
    return "\n".join(parts)


def write_section(label: str, body: str) -> None:
    begin, end = f"<!-- run.py:{label}:begin -->", f"<!-- run.py:{label}:end -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + f"\n\n### {label}\n\n{block}\n"
    RESULTS.write_text(text)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help="create the venvs and download/unpack the trees")
    parser.add_argument("--print-setup", action="store_true", help="print the setup commands and exit")
    parser.add_argument("--tree", action="append", help="torch, vllm, sglang, transformers, flashinfer or a folder "
                        "(repeatable; default: all five)")
    parser.add_argument("--quick", action="store_true", help="every 8th file of each tree")
    parser.add_argument("--sample", type=int, default=None, help="keep every Nth file (default 1, 8 with --quick)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeat", type=int, default=3, help="best of N for the cheaper runs (default 3; "
                        "TorchFix and --select GM always run once)")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument("--skip-no-prefilter", action="store_true", help=argparse.SUPPRESS)  # option gone
    parser.add_argument("--skip-opt-in", action="store_true", help="skip the run with opt-in GM201 selected")
    parser.add_argument("--write", action="store_true", help="write the tables into bench/RESULTS.md")
    parser.add_argument("--label", default=None, help="section of RESULTS.md to (re)write (default from the options)")
    args = parser.parse_args(argv)
    args.sample = args.sample or (8 if args.quick else 1)
    if args.print_setup:
        print("\n".join(setup_commands()))
        return 0
    if args.setup:
        for cmd in setup_commands():
            print(f"$ {cmd}", flush=True)
            subprocess.run(cmd, shell=True, check=True)
    trees = args.tree or ["torch", *TREES]
    missing = [m for m in missing_setup() if m.startswith("venv") or m.split()[1] in trees]
    if missing:
        print(f"bench: not set up ({', '.join(missing)}). Run `python bench/run.py --setup`, or by hand:",
              file=sys.stderr)
        print("\n".join(setup_commands()), file=sys.stderr)
        return 2
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results = []
    with tempfile.TemporaryDirectory(prefix="gm-bench-") as scratch:
        runner = Runner(args.repeat, Path(scratch), verbose=True)
        for spec in trees:
            name, root = tree_path(spec)
            root = sample(name, root, args.sample)
            label = name if args.sample <= 1 else f"{name} (every {args.sample}th file)"
            results.append(bench_tree(label, root, args, runner))
            print(table(("ratio", "value", "target", "verdict"), ratio_rows(results[-1], args.jobs)), flush=True)
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
        body = render(results, args, argv, started, (load_before, load_after), runner.commands)
    print("\n" + body)
    if args.write:
        label = args.label or ("quick" if args.quick else "full: " + ", ".join(r["name"] for r in results))
        write_section(label, body)
        print(f"\nwritten to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
