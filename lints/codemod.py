"""``python -m lints.codemod``: rewrite what the GM1xx rules report.

Exit status: 0 nothing left to report; 1 findings remain after fixing (or, with
``--check``, a file would change); 2 usage error or a file that could not be
read, parsed or written (it is left byte-identical).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import functools
import os
import sys
import warnings
from typing import Optional, Sequence

import libcst as cst

from .cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, add_config_options, config_from_args
from .config import Config, ConfigError
from .engine import FileError, SourceFile, analyze_text, read_source, to_findings
from .files import atomic_write, default_jobs, discover, is_read_only, run_jobs
from .fixer import STYLES, fix_source
from .model import Finding
from .output import render_text


@dataclasses.dataclass(frozen=True)
class FixOptions:
    config: Config
    style: str = "remove"
    unsafe_fixes: bool = False
    write: bool = True
    diff: bool = False
    max_bytes: int = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class FixOutcome:
    path: str
    changed: bool = False
    diff: str = ""
    remaining: tuple[Finding, ...] = ()
    error: Optional[str] = None


def fix_text(source: SourceFile, options: FixOptions) -> tuple[Optional[str], list[Finding], Optional[str]]:
    """(new text or None, findings left afterwards, error). Pure: writes nothing."""
    result = analyze_text(source.text, source.path, options.config)
    if isinstance(result, FileError):
        return None, [], result.message
    fixed = None
    if result.module is not None:
        fixed_module = fix_source(result.module, result.hits, options.style, options.unsafe_fixes)
        if fixed_module is not None and fixed_module.code != source.text:
            fixed = fixed_module.code
    if fixed is None:
        return None, to_findings(source.path, result.hits), None
    # Never hand back code that does not parse, whatever went wrong above.
    try:
        cst.parse_module(fixed)
        with warnings.catch_warnings():  # the user's own `\d` escapes are not our business here
            warnings.simplefilter("ignore")
            ast.parse(fixed, filename=source.path)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as exc:
        return None, [], f"internal error: the fix produced code that does not parse ({exc}); file left unchanged"
    after = analyze_text(fixed, source.path, options.config)
    remaining = [] if isinstance(after, FileError) else to_findings(source.path, after.hits)
    return fixed, remaining, None


def fix_file(path: str, options: FixOptions) -> FixOutcome:
    source = read_source(path, options.max_bytes)
    if isinstance(source, FileError):
        return FixOutcome(path, error=source.message)
    try:
        fixed, remaining, error = fix_text(source, options)
    except Exception as exc:  # one bad file must not stop the run
        return FixOutcome(path, error=f"internal error while fixing: {type(exc).__name__}: {exc}; file left unchanged")
    if error is not None:
        return FixOutcome(path, error=error)
    if fixed is None:
        return FixOutcome(path, remaining=tuple(remaining))
    diff = ""
    if options.diff:
        diff = "".join(difflib.unified_diff(source.text.splitlines(True), fixed.splitlines(True),
                                            fromfile=_diff_label("a", path), tofile=_diff_label("b", path)))
    if options.write:
        if is_read_only(path):
            return FixOutcome(path, diff=diff, remaining=tuple(remaining),
                              error="read-only file: fixes available but not written")
        try:
            data = fixed.encode(source.encoding)
        except (UnicodeEncodeError, LookupError) as exc:
            return FixOutcome(path, error=f"cannot encode the fix as {source.encoding}: {exc}; file left unchanged")
        try:
            atomic_write(path, data)
        except OSError as exc:
            return FixOutcome(path, error=f"cannot write: {exc.strerror or exc}; file left unchanged")
    return FixOutcome(path, changed=True, diff=diff, remaining=tuple(remaining))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lints.codemod",
        description="Rewrite GM1xx findings (inference_mode in warmup/autotune/capture paths). "
                    "GM2xx findings are reported, not rewritten.",
        epilog="Exit status: 0 nothing left to report, 1 findings remain (or --check: files would change), "
               "2 usage error or unreadable/unparsable/unwritable file (left unchanged).",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    parser.add_argument("--diff", action="store_true",
                        help="print a unified diff (writes nothing; exit 1 if any file would change)")
    parser.add_argument("--style", choices=STYLES, default="remove",
                        help="remove: drop the inference_mode wrapper (upstream fix); no_grad: use torch.no_grad()")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes marked unsafe")
    parser.add_argument("--quiet", "-q", action="store_true", help="no remaining findings or summary")
    add_config_options(parser)
    return parser


def _progress(total: int):
    if total < 20 or not sys.stderr.isatty():
        return None, None
    try:
        from tqdm import tqdm
    except ImportError:
        try:
            from rich.progress import Progress
        except ImportError:
            return None, None
        progress = Progress(transient=True)
        progress.start()
        task = progress.add_task("fixing", total=total)
        return (lambda n: progress.advance(task, n)), progress.stop
    bar = tqdm(total=total, unit="file", file=sys.stderr, leave=False)
    return bar.update, bar.close


def _diff_label(side: str, path) -> str:
    """git-style ``a/rel/path`` for relative paths; absolute paths are shown as they are."""
    return str(path) if os.path.isabs(path) else f"{side}/{path}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"gradmode-fix: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not args.paths:
        if not args.quiet:
            print("gradmode-fix: no files to fix", file=sys.stderr)
        return EXIT_CLEAN
    options = FixOptions(config, args.style, args.unsafe_fixes, write=not (args.check or args.diff),
                         diff=args.diff, max_bytes=args.max_file_size)
    files, errors = discover(args.paths, config.exclude)
    jobs = args.jobs if args.jobs and args.jobs > 0 else default_jobs()
    advance, close = _progress(len(files))
    try:
        outcomes = run_jobs(functools.partial(fix_file, options=options), files, jobs, advance)
    finally:
        if close:
            close()
    remaining = sorted(f for o in outcomes for f in o.remaining)
    changed = [o for o in outcomes if o.changed]
    for outcome in outcomes:
        if outcome.diff:
            sys.stdout.write(outcome.diff)
    if not args.quiet and remaining:
        sys.stdout.write(render_text(remaining))
    failures = [str(e) for e in errors] + [f"{o.path}: error: {o.error}" for o in outcomes if o.error]
    for line in failures:
        print(line, file=sys.stderr)
    if not args.quiet:
        verb = "would change" if not options.write else "changed"
        print(f"gradmode-fix: {len(files)} file(s) scanned, {len(changed)} {verb}, "
              f"{len(failures)} skipped with errors, {len(remaining)} finding(s) left", file=sys.stderr)
    if failures:
        return EXIT_ERROR
    if not options.write and changed:  # --check / --diff: the findings are still in the files
        return EXIT_FINDINGS
    return EXIT_FINDINGS if remaining else EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
