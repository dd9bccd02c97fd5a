"""pre-commit's case: a commit that edits a few files of a big project, the caches warm.

    python bench/precommit_case.py                        # sglang-0.5.23, 5 files, 3 rounds
    python bench/precommit_case.py --files 5 --rounds 5 --before COMMIT

Copies the corpus project (``bench/corpus.py``; with its marker) into a temporary folder, fills the
caches with one untimed run of each command, then, each round, appends a new module-level line
(``_precommit_edit_N = N``: a change the summaries see) to the same ``--files`` files spread over the tree,
and times on those files, in turn:

- ``cli``: ``python -m lints FILES -q`` (this checkout, its cache folder warm);
- ``flake8+GM``: ``flake8 --isolated --select E,F,W,GM FILES`` in this venv (the plugin installed; its
  cache warm);
- ``flake8 E,F,W``: ``flake8 --isolated --select E,F,W FILES`` in this venv (the plugin installed, not selected);
- ``bare flake8``: ``flake8 --isolated --select E,F,W FILES`` in a venv with flake8 alone
  (``.bench/venvs/flake8-bare``, made with pip on the first run).

With ``--before COMMIT``, ``cli`` and ``flake8+GM`` also run with ``lints/`` of that commit (``git archive``) on
PYTHONPATH, in the same rounds; its flake8 is one whose plugins are that commit's entry points
(``.bench/venvs/flake8-at-SHA``, made with pip on the first run), or with ``--before-flake8 this`` this venv's
(where the commit declares the same entry points: then both ratios are to the same ``flake8 E,F,W``, like for like;
a venv of its own lists fewer installed distributions). Each ratio is also given as the median of the rounds'
ratios (``paired``). Each command has a cache folder of its own
(shared, the CLI's run would leave flake8 nothing to do). Prints each command's median wall seconds and its
ratio to bare flake8 (issue 33's targets: the CLI at most 1.5x bare flake8; ``flake8+GM`` at most 1.3x
``flake8 E,F,W``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
from edit_reruns import snapshot  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BARE = REPO / ".bench" / "venvs" / "flake8-bare"


def bare_flake8() -> Path:
    executable = BARE / "bin" / "flake8"
    if not executable.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BARE)], check=True)
        subprocess.run([str(BARE / "bin" / "pip"), "install", "-q", "flake8>=7"], check=True)
    return executable


def flake8_at(commit: str) -> Path:
    """A flake8 whose plugins are the entry points ``commit`` declares (its ``lints/`` comes on PYTHONPATH): the
    checkout's own install may name an entry point that commit lacks, which flake8 then fails to load."""
    import tomllib

    sha = subprocess.run(["git", "rev-parse", commit], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    folder = REPO / ".bench" / "venvs" / f"flake8-at-{sha[:12]}"
    executable = folder / "bin" / "flake8"
    if not executable.exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(folder / "bin" / "pip"), "install", "-q", "flake8>=7", "pathspec>=0.12"], check=True)
        declared = tomllib.loads(subprocess.run(["git", "show", f"{sha}:pyproject.toml"], cwd=REPO, check=True,
                                                capture_output=True, text=True).stdout)
        points = declared["project"]["entry-points"]["flake8.extension"]
        site = next((folder / "lib").glob("python3*/site-packages"))
        info = site / "gradmode_lint_at_commit-0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gradmode-lint-at-commit\nVersion: 0\n")
        (info / "entry_points.txt").write_text("[flake8.extension]\n" + "".join(
            f"{name} = {target}\n" for name, target in points.items()))
    return executable


def timed(command: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1) or "Traceback" in proc.stderr or "critical error" in proc.stderr:
        raise SystemExit(f"{' '.join(command[:4])}...: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang-0.5.23", choices=sorted(corpus.CORPORA))
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=None, help="a commit whose lints/ runs beside this checkout's")
    parser.add_argument("--before-flake8", choices=("own", "this"), default="own",
                        help="the commit's flake8: a venv with its entry points (own), or this venv's (this)")
    args = parser.parse_args(argv)
    corpus.ensure(args.tree)
    package = corpus.CORPORA[args.tree][2]
    bare = bare_flake8()
    flake8 = Path(sys.executable).parent / "flake8"
    with tempfile.TemporaryDirectory(prefix="precommit-") as scratch:
        project = Path(scratch) / args.tree
        shutil.copytree(corpus.project_dir(args.tree), project, ignore=shutil.ignore_patterns(".gradmode_cache"))
        every = sorted((project / package).rglob("*.py"))
        step = max(1, len(every) // args.files)
        chosen = [str(p.relative_to(project)) for p in every[step // 2::step][:args.files]]
        env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
        tools = {"": REPO}
        if args.before:
            label = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=REPO, capture_output=True,
                                   text=True, check=True).stdout.strip()
            tools[f" ({label})"] = Path(scratch) / "before"
            snapshot(args.before, tools[f" ({label})"])
        commands = {}
        for suffix, tool in tools.items():
            tool_env = dict(env, PYTHONPATH=str(tool))
            caches = Path(scratch) / f"caches-{tool.name}"  # the CLI's and flake8's apart: each sees every edit
            commands[f"cli{suffix}"] = ([sys.executable, "-m", "lints", *chosen, "-q", "--cache-dir",
                                         str(caches / "cli")], tool_env)
            its_flake8 = flake8_at(args.before) if suffix and args.before_flake8 == "own" else flake8
            commands[f"flake8+GM{suffix}"] = ([str(its_flake8), "--isolated", "--select", "E,F,W,GM", *chosen],
                                              dict(tool_env, GRADMODE_CACHE_DIR=str(caches / "flake8")))
        commands["flake8 E,F,W"] = ([str(flake8), "--isolated", "--select", "E,F,W", *chosen],
                                    dict(env, PYTHONPATH=str(REPO)))
        commands["bare flake8"] = ([str(bare), "--isolated", "--select", "E,F,W", *chosen], env)
        for command, command_env in commands.values():  # caches filled, imports warm
            timed(command, project, command_env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_number in range(1, args.rounds + 1):
            for path in chosen:
                with open(project / path, "a", encoding="utf-8") as handle:
                    handle.write(f"_precommit_edit_{round_number} = {round_number}\n")
            for name, (command, command_env) in commands.items():
                times[name].append(timed(command, project, command_env))
        base = statistics.median(times["bare flake8"])
        print(f"{args.tree}: {len(chosen)} files edited each round ({', '.join(chosen)}), {args.rounds} rounds")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:<22} median {median:7.2f} s  ({', '.join(f'{v:.2f}' for v in values)})  "
                  f"{median / base:6.2f}x bare flake8")
        for suffix in tools:
            gm = statistics.median(times[f"flake8+GM{suffix}"]) / statistics.median(times["flake8 E,F,W"])
            paired = statistics.median(a / b for a, b in zip(times[f"flake8+GM{suffix}"], times["flake8 E,F,W"]))
            print(f"  flake8+GM{suffix} / flake8 E,F,W: {gm:.2f}x (paired {paired:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
