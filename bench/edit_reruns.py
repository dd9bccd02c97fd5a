"""The CLI's rerun after a one-line edit, against its cold run, for this checkout and a commit before.

    python bench/edit_reruns.py                                  # sglang-0.5.23, against HEAD~1, 3 rounds
    python bench/edit_reruns.py --before COMMIT --rounds 3 --file sglang/srt/model_executor/model_runner.py

Copies the corpus project (``bench/corpus.py``; with its marker) into a temporary folder and snapshots
``lints/`` of this checkout ("after") and of ``--before`` (``git archive``) on PYTHONPATH, each with a cache
folder of its own. Each round times, tool by tool in turn: a cold run (empty cache), then for each edit of
``--file`` a rerun after it (then the file is put back and the cache brought back by an untimed run):

- ``comment on top``: a comment line above the first line (every line below moves);
- ``blank line inside``: an empty line in the middle of the file (what is below it moves);
- ``comment at the end``: a comment line appended (nothing moves);
- ``new statement``: ``_edit = 1`` appended (a change the summaries see: a constant no other code names);
- ``new function``: a function appended that calls a method (a change of the project's facts);
- ``stdin, comment on top``: the file's text with a comment on top given on stdin (``--stdin-filename``),
  the file on disk as it was: an editor's unsaved buffer;
- ``stdin, absolute path``: the same, the file named by its absolute path, as editors name it;
- ``from its folder``: nothing edited, ``python -m lints FILE`` run in the file's folder (the root is spelt
  ``../../..`` there for the default file), then an untimed run from the root again.

Prints each run's median seconds and its share of the same tool's cold median, and checks that both tools
print the same findings after every edit. Run: ``python -m lints PACKAGE -q --format concise``.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def snapshot(commit: str | None, target: Path) -> None:
    """``lints/`` of ``commit`` (None: this working tree) at ``target/lints``."""
    target.mkdir(parents=True)
    if commit is None:
        shutil.copytree(REPO / "lints", target / "lints", ignore=shutil.ignore_patterns("__pycache__"))
        return
    archive = subprocess.run(["git", "archive", commit, "lints"], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")


EDITS = {
    "comment on top": lambda text: "# edited\n" + text,
    "blank line inside": lambda text: _middle(text),
    "comment at the end": lambda text: text + "# edited\n",
    "new statement": lambda text: text + "_edit = 1\n",
    "new function": lambda text: text + "\n\ndef _edit_helper(x):\n    return x.sum()\n",
}


def _middle(text: str) -> str:
    lines = text.splitlines(keepends=True)
    half = len(lines) // 2
    while half < len(lines) and lines[half].strip():  # after a blank line: never inside a bracket
        half += 1
    return "".join(lines[:half] + ["\n"] + lines[half:])


def run(tool: Path, cache: Path, project: Path, args: list[str], stdin: str | None = None) -> tuple[float, str]:
    # as installed: bytecode written once and reused (without it each run compiles the modules again)
    env = {k: v for k, v in os.environ.items() if k not in ("GRADMODE_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(tool)
    command = [sys.executable, "-m", "lints", *args, "-q", "--format", "concise", "--cache-dir", str(cache)]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, input=stdin)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{tool.name}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return seconds, proc.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang-0.5.23", choices=sorted(corpus.CORPORA))
    parser.add_argument("--before", default="HEAD~1")
    parser.add_argument("--file", default="sglang/srt/model_executor/model_runner.py")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    corpus.ensure(args.tree)
    package = corpus.CORPORA[args.tree][2]
    before = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="edit-reruns-") as scratch:
        scratch = Path(scratch)
        project = scratch / args.tree
        shutil.copytree(corpus.project_dir(args.tree), project, ignore=shutil.ignore_patterns(".gradmode_cache"))
        tools = {f"before ({before})": scratch / "before", "after": scratch / "after"}
        snapshot(args.before, tools[f"before ({before})"])
        snapshot(None, tools["after"])
        path = project / args.file
        original = path.read_text(encoding="utf-8")
        stdin_names = {"stdin, comment on top": args.file, "stdin, absolute path": str(project / args.file)}
        kinds = ["cold", *EDITS, *stdin_names, "from its folder"]
        times = {(name, kind): [] for name in tools for kind in kinds}
        mismatches = []
        for _ in range(args.rounds):
            for name, tool in tools.items():
                cache = scratch / f"cache-{tool.name}"
                shutil.rmtree(cache, ignore_errors=True)
                seconds, _ = run(tool, cache, project, [package])
                times[name, "cold"].append(seconds)
            outputs: dict[str, dict[str, str]] = {}
            for kind, edit in EDITS.items():
                for name, tool in tools.items():
                    cache = scratch / f"cache-{tool.name}"
                    path.write_text(edit(original), encoding="utf-8")
                    seconds, out = run(tool, cache, project, [package])
                    times[name, kind].append(seconds)
                    outputs.setdefault(kind, {})[name] = out
                    path.write_text(original, encoding="utf-8")
                    run(tool, cache, project, [package])  # the cache back to the file as it was
            for kind, stdin_name in stdin_names.items():
                for name, tool in tools.items():
                    cache = scratch / f"cache-{tool.name}"
                    seconds, out = run(tool, cache, project, ["--stdin-filename", stdin_name, "-"],
                                       stdin=EDITS["comment on top"](original))
                    times[name, kind].append(seconds)
                    outputs.setdefault(kind, {})[name] = out
            for name, tool in tools.items():
                cache = scratch / f"cache-{tool.name}"
                seconds, out = run(tool, cache, path.parent, [path.name])
                times[name, "from its folder"].append(seconds)
                outputs.setdefault("from its folder", {})[name] = out
                run(tool, cache, project, [package])  # the root's results back
            mismatches += [kind for kind, by_tool in outputs.items() if len(set(by_tool.values())) != 1]
        print(f"{args.tree}: {args.file} edited; {args.rounds} rounds; medians (runs)")
        print("| run | " + " | ".join(f"{name} s | / cold" for name in tools) + " |")
        print("| --- |" + " --- | --- |" * len(tools))
        for kind in kinds:
            cells = []
            for name in tools:
                values = times[name, kind]
                cold = statistics.median(times[name, "cold"])
                cells.append(f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)}) | "
                             f"{100 * statistics.median(values) / cold:.1f}%")
            print(f"| {kind} | " + " | ".join(cells) + " |")
        print("same findings from both tools after every edit:", "yes" if not mismatches else f"NO: {mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
