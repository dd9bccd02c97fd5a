"""The floor for any libcst-based linter: read every ``*.py`` file once and ``libcst.parse_module`` it.

    python bench/parse_floor.py [--jobs N] PATH...

Walks folders like ``python -m lints`` does (no symlinked folders, the default
excludes), decodes like it (BOM / PEP 263 cookie), parses, and throws the tree
away. Prints one JSON line: files, bytes, parse errors, seconds.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import tokenize
from concurrent.futures import ProcessPoolExecutor

import libcst as cst

# Same as lints.config.DEFAULT_EXCLUDE (kept here so the floor does not import the linter).
EXCLUDE = {".git", ".hg", ".svn", ".tox", ".venv", "venv", "__pycache__", ".gradmode_cache", "node_modules"}


def discover(paths: list[str]) -> list[str]:
    files = []
    for given in paths:
        if os.path.isdir(given):
            for root, dirs, names in os.walk(given, followlinks=False):
                dirs[:] = sorted(d for d in dirs if d not in EXCLUDE)
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(".py"))
        else:
            files.append(given)
    return sorted(dict.fromkeys(files))


def read_and_parse(path: str) -> tuple[int, bool]:
    """(bytes read, parsed ok)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        cst.parse_module(raw.decode(encoding))
        return len(raw), True
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError, cst.ParserSyntaxError, RecursionError):
        return 0, False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    files = discover(args.paths)
    if args.jobs <= 1:
        results = [read_and_parse(f) for f in files]
    else:
        chunk = max(1, min(64, len(files) // (args.jobs * 8)))
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(read_and_parse, files, chunksize=chunk))
    seconds = time.perf_counter() - start
    print(json.dumps({"files": len(files), "bytes": sum(n for n, _ in results),
                      "errors": sum(1 for _, ok in results if not ok), "seconds": round(seconds, 3),
                      "jobs": args.jobs, "libcst": cst.__version__ if hasattr(cst, "__version__") else "?"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
