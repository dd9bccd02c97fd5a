"""Parse floors: read every ``*.py`` file once and parse it with libcst (default) or ``ast``.

    python bench/parse_floor.py [--jobs N] [--parser libcst|ast] [--every K] PATH...

Walks folders like ``python -m lints`` does (no symlinked folders, the default
excludes), decodes like it (BOM / PEP 263 cookie), parses, and throws the tree
away. ``--every K`` parses only every K-th file (sorted) and also prints the time
scaled by total bytes / parsed bytes. Prints one JSON line: files, bytes, parse
errors, seconds (inside the process, after imports).
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

import ast

cst = None  # libcst, imported only for the libcst floor (its import is not part of the ast floor)

# Same as lints.options.DEFAULT_EXCLUDE (kept here so the floor does not import the linter).
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


def read_and_parse(path: str, parser: str = "libcst") -> tuple[int, bool]:
    """(bytes read, parsed ok)."""
    errors = (OSError, SyntaxError, UnicodeDecodeError, LookupError, RecursionError, ValueError, MemoryError)
    if cst is not None:
        errors += (cst.ParserSyntaxError,)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
        if parser == "ast":
            ast.parse(text, path)
        else:
            cst.parse_module(text)
        return len(raw), True
    except errors:
        return 0, False


def _parse_ast(path: str) -> tuple[int, bool]:
    return read_and_parse(path, "ast")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    parser.add_argument("--parser", choices=("libcst", "ast"), default="libcst")
    parser.add_argument("--every", type=int, default=1, help="parse only every K-th file (default 1: all)")
    args = parser.parse_args(argv)
    if args.parser == "libcst":
        global cst
        import libcst as cst
    func = _parse_ast if args.parser == "ast" else read_and_parse
    start = time.perf_counter()
    all_files = discover(args.paths)
    files = all_files[::max(1, args.every)]
    if args.jobs <= 1:
        results = [func(f) for f in files]
    else:
        chunk = max(1, min(64, len(files) // (args.jobs * 8)))
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(func, files, chunksize=chunk))
    seconds = time.perf_counter() - start
    parsed = sum(n for n, _ in results)
    total = sum(os.path.getsize(f) for f in all_files)
    out = {"parser": args.parser, "files": len(files), "of_files": len(all_files), "bytes": parsed,
           "of_bytes": total, "errors": sum(1 for _, ok in results if not ok), "seconds": round(seconds, 3),
           "jobs": args.jobs}
    if args.every > 1:
        out["scaled_seconds"] = round(seconds * total / max(parsed, 1), 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
