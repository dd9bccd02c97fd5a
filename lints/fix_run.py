"""A run of fixes over the paths given (``gradmode-fix``, ``gradmode-lint --fix`` and ``--diff``): each
project linted, the files with fixes fixed in workers, what is left linted again and reported."""
from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Iterable, Sequence

from .command_line import (EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, configs_for_paths, errors_of, internal_error,
                           tolerant_output)
from .engine import ProjectRun, lint_project
from .file_fixes import FixOptions, FixOutcome, fix_file
from .fix_inputs import file_identity, first_path_per_file, names_imported_across, run_to_fix_from
from .fixer import REFUSED_WHY
from .globs import within
from .model import Finding
from .options import ConfigError, default_cache_dir
from .output import render_text
from .progress import Progress
from .signal_exit import SignalExit, signals_exit_cleanly
from .walk import walks_shared
from .warn import quiet_warnings
from .workers import default_jobs, run_jobs


def run_fixes(args: argparse.Namespace, tool: str) -> int:
    """Fix the files under ``args.paths`` as ``args`` says (the options of ``lints.codemod``'s parser, the
    shared ones of ``command_line.add_config_options`` among them); the exit status. ``tool`` signs the
    lines it prints (``gradmode-lint --fix`` runs it as its own)."""
    tolerant_output()
    # a fix rewrites files but creates or removes none: one walk of each folder serves the whole run
    with signals_exit_cleanly(), walks_shared():
        try:
            return _run(args, tool)
        except Exception:  # noqa: BLE001 - files already written are whole (write_file); the rest stay as they were
            return internal_error(tool)
        except SignalExit as exc:
            # the workers are stopped and the temp file removed; skip the interpreter's exit hooks, which
            # would try to wake the stopped pool's threads and print a traceback
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.code)


def _run(args: argparse.Namespace, tool: str) -> int:
    previous = quiet_warnings(args.quiet)
    try:
        return _run_quietly_or_not(args, tool)
    finally:
        quiet_warnings(previous)


