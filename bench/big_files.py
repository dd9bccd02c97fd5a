"""Big-file scaling: seconds and peak RSS of one linter run on one generated serving module.

    python bench/big_files.py [--sizes 0.5,1,2,5]

Each module repeats the sample engine (examples/engine/model_runner.py: a MoE layer with lazily
allocated workspaces and in-place updates, a model runner with an autotune context and a dummy run
under inference mode, a serving function) under fresh names until it reaches the size, so every block is analysed (nothing
is prefiltered away) and the findings grow with the size. Run in a temporary project, cold cache,
one process (`-j 1`).
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SAMPLE = os.path.join(ROOT, "examples", "engine", "model_runner.py")


def generate(size_bytes: int) -> str:
    """The sample engine's MoE layer, runner and serving function, repeated under fresh names."""
    with open(SAMPLE, encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("\nclass ")
    header, block = text[:start], text[start:]
    parts, total, i = [header], len(header), 0
    while total < size_bytes:
        part = (re.sub(r"\b(FlashInferFusedMoE|ModelRunner)\b", rf"\g<1>{i}", block)
                .replace("def serve(", f"def serve_{i}("))
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)


def measure(path: str, max_bytes: int) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("GRADMODE_CACHE_DIR", None)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "lints", path, "--no-cache", "-j", "1", "--format", "concise",
                             "--max-file-size", str(max_bytes)], cwd=os.path.dirname(path), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = time.perf_counter() - start
    return elapsed, usage.ru_maxrss, err.strip().splitlines()[-1] if err.strip() else ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="0.5,1,2,5", help="sizes in MB")
    args = parser.parse_args()
    print("| size | lines | seconds | s/MB | peak RSS (MiB) | summary line |")
    print("|---|---|---|---|---|---|")
    for size in (float(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            open(os.path.join(folder, "pyproject.toml"), "w").close()
            path = os.path.join(folder, "big_module.py")
            text = generate(int(size * 1024 * 1024))
            with open(path, "w") as handle:
                handle.write(text)
            # one child per size: RUSAGE_CHILDREN's peak is the largest so far, so run each in a fresh process
            elapsed, rss_kb, summary = _isolated(path, len(text) + 1)
            print(f"| {size} MB | {text.count(chr(10))} | {elapsed:.2f} | {elapsed / size:.2f} | "
                  f"{rss_kb / 1024:.0f} | {summary} |")
    return 0


def _isolated(path: str, max_bytes: int) -> tuple[float, int, str]:
    """Run ``measure`` in a fresh Python so the peak RSS is this run's alone."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import big_files; "
            f"r = big_files.measure({path!r}, {max_bytes}); print(repr(r))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
