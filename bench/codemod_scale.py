"""The codemod against the linter on one big generated module: time and peak RSS at a few sizes.

    python bench/codemod_scale.py [--classes 2000 8000 18000] [--base CHECKOUT] [--rounds 1]

Each size is a one-file project (`a.py`, written here: no upstream code) of N small classes, each
with a `warmup` method entering `torch.inference_mode()` on a warm path: one GM101 and one safe fix
per class (18,000 classes make a 5 MB module). For each size, in fresh processes with no cache and
one job: `python -m lints` and `python -m lints.codemod` (writing; the file is put back after each
run). Printed: wall seconds, CPU seconds (user + system: steadier than wall on a loaded machine) and
peak RSS (the largest process, from `wait4`) of each, the codemod's over the linter's, and the
growth from one size to the next. With ``--base`` (e.g. a `git worktree` of
another commit) the codemod also runs on that checkout, interleaved.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def generated_module(classes: int) -> str:
    """A module of ``classes`` small classes, each warming its model up under inference mode (one fix each)."""
    parts = ["import torch\n\n"]
    for i in range(classes):
        parts.append(f"class Runner{i}:\n"
                     f"    \"\"\"Runner {i}: warms its model up once.\"\"\"\n\n"
                     f"    def __init__(self, model):\n"
                     f"        self.model = model\n"
                     f"        self.steps = {i}\n\n"
                     f"    def warmup(self, x):\n"
                     f"        with torch.inference_mode():\n"
                     f"            y = self.model(x)\n"
                     f"            return y + self.steps\n\n\n")
    return "".join(parts)


def measured(checkout: Path, folder: Path, module: str, text: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of ``python -m MODULE a.py`` run from ``checkout`` on
    ``text``."""
    path = folder / "a.py"
    path.write_text(text)
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("GRADMODE_CACHE_DIR", None)
    args = [sys.executable, "-m", module, "-q", "--no-cache", "-j", "1", "--max-file-size", str(64 << 20), "a.py"]
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak, not this process's
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    error = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{module} failed in {checkout}: {error[-2000:]}")
    if module == "lints.codemod" and "inference_mode" in path.read_text():
        raise SystemExit(f"{module} in {checkout} left a fix undone: {error[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--base", type=Path, default=None, help="another checkout to run the codemod from")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each command; the best time is kept")
    options = parser.parse_args()
    checkouts = [("this", HERE)] + ([("base", options.base.resolve())] if options.base is not None else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pyproject.toml").write_text("[tool.gradmode]\n")
        for classes in options.classes:
            text = generated_module(classes)
            row = {"classes": classes, "MB": len(text) / 1e6}
            for name, module, checkout in [("lint", "lints", HERE)] + [
                    (f"fix {label}", "lints.codemod", path) for label, path in checkouts]:
                runs = [measured(checkout, folder, module, text) for _ in range(options.rounds)]
                row[name] = (min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs))
                print(f"{classes} classes ({row['MB']:.1f} MB): {name}: {row[name][0]:.1f} s, "
                      f"CPU {row[name][1]:.1f} s, {row[name][2]:.0f} MiB", file=sys.stderr, flush=True)
            rows.append(row)
    names = [name for name in rows[0] if name not in ("classes", "MB")]
    print("| classes | MB | " + " | ".join(f"{n} s | {n} CPU s | {n} MiB" for n in names)
          + " | fix/lint CPU | fix/lint MiB |")
    print("| --- " * (2 + 3 * len(names) + 2) + "|")
    for row in rows:
        cells = [f"{row[n][0]:.1f} | {row[n][1]:.1f} | {row[n][2]:.0f}" for n in names]
        print(f"| {row['classes']} | {row['MB']:.2f} | " + " | ".join(cells)
              + f" | {row['fix this'][1] / row['lint'][1]:.2f}x | {row['fix this'][2] / row['lint'][2]:.2f}x |")
    for before, after in zip(rows, rows[1:]):
        growth = after["classes"] / before["classes"]
        print(f"{before['classes']} -> {after['classes']} classes ({growth:.2f}x): " + ", ".join(
            f"{n} CPU {after[n][1] / before[n][1]:.2f}x, RSS {after[n][2] / before[n][2]:.2f}x" for n in names))


if __name__ == "__main__":
    main()
