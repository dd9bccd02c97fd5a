"""``python -m lints``: the standalone linter.

Exit status: 0 no findings, 1 findings, 2 usage error or a file that could not
be read, decoded or parsed (the other files are still linted and reported).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from . import __version__
from .command_line import (EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, EXIT_INTERRUPTED, add_config_options,
                           configs_for_paths, errors_of, internal_error, program_name, tolerant_output)
from .options import ConfigError, default_cache_dir
from .baseline import BaselineError, filter_baseline, write_baseline
from .model import FileError
from .noqa import add_noqa
from .progress import Progress
from .output import explain, render_github, render_json, render_sarif, render_statistics, render_text
from .sources import decode_source, read_source, source_from_text, source_lines, text_reader
from .walk import walks_shared
from .warn import quiet_warnings
from .workers import default_jobs
from .writes import is_read_only, write_file, write_new_file


def build_parser() -> argparse.ArgumentParser:
    prog = program_name("lints")
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Find grad-mode mismatches between warmup/autotune/CUDA-graph capture and serving. "
                    f"`{prog} explain GM101` explains a rule; `{prog} rules` lists them; `{prog} server` "
                    "starts the language server (LSP over stdio).",
        epilog="Exit status: 0 clean, 1 findings, 2 usage error or unreadable/unparsable file.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (folders: every *.py below)")
    parser.add_argument("--format", "--output-format", dest="format",  # --output-format: ruff's name for it
                        choices=("text", "concise", "json", "sarif", "github"), default="text",
                        help="text: each finding and its why-chain; concise: one line each; github: workflow "
                             "annotations")
    parser.add_argument("--statistics", action="store_true",
                        help="print the number of findings per code, in place of the findings")
    parser.add_argument("--stdin-filename", metavar="PATH",
                        help="with PATH `-`: the file name the text read from stdin stands for")
    parser.add_argument("--fix", action="store_true", help="apply the safe fixes (as gradmode-fix does)")
    parser.add_argument("--diff", action="store_true",
                        help="print the safe fixes as a unified diff and write nothing (exit 1 if a file would "
                             "change; the findings left are not reported)")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="with --fix or --diff: also the fixes marked unsafe")
    parser.add_argument("--add-noqa", action="store_true",
                        help="append `# noqa: CODE` to every line with a finding (adopting the tool on old code)")
    parser.add_argument("--baseline", type=Path, metavar="FILE",
                        help="report only the findings not recorded in FILE (see --write-baseline)")
    parser.add_argument("--write-baseline", type=Path, metavar="FILE",
                        help="record the current findings in FILE (JSON) and exit 0")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the text output (auto: on a terminal, unless NO_COLOR is set)")
    parser.add_argument("--output", "-o", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (errors still exit 2)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default .gradmode_cache (or $GRADMODE_CACHE_DIR)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")
    parser.add_argument("--version", action="version", version=f"gradmode-lint {__version__}")
    add_config_options(parser)
    return parser


def entry() -> NoReturn:
    """The console script and ``python -m lints``: ``main``, then the process ends without freeing
    what the run built (as mypy's ``hard_exit``): on sglang 0.5.15 that teardown took 0.27 s, as
    long as the rules. A closed stream (``None``) is left alone."""
    kept: list = []
    tolerant_output()
    try:
        status = main(retain=kept)
    except BrokenPipeError:
        status = _reader_left()
    except KeyboardInterrupt:  # Ctrl-C: a word, not a traceback, and the shell's status for it
        if sys.stderr is not None:
            print("gradmode-lint: interrupted", file=sys.stderr)
        status = EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 - a bug of ours must not read as "findings" (exit 1)
        status = internal_error("gradmode-lint")
    else:
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except BrokenPipeError:
            status = _reader_left()
        except (OSError, ValueError) as exc:  # a full disk behind `> report.txt`: the report is lost
            if sys.stderr is not None:
                print(f"gradmode-lint: error: cannot write the report: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)


def _fix(args: argparse.Namespace) -> int:
    """``--fix`` and ``--diff``: the codemod's run, given the shared options as parsed here; it reports what
    is left its own way, so options about the report are refused rather than dropped."""
    report_options = (("--format", args.format not in ("text", "concise")), ("--statistics", args.statistics),
                      ("--output", args.output), ("--baseline", args.baseline),
                      ("--write-baseline", args.write_baseline), ("--add-noqa", args.add_noqa),
                      ("-", "-" in args.paths), ("--stdin-filename", args.stdin_filename))
    refused = [flag for flag, given in report_options if given]
    if refused:
        mode = "--fix" if args.fix else "--diff"
        print(f"gradmode-lint: error: {mode} does not take {', '.join(refused)} (fix first, then lint)",
              file=sys.stderr)
        return EXIT_ERROR
    from .fix_run import run_fixes  # libcst: only for a run that fixes

    # the codemod's options, from the shared ones as parsed here and these two modes
    fix_args = argparse.Namespace(**vars(args))
    fix_args.style, fix_args.check = "remove", False
    fix_args.fix_only = args.diff  # as ruff's check --diff: the fixes only; exit 1 when a file would change
    status = run_fixes(fix_args, tool="gradmode-lint")  # its lines signed as this run's
    return EXIT_CLEAN if args.exit_zero and status == EXIT_FINDINGS else status


def _reader_left() -> int:
    """`python -m lints rules | head`: the reader left; not an error of ours."""
    if sys.stdout is not None:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1


def main(argv: Optional[Sequence[str]] = None, retain: Optional[list] = None) -> int:
    """Run the linter; ``retain`` collects the runs' results, which the caller frees (or not)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["explain"], ["rules"]):
        from .rules import ALL_RULES
    if argv[:1] == ["explain"]:
        return _explain(argv[1:])
    if argv[:1] == ["rules"]:
        for rule in ALL_RULES.values():
            state = "" if rule.DEFAULT_ENABLED else " (opt-in)"
            print(f"{rule.CODE}  {rule.SEVERITY:<7}  {rule.SUMMARY}{state}")
        return EXIT_CLEAN
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = quiet_warnings(args.quiet)
    try:
        return _lint(args, retain)
    finally:
        quiet_warnings(previous)


def _lint(args: argparse.Namespace, retain: Optional[list]) -> int:
    if args.fix or args.diff:
        return _fix(args)
    if args.unsafe_fixes:
        print("gradmode-lint: error: --unsafe-fixes is for --fix or --diff", file=sys.stderr)
        return EXIT_ERROR
    if args.statistics and args.format not in ("text", "concise"):  # its lines would break the document
        print(f"gradmode-lint: error: --statistics is for the text formats, not --format {args.format}",
              file=sys.stderr)
        return EXIT_ERROR
    if args.stdin_filename and not args.paths:
        args.paths = ["-"]  # as ruff: --stdin-filename alone reads the file from stdin
    if "-" in args.paths and len(args.paths) > 1:
        print("gradmode-lint: error: `-` (the file on stdin) must be the only path", file=sys.stderr)
        return EXIT_ERROR
    if args.stdin_filename and args.paths != ["-"]:
        print("gradmode-lint: error: --stdin-filename names the file read from stdin: give `-` or no path, "
              f"not {args.paths[0]}", file=sys.stderr)
        return EXIT_ERROR
    if not args.paths:
        args.paths = ["."]  # as ruff and flake8: the current folder
    jobs = args.jobs if args.jobs and args.jobs > 0 else default_jobs()
    from .engine import lint_project  # only now: `--version` and `rules` stay cheap

    paths, overrides = list(args.paths), None
    if paths == ["-"]:  # editors and pre-commit-style integrations send the buffer on stdin
        if not args.stdin_filename:
            print("gradmode-lint: error: `-` needs --stdin-filename PATH", file=sys.stderr)
            return EXIT_ERROR
        # bytes, decoded as a file would be (coding cookie, BOM), not with the terminal's encoding
        source = decode_source(args.stdin_filename, sys.stdin.buffer.read() if sys.stdin is not None else b"")
        if isinstance(source, FileError):
            print(source, file=sys.stderr)
            return EXIT_ERROR
        paths, overrides = [args.stdin_filename], {args.stdin_filename: source.text}
    if overrides and (args.add_noqa or args.write_baseline):
        print("gradmode-lint: error: --add-noqa and --write-baseline need files, not stdin", file=sys.stderr)
        return EXIT_ERROR
    with walks_shared():  # the folders given are walked once, not three times
        try:
            groups, errors = configs_for_paths(args, paths)
        except ConfigError as exc:
            for each in errors_of(exc):
                print(f"gradmode-lint: error: {each}", file=sys.stderr)
            return EXIT_ERROR
        findings, nfiles = [], 0
        run_configs: list[tuple] = []
        for config, members in groups:
            run = lint_project(members, config, jobs, cache_dir=args.cache_dir or default_cache_dir(),
                               use_cache=not args.no_cache, max_bytes=args.max_file_size, overrides=overrides,
                               progress=None if args.quiet else Progress("gradmode-lint: reading"))
            if retain is not None:
                retain.append(run)
            findings += [(f, config) for f in run.findings]
            run_configs.append((run, config))
            errors += run.errors
            nfiles += len(run.files)
    findings.sort(key=lambda pair: (pair[0].path, pair[0].line, pair[0].col, pair[0].code))  # across projects too
    configs = {id(f): config for f, config in findings}
    findings = [f for f, _ in findings]
    # a project the run found no file of (a folder holding only projects of their own) has no say
    projects = [(run.root, run.serving) for run, _ in run_configs if run.files] \
        or [(run.root, run.serving) for run, _ in run_configs[:1]]
    text_of = text_reader(overrides or {})
    if args.write_baseline:
        try:
            count = write_baseline(str(args.write_baseline), findings, text_of)
        except OSError as exc:
            print(f"gradmode-lint: error: cannot write baseline {args.write_baseline}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_ERROR
        for error in errors:
            print(error, file=sys.stderr)
        print(f"gradmode-lint: recorded {count} finding(s) in {args.write_baseline}", file=sys.stderr)
        return EXIT_ERROR if errors else EXIT_CLEAN
    hidden = 0
    if args.baseline:
        try:
            findings, hidden = filter_baseline(str(args.baseline), findings, text_of)
        except BaselineError as exc:
            print(f"gradmode-lint: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
    if args.add_noqa:
        return _add_noqa(findings, errors, args.quiet)
    if args.format == "json":
        details = _editor_details(findings, configs, run_configs, args.max_file_size, overrides or {})
        report = render_json(findings, errors, projects, details)
    elif args.format == "sarif":
        details = _editor_details(findings, configs, run_configs, args.max_file_size, overrides or {})
        report = render_sarif(findings, errors, projects, details)
    elif args.format == "github":
        report = render_github(findings, errors)
    else:
        report = render_text(findings, notes=args.format == "text", color=_use_color(args))
    if args.statistics:  # as ruff's: the counts in place of the findings
        report = render_statistics(findings)
    if args.output:
        try:  # whole or not at all; file names that are not UTF-8 go out as the file system gave them
            write_new_file(str(args.output), report.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            print(f"gradmode-lint: error: cannot write the report to {args.output}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_ERROR
    else:
        if sys.stdout is not None:  # None: started with stdout closed (`>&-`)
            sys.stdout.write(report)
    for error in errors:
        print(error, file=sys.stderr)
    if not args.quiet and not nfiles and not errors:
        # as ruff: a folder with nothing to lint is no failure, but a clean result over nothing must not pass unseen
        print("gradmode-lint: warning: no Python files found under the given path(s)", file=sys.stderr)
    if not args.quiet:
        for root, serving in projects:
            where = f" for {root}" if len(projects) > 1 else ""
            print(f"gradmode-lint: serving grad mode{where}: {serving.mode} ({serving.source}: {serving.evidence})",
                  file=sys.stderr)
        fixable = sum(1 for f in findings if f.fixable == "safe")
        print(f"gradmode-lint: {len(findings)} finding(s) in {nfiles} file(s)"
              + (f", {fixable} fixable with `{program_name('lints')} --fix`" if fixable else "")
              + (f"; {hidden} in the baseline not shown" if hidden else "")
              + (f"; {len(errors)} file(s) could not be checked" if errors else ""), file=sys.stderr)
    if errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if findings and not args.exit_zero else EXIT_CLEAN


def _add_noqa(findings, errors, quiet: bool) -> int:
    """ruff's --add-noqa: mark every finding where it is, so that only new code is held to the rules."""
    by_path: dict[str, dict[int, set[str]]] = {}
    for f in findings:
        by_path.setdefault(f.path, {}).setdefault(f.line, set()).add(f.code)
    added, failures = 0, [str(e) for e in errors]
    for path, codes_by_line in sorted(by_path.items()):
        source = read_source(path)
        if isinstance(source, FileError):
            failures.append(str(source))
            continue
        text, refused = add_noqa(source.text, codes_by_line)
        failures += [f"{path}:{line}: error: no `# noqa` can go on this line (where its statement ends is not "
                     f"known); mark it by hand" for line in refused]
        if text == source.text:
            continue
        if is_read_only(path):  # as the codemod: the owner asked for it to be left alone
            failures.append(f"{path}: error: read-only file: `# noqa` not added")
            continue
        try:
            write_file(path, text.encode(source.encoding), expected=source.raw)
        except (OSError, UnicodeEncodeError) as exc:
            failures.append(f"{path}: error: not written: {getattr(exc, 'strerror', None) or exc}")
            continue
        # lines that took a comment (findings on the lines of one statement share its last line's)
        added += sum(old != new for old, new in zip(source_lines(source.text), source_lines(text)))
    for line in failures:
        print(line, file=sys.stderr)
    if not quiet:
        print(f"gradmode-lint: added `# noqa` to {added} line(s)", file=sys.stderr)
    return EXIT_ERROR if failures else EXIT_CLEAN


def _editor_details(findings, configs: dict, run_configs: list[tuple], max_bytes: int,
                    overrides: dict[str, str]) -> dict:
    """(path, line, col) -> {"end": (line, col), "edits": [...]} for ``--format json``."""
    from .spans import end_positions

    imported = None
    if any(f.fixes for f in findings):
        from .fix_inputs import names_imported_across  # the analysis: only when there is a fix to describe

        imported = names_imported_across(run_configs, max_bytes=max_bytes)
    details: dict = {}
    by_path: dict[str, list] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    for path, in_file in by_path.items():
        source = source_from_text(path, overrides[path]) if path in overrides \
            else read_source(path, max_bytes)
        if isinstance(source, FileError):
            continue
        ends = end_positions(source.text, {(f.line, f.col) for f in in_file})
        parsed = None  # the file's libcst tree, parsed once for all its fixes
        for f in in_file:
            edits = []
            if f.fixes:
                from .editor_fixes import fix_edits  # libcst: only when there is a fix
                from .file_fixes import FixOptions, ParsedSource

                parsed = parsed or ParsedSource()

                edits = fix_edits(source, f, FixOptions(configs[id(f)], max_bytes=max_bytes, findings={},
                                                       imported=imported), parsed)
            details[(f.path, f.line, f.col)] = {"end": ends[(f.line, f.col)], "edits": edits}
    return details


def _use_color(args: argparse.Namespace) -> bool:
    if args.color != "auto":
        return args.color == "always"
    return (not os.environ.get("NO_COLOR") and not args.output and sys.stdout is not None
            and sys.stdout.isatty())


def _explain(codes: Sequence[str]) -> int:
    from .rules import ALL_RULES

    if not codes:
        print(f"usage: {program_name('lints')} explain CODE [CODE...]", file=sys.stderr)
        return EXIT_ERROR
    status = EXIT_CLEAN
    for code in codes:
        if code.upper() not in ALL_RULES:
            print(f"gradmode-lint: error: unknown rule {code!r} (known: {', '.join(ALL_RULES)})", file=sys.stderr)
            status = EXIT_ERROR
            continue
        print(explain(code.upper()))
    return status