def _run_quietly_or_not(args: argparse.Namespace, tool: str) -> int:
    args.paths = args.paths or ["."]  # as ruff and flake8: the current folder
    try:
        groups, config_errors = configs_for_paths(args, list(args.paths))
    except ConfigError as exc:
        for each in errors_of(exc):
            print(f"{tool}: error: {each}", file=sys.stderr)
        return EXIT_ERROR
    jobs = args.jobs if args.jobs and args.jobs > 0 else default_jobs()

    def lint_all(progress=None, runs=None):
        """Each project with its own config; the whole project decides what is a finding (``runs``: gets the runs)."""
        runs = runs if runs is not None else []
        runs.extend(lint_project(members, config, jobs, cache_dir=args.cache_dir or default_cache_dir(),
                                 use_cache=not args.no_cache, max_bytes=args.max_file_size,
                                 progress=progress) for config, members in groups)
        return ([f for r in runs for f in r.findings], [f for r in runs for f in r.files],
                [e for r in runs for e in r.errors])

    runs = []
    lint_all(Progress(f"{tool}: reading"), runs)
    # the caches are the checkout's: what they say does not choose what is written
    runs = [run_to_fix_from(run, config, functools.partial(
        lint_project, members, config, jobs, use_cache=False, max_bytes=args.max_file_size), jobs, args.max_file_size)
        for run, (config, members) in zip(runs, groups)]
    found, files = [f for r in runs for f in r.findings], [f for r in runs for f in r.files]
    errors = config_errors + [e for r in runs for e in r.errors]
    by_path: dict[str, list[Finding]] = {}
    for finding in found:
        by_path.setdefault(finding.path, []).append(finding)
    broken = {e.path for e in errors}
    files, by_path = _one_path_per_file([f for f in files if f not in broken], by_path)
    imported = names_imported_across([(run, config) for run, (config, _) in zip(runs, groups)], jobs,
                                     args.max_file_size) if any(f.fixes for f in found) else None
    options = FixOptions(groups[0][0], args.style, args.unsafe_fixes, write=not (args.check or args.diff),
                         diff=args.diff, max_bytes=args.max_file_size, findings=by_path, imported=imported)
    # a file without findings has nothing to fix: it is not read again (handing each file of a large
    # tree to the workers, with the options, took 6 s on sglang 0.5.15)
    to_fix = [f for f in files if by_path.get(f)]
    outside = _linked_out_of_the_project(to_fix, runs, args.paths)
    to_fix = [f for f in to_fix if f not in outside]
    del runs  # their analyses: the fixes, and the lint after them, take the memory instead
    progress = Progress(f"{tool}: fixing")
    progress.start(len(to_fix))
    try:
        outcomes = run_jobs(functools.partial(fix_file, options=options), to_fix, jobs, progress.advance,
                            on_crash=_crashed)
    finally:
        progress.close()
    outcomes = [FixOutcome(path, remaining=tuple(by_path[path]), error=why) for path, why in outside.items()] + outcomes
    remaining = sorted(f for o in outcomes for f in o.remaining)
    changed = [o for o in outcomes if o.changed]
    if changed and options.write:  # what is left, on the whole project as it is now
        remaining = lint_all()[0]
    for outcome in outcomes:
        if outcome.diff:
            sys.stdout.flush()  # the file's own bytes: not through the text layer's encoding
            sys.stdout.buffer.write(outcome.diff)
            sys.stdout.buffer.flush()
    if not args.quiet and remaining and not args.fix_only:
        # with --diff, stdout is the patch alone (for `git apply`): the findings left go beside it
        (sys.stderr if args.diff else sys.stdout).write(render_text(remaining))
    for outcome in outcomes if not args.quiet else ():  # the linter called them fixable: say why not
        for f in outcome.refused:
            # named by its message: the lines above it may have moved with the other fixes
            print(f"{f.path}: {f.code} {f.message}: not fixed: {REFUSED_WHY}", file=sys.stderr)
    failures = [str(e) for e in errors] + [f"{o.path}: error: {o.error}" for o in outcomes if o.error]
    for line in failures:
        print(line, file=sys.stderr)
    if not args.quiet:
        verb = "would change" if not options.write else "changed"
        print(f"{tool}: {len(files)} file(s) scanned, {len(changed)} {verb}, "
              f"{len(failures)} skipped with errors, {len(remaining)} finding(s) left", file=sys.stderr)
    if failures:
        return EXIT_ERROR
    if not options.write and changed:  # --check / --diff: the findings are still in the files
        return EXIT_FINDINGS
    return EXIT_FINDINGS if remaining and not args.fix_only else EXIT_CLEAN


def _one_path_per_file(files: list[str], by_path: dict[str, list[Finding]]
                       ) -> tuple[list[str], dict[str, list[Finding]]]:
    """Each file once (``first_path_per_file``), with the findings of all its paths (one text: the
    same positions)."""
    first = first_path_per_file(files)
    merged: dict[str, list[Finding]] = {}
    for path in dict.fromkeys(files):
        merged.setdefault(first[file_identity(path)], []).extend(by_path.get(path, ()))
    return list(first.values()), merged


def _linked_out_of_the_project(paths: Iterable[str], runs: Sequence[ProjectRun], given: Sequence[str]
                               ) -> dict[str, str]:
    """path -> why it is not fixed, for each of ``paths`` that a walk found and that is a file outside its
    project (a symbolic link there, or in a folder on the way): a checkout can link a file of its to any
    file its user may write. A file named on the command line is the user's to fix, wherever it is."""
    named = {file_identity(path) for path in given if not os.path.isdir(path)}
    root_of = {path: run.root for run in runs for path in run.files}
    out = {}
    for path in paths:
        real = os.path.realpath(path)
        if (path in root_of and not within(real, os.path.realpath(root_of[path]))
                and file_identity(path) not in named):
            out[path] = (f"reached through a symbolic link, the file is {real}, outside the project: not written "
                         f"(name it on the command line to fix it)")
    return out


def _crashed(path: str, why: str) -> FixOutcome:
    return FixOutcome(path, error=f"internal error: {why}; file left unchanged")
