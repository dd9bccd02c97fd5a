"""What the command-line front ends share (``gradmode-lint``, ``gradmode-fix`` and ``gradmode-lint
--fix``): exit statuses, the options over ``[tool.gradmode]`` and the settings of each path given from
them, how the tool names itself, and how it fails."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Optional

from .model import FileError
from .options import (ENTRY_GRAD_MODES, SERVING_GRAD_MODES, Config, ConfigError, check_codes, find_pyproject,
                      load_config, split_codes)
from .project_roots import ProjectLocator, is_own_project, project_groups
from .sources import MAX_FILE_BYTES
from .walk import discover, stopping_points


EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
CONSOLE_SCRIPTS = ("gradmode-lint", "gradmode-fix")


def program_name(module: str) -> str:
    """How the user started the tool, for --help and the hints: the console script's name
    (`gradmode-lint`), else `python -m MODULE` (argparse's default would say `__main__.py`)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    name = name[:-4] if name.lower().endswith(".exe") else name  # pip's launchers on Windows
    return name if name in CONSOLE_SCRIPTS else f"python -m {module}"


def add_config_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Options shared by the linter and the codemod; they override [tool.gradmode]. Returns them."""
    actions: list[argparse.Action] = []

    def option(*flags: str, **kwargs: Any) -> None:
        actions.append(parser.add_argument(*flags, **kwargs))

    option("--config", type=Path, help="pyproject.toml to read [tool.gradmode] from, for every file "
           "(default: for each file, the nearest one above it that has it)")
    option("--select", action="append", metavar="CODES",
           help="only these codes or prefixes (GM1,GM202), in place of the configuration's select and ignore")
    option("--extend-select", action="append", metavar="CODES",
           help="add codes to the selection (e.g. the opt-in GM201)")
    option("--ignore", action="append", metavar="CODES",
           help="skip these codes or prefixes too (added to the configuration's ignore)")
    option("--serving-grad-mode", choices=SERVING_GRAD_MODES,
           help="grad mode serving runs under (default auto: inferred from the serving entry points)")
    option("--entry-grad-mode", choices=ENTRY_GRAD_MODES,
           help="grad mode a host calls the functions no project code calls under (default unknown)")
    option("--python", metavar="PATH",
           help="the environment whose installed libraries the project imports are analysed with it: an "
                "interpreter, a virtual environment or a site-packages folder; never run (default: this one)")
    option("--no-libraries", dest="libraries", action="store_false", default=None,
           help="analyse the project's own files only, not the installed libraries it imports")
    option("--serving-patterns", metavar="GLOBS", help="function-name globs of serving entry points")
    option("--path-patterns", metavar="GLOBS",
           help="comma-separated function-name globs that mark warmup/autotune/capture paths")
    option("--extend-path-patterns", metavar="GLOBS", help="added to the default path patterns")
    option("--class-patterns", metavar="GLOBS",
           help="class-name globs whose capture-pattern methods count as capture paths")
    option("--module-globs", metavar="GLOBS", help="file globs whose functions are all such paths")
    option("--exclude", metavar="GLOBS", help="file or folder globs to skip when walking folders")
    option("--force-exclude", action=argparse.BooleanOptionalAction, default=None,
           help="skip what exclude matches also among the paths given (for pre-commit, which names files)")
    option("--jobs", "-j", type=int, default=None, help="worker processes (default: all cores)")
    option("--max-file-size", type=int, default=MAX_FILE_BYTES, metavar="BYTES",
           help=f"skip larger files with an error (default {MAX_FILE_BYTES})")
    return actions


def _start_of(path: str) -> Path:
    start = Path(os.path.abspath(path))  # abspath: a symlink loop must not raise
    return start if start.is_dir() else start.parent


def config_from_args(args: argparse.Namespace, given: Optional[list[str]] = None) -> Config:
    """[tool.gradmode] of the nearest pyproject.toml above the (first) linted path (not the cwd:
    running from elsewhere gives the same result), then the command line over it."""
    if given is None:
        given = [p for p in getattr(args, "paths", []) if p != "-"]
    if not given or given == ["-"]:
        given = [args.stdin_filename] if getattr(args, "stdin_filename", None) else []
    base, _ = load_config(args.config, start=_start_of(given[0]) if given else None)

    def globs(value: Optional[str]) -> Optional[tuple[str, ...]]:
        return None if value is None else tuple(v.strip() for v in value.split(",") if v.strip())

    config = base.with_rule_selection(split_codes(args.select), split_codes(args.extend_select),
                                      split_codes(args.ignore)).replace(
        serving_grad_mode=args.serving_grad_mode,
        entry_grad_mode=args.entry_grad_mode,
        python=os.path.abspath(args.python) if getattr(args, "python", None) else None,
        libraries=getattr(args, "libraries", None),
        path_patterns=globs(args.path_patterns),
        class_patterns=globs(args.class_patterns),
        module_globs=globs(args.module_globs),
        serving_patterns=globs(getattr(args, "serving_patterns", None)),
        exclude=globs(args.exclude),
        force_exclude=args.force_exclude,
    )
    if args.extend_path_patterns:
        config = config.replace(path_patterns=config.path_patterns + globs(args.extend_path_patterns))
    check_codes((split_codes(args.select) or ()) + (split_codes(args.extend_select) or ())
                + (split_codes(args.ignore) or ()), "command line")
    return config


def configs_for_paths(args: argparse.Namespace, paths: list[str]
                      ) -> tuple[list[tuple[Config, list[str]]], list[FileError]]:
    """The paths grouped by project (``project_roots.project_groups``: each is analysed on its own), then by
    the nearest pyproject.toml with [tool.gradmode] above each (ruff's hierarchical config: every
    file gets its own project's settings, whatever the cwd; with ``--config``, that one for all),
    each group with its config and the command line over it. A folder given brings the projects
    with settings of their own below it (``project_roots.is_own_project``), which its walk leaves out,
    as projects of their own; one whose settings cannot be read is an error line, not the end of
    the run. Returns the groups and those errors."""
    if not paths:
        return [(config_from_args(args, []), [])], []
    nearest: dict[str, Optional[Path]] = {}
    configs: dict[Optional[Path], Config] = {}

    def config_of(path: str) -> Optional[Path]:
        """The file the config of ``path`` comes from (None: defaults, or ``--config`` for all)."""
        if args.config is not None:
            return None
        folder = str(_start_of(path))
        if folder not in nearest:
            nearest[folder] = find_pyproject(Path(folder))
        return nearest[folder]

    def config_for(path: str) -> Config:
        """``config_from_args`` of ``path``, once per config file."""
        source = config_of(path)
        if source not in configs:
            configs[source] = config_from_args(args, [path])
        return configs[source]

    errors: list[FileError] = []
    expanded: list[str] = []
    pending, walked = list(paths), set()
    while pending:
        path = pending.pop(0)
        expanded.append(path)
        if not os.path.isdir(path) or os.path.abspath(path) in walked:
            continue
        walked.add(os.path.abspath(path))
        try:
            config = config_for(path)
        except ConfigError:
            continue  # not walked: its files are unknown to its own exclude (an error line below)
        for inner in stopping_points(path, config.exclude, is_own_project, config.root):
            try:
                config_for(inner)
            except ConfigError as exc:
                # a broken config over no Python file is not ours to report
                if discover([inner], config.exclude, anchor=config.root)[0]:
                    errors.append(_config_error(os.path.normpath(os.path.join(inner, "pyproject.toml")), exc))
                continue
            pending.append(inner)

    out = []
    broken: list[tuple[str, ConfigError]] = []
    for project in project_groups(expanded, ProjectLocator()) if len(expanded) > 1 else [expanded]:
        groups: dict[Optional[Path], list[str]] = {}
        for path in project:
            try:
                groups.setdefault(config_of(path), []).append(path)
            except ConfigError as exc:
                broken.append((path, exc))
        for members in groups.values():
            try:
                out.append((config_for(members[0]), members))
            except ConfigError as exc:
                broken.extend((path, exc) for path in members)
    if broken and not out:  # nothing can be linted: each config's own error, once
        raise EveryConfigBroken(list({str(exc): exc for _, exc in broken}.values()))
    errors += [_config_error(path, exc) for path, exc in broken]
    once: dict[str, FileError] = {}  # folders given that overlap find the same broken config again
    for error in errors:
        once.setdefault(os.path.abspath(error.path), error)
    return out, list(once.values())


class EveryConfigBroken(ConfigError):
    """No path given can be linted: the error of each broken config (``errors``)."""

    def __init__(self, errors: list[ConfigError]) -> None:
        super().__init__(str(errors[0]))
        self.errors = errors


def errors_of(exc: ConfigError) -> list[ConfigError]:
    return exc.errors if isinstance(exc, EveryConfigBroken) else [exc]


def _config_error(path: str, exc: ConfigError) -> FileError:
    """``path`` cannot be linted: its config cannot be used (the rest of the run goes on)."""
    head, sep, why = str(exc).partition(": ")
    if sep and head.endswith("pyproject.toml"):
        if path.endswith("pyproject.toml"):
            return FileError(path, why)
        own = os.path.join(path, "pyproject.toml")  # a folder given, whose own config it is
        if os.path.isdir(path) and os.path.abspath(own) == os.path.abspath(head):
            return FileError(os.path.normpath(own), why)
    return FileError(path, f"config error: {exc}")


def tolerant_output() -> None:
    """A file name that is not UTF-8 reaches Python with lone surrogates: on a UTF-8 stdout it goes
    out as the bytes the file system gave (as ``ls`` prints it), elsewhere escaped, never a crash."""
    stream = sys.stdout
    if stream is None or not hasattr(stream, "reconfigure"):
        return
    utf8 = (stream.encoding or "").lower().replace("-", "").replace("_", "") == "utf8"
    try:
        stream.reconfigure(errors="surrogateescape" if utf8 else "backslashreplace")
    except (ValueError, OSError):
        pass


def internal_error(tool: str) -> int:
    """An exception no file explains: the traceback, one line that says so, and exit status 2."""
    import traceback

    if sys.stderr is not None:
        traceback.print_exc()
        print(f"{tool}: error: internal error (a bug in {tool}; the traceback above helps to report it)",
              file=sys.stderr)
    return EXIT_ERROR
