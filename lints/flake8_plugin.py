"""flake8 entry point (code prefix ``GM``): the same project analysis and findings as ``python -m lints``.

flake8 hands a plugin one file at a time; the analysis needs the whole project, so the first
file of each project root runs it (reading the same cached summaries as the CLI, refreshed when
file hashes change) and every file of that root takes its findings from the result. flake8 only
reads INI files, so ``[tool.gradmode]`` is read here from the nearest pyproject.toml above each
project root (as the CLI does: the cwd does not matter), ``exclude`` and ``per-file-ignores``
included; ``--gradmode-*`` options override it. flake8 applies ``# noqa`` and
``--select``/``--ignore`` itself. An opt-in rule (GM201) runs where the CLI's would: named in
``[tool.gradmode]`` or by flake8's ``--select``/``--extend-select`` with a prefix narrower than ``GM``
(``GM2``, ``GM201``), so ``flake8 --select GM`` gives the CLI's default findings. A broken config or
an unknown code in it is reported as GM001 on each file of that project.

With several flake8 workers, each would otherwise run the whole analysis on its own, one core
each. Instead the main process starts one analysis per project (a fork of it on Linux, else
``python -m lints.flake8_plugin``) as soon as the options are parsed, holding a lock on a file in the
cache folder, and the analysis writes its findings beside it. A worker's file checked before they
are written has them reported from its last logical line (entry point ``GM0``, ``report_deferred``),
so flake8's own checks of it run meanwhile; a later file waits for them.
"""
from __future__ import annotations

import ast
import os
from typing import Any, Callable, ClassVar, Iterator, NoReturn, Optional, Sequence, TypeVar

from . import __version__
from .model import FileError
from .options import ENTRY_GRAD_MODES, SERVING_GRAD_MODES, Config, ConfigError, default_cache_dir, load_config

T = TypeVar("T")


class _ConfigTrouble(dict):
    """A project whose config (found from ``config_start``) cannot be used: every file gets its one error."""

    def __init__(self, config_start: str, exc: ConfigError) -> None:
        super().__init__()
        self.error = FileError(config_start, f"config error: {exc}")

    def get(self, key, default=None):
        return [self.error]


class GradModeChecker:
    name = "gradmode-lint"
    version = __version__
    # what flake8's own options set over each project's [tool.gradmode]
    overrides: ClassVar[dict[str, Any]] = {}
    explicit_config: ClassVar[Optional[str]] = None
    enabled: ClassVar[bool] = True  # False where flake8's --select names no GM code
    _by_root: ClassVar[dict[str, dict[str, list]]] = {}
    # project key -> (the lock its background analysis holds, the file it writes its findings to, the
    # token that file must hold: written by this run's analysis, not an earlier one's, nor the checkout's, and
    # the read end of a pipe that becomes readable once they are written or the analysis is gone)
    _prefetching: ClassVar[dict[str, tuple[str, str, str, int]]] = {}
    _named: ClassVar[list[str]] = []  # the paths flake8 was given
    _groups: ClassVar[Optional[list[list[str]]]] = None  # ``_named`` by project, once needed
    _loose_folders: ClassVar[Optional[list[str]]] = None  # the folders named outside any project, once needed
    _locator: ClassVar[Any] = None  # an ``project_roots.ProjectLocator`` for the run
    _config_files: ClassVar[dict[str, str]] = {}  # project root -> its [tool.gradmode] file ("" for none)
    # project root -> its config, or the error reading it: read once per run (flake8's main process reads each project's
    # before it forks its workers, which then need not read it again)
    _configs: ClassVar[dict[str, Any]] = {}
    _stdin_name: ClassVar[Optional[str]] = None  # --stdin-display-name, when flake8 reads `-`

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines
        self.tree = tree

    @classmethod
    def add_options(cls, parser: Any) -> None:
        for flag, help_text in (
            ("--gradmode-path-patterns", "function-name globs that mark warmup/autotune paths"),
            ("--gradmode-extend-path-patterns", "globs added to the default path patterns"),
            ("--gradmode-class-patterns", "class-name globs whose capture-pattern methods are capture paths"),
            ("--gradmode-serving-patterns", "function-name globs of serving entry points"),
            ("--gradmode-module-globs", "file globs whose functions are all warm paths"),
        ):
            parser.add_option(flag, default=None, parse_from_config=True, comma_separated_list=True, help=help_text)
        parser.add_option("--gradmode-serving-grad-mode", default=None, parse_from_config=True,
                          choices=SERVING_GRAD_MODES, help="grad mode serving runs under (default auto: inferred)")
        parser.add_option("--gradmode-entry-grad-mode", default=None, parse_from_config=True,
                          choices=ENTRY_GRAD_MODES, help="grad mode the host calls uncalled functions under")
        parser.add_option("--gradmode-python", default=None, parse_from_config=True,
                          help="environment whose installed libraries are analysed with the project (default: this)")
        parser.add_option("--gradmode-no-libraries", default=None, action="store_true", parse_from_config=True,
                          help="analyse the project's own files only, not the installed libraries it imports")
        parser.add_option("--gradmode-config", default=None, parse_from_config=True,
                          help="pyproject.toml holding [tool.gradmode] (default: nearest one)")
        # No default ignore for the opt-in rules: flake8 lets an explicit `--select GM` beat it, and it
        # would hide what [tool.gradmode] turns on. The plugin runs them only as the CLI does (`parse_options`).

    @classmethod
    def parse_options(cls, options: Any) -> None:
        def listed(name: str) -> Optional[tuple[str, ...]]:
            value = getattr(options, name, None)
            return tuple(v for v in value if v) if value else None

        select = tuple(c for c in getattr(options, "select", None) or () if c)
        chosen = tuple(c for c in [*select, *(getattr(options, "extend_select", None) or ())] if c)
        # `--select E,F,W` leaves the plugin's codes out: flake8 still runs every installed plugin, and
        # this one then analyses nothing (pre-commit's flake8 hook with other codes pays no analysis)
        cls.enabled = not select or any(c.startswith("GM") or "GM".startswith(c) for c in chosen)
        # flake8's --select/--extend-select turn an opt-in rule on as the CLI's do: named by a prefix
        # narrower than `GM` (GM2, GM201), so `flake8 --select GM` gives the CLI's default findings
        opt_in: tuple[str, ...] = ()
        # the rules import the analysis (about 30 ms before flake8 starts its workers): only where a code narrower
        # than `GM` may name an opt-in rule
        if cls.enabled and any(c.startswith("GM") and len(c) > 2 for c in chosen):
            from .rules import OPT_IN_CODES

            naming = Config(extend_select=chosen)
            opt_in = tuple(code for code in sorted(OPT_IN_CODES) if naming.is_selected(code, default_enabled=False))
        cls.overrides = dict(
            path_patterns=listed("gradmode_path_patterns"),
            class_patterns=listed("gradmode_class_patterns"),
            serving_patterns=listed("gradmode_serving_patterns"),
            module_globs=listed("gradmode_module_globs"),
            serving_grad_mode=getattr(options, "gradmode_serving_grad_mode", None),
            entry_grad_mode=getattr(options, "gradmode_entry_grad_mode", None),
            python=os.path.abspath(options.gradmode_python) if getattr(options, "gradmode_python", None) else None,
            libraries=False if getattr(options, "gradmode_no_libraries", None) else None,
            extend_path_patterns=listed("gradmode_extend_path_patterns") or (),
            opt_in=opt_in,
        )
        cls.explicit_config = getattr(options, "gradmode_config", None)
        cls._by_root = {}
        for *_, ready in cls._prefetching.values():  # a run before this one in the process: its workers are done
            _close(ready)
        cls._prefetching = {}
        jobs = getattr(options, "jobs", None)
        parallel = jobs is not None and (getattr(jobs, "is_auto", False) or getattr(jobs, "n_jobs", 1) > 1)
        given = getattr(options, "filenames", None) or []
        cls._stdin_name = getattr(options, "stdin_display_name", None) if "-" in given else None
        prefetch = cls.enabled and parallel and os.cpu_count() and os.cpu_count() > 1
        if prefetch and not {"-", "stdin"} & set(given):
            _largest_first(given)
        filenames = [f for f in given if f not in ("-", "stdin")]
        cls._named = filenames
        cls._groups = cls._loose_folders = None
        cls._locator = None
        cls._config_files = {}
        cls._configs = {}
        if prefetch and filenames:
            cls._start_prefetch(filenames)

    @classmethod
    def _start_prefetch(cls, filenames: list[str]) -> None:
        """One analysis per project, in the background, before flake8 forks its workers."""
        try:
            import fcntl
        except ImportError:  # not POSIX (Windows): each worker analyses on its own, as before
            return
        import dataclasses
        import hashlib
        import json
        import subprocess
        import sys

        from .cache_folders import cache_folder, ignore_in_git

        # projects with a marker, and folders given outside any: what `_project_findings` analyses
        # whole (files outside those are grouped as the CLI groups them, and are few)
        analyses = {}
        for name in filenames:
            key, root, config_start, marked = cls._analysis_of(name)
            if marked or (not cls._located(name)[1] and os.path.isdir(name)):
                analyses.setdefault(key, (root, config_start))
        for key, (root, config_start) in sorted(analyses.items()):
            try:
                config = cls.config_for(config_start)
                # the project's own cache folder, never $GRADMODE_CACHE_DIR itself (the user's folder)
                folder = cache_folder(root, default_cache_dir())
                if folder is None:
                    continue  # no cache to fill: each worker analyses on its own
                folder.mkdir(parents=True, exist_ok=True)
                ignore_in_git(folder)  # the lock may be the first file there: `git status` must not show it
                # one lock per analysis (a root analysed under two configs has two), the same in every run
                digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
                lock = str(folder / f"flake8-prefetch-{digest}.lock")
                results = str(folder / f"flake8-prefetch-{digest}.json")
                fd = _open_lock(lock, os.O_RDWR | os.O_CREAT)
            except (ConfigError, OSError):
                continue  # the worker reports it, or analyses on its own
            ready = written = -1
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another flake8 on this project: not twice
                token = os.urandom(16).hex()
                spelt = cls._spelt(root)
                # the workers, forked later, inherit the read end; only the analysis keeps the write end
                ready, written = os.pipe()
                if not _forked_prefetch(spelt, config, results, token, fd, written):
                    subprocess.Popen([sys.executable, "-m", "lints.flake8_plugin", spelt,
                                      json.dumps(dataclasses.asdict(config)), results, token, str(written)],
                                     pass_fds=(fd, written), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                cls._prefetching[key] = (lock, results, token, ready)  # the child holds the lock until it exits
                ready = -1  # kept for the workers
            except OSError:
                pass
            finally:
                for end in (fd, written, ready):
                    _close(end)

    @staticmethod
    def _wait_for_prefetch(lock: str, prefetched: Callable[[], Optional[T]] = lambda: None,
                           limit_s: float = 900.0, ready: Optional[int] = None) -> Optional[T]:
        """What ``prefetched`` gives once it gives something (the findings, written before the background analysis
        writes the cache), or once the analysis holds its lock no longer (then it is read once more: its run may
        have ended since); None for neither. ``ready``: the read end of the analysis's pipe, readable once the
        findings are written or the analysis is gone, woken by that instead of looking every 10 ms (half of it
        lost on average, while both workers of a pre-commit run wait)."""
        import fcntl
        import select
        import time

        try:
            fd = _open_lock(lock, os.O_RDONLY)
        except OSError:
            return prefetched()
        try:
            deadline = time.monotonic() + limit_s
            while time.monotonic() < deadline:
                found = prefetched()
                if found is not None:
                    return found
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return prefetched()
                except BlockingIOError:
                    pass
                if ready is None:
                    time.sleep(0.01)
                    continue
                try:
                    woken = select.select([ready], [], [], max(0.0, min(1.0, deadline - time.monotonic())))[0]
                except (OSError, ValueError):  # no such descriptor here (closed by the code flake8 runs)
                    woken = [ready]
                if woken:
                    ready = None  # once: what it signalled stays readable, and is looked at above
            return prefetched()
        finally:
            os.close(fd)

    @classmethod
    def config_for(cls, root: str) -> Config:
        """The project's [tool.gradmode] (found from its root), with flake8's options over it."""
        if root not in cls._configs:
            try:
                cls._configs[root] = cls._read_config(root)
            except ConfigError as exc:
                cls._configs[root] = exc
        found = cls._configs[root]
        if isinstance(found, ConfigError):
            raise found
        return found

    @classmethod
    def _read_config(cls, root: str) -> Config:
        from pathlib import Path

        base, _ = load_config(Path(cls.explicit_config) if cls.explicit_config else None, start=Path(root))
        changes = dict(cls.overrides)
        extra, opt_in = changes.pop("extend_path_patterns", ()), changes.pop("opt_in", ())
        config = base.replace(**changes)
        return config.replace(path_patterns=config.path_patterns + tuple(extra),
                              extend_select=config.extend_select + tuple(opt_in))

    @classmethod
    def _located(cls, path: str) -> tuple[str, bool]:
        from .project_roots import ProjectLocator

        if cls._locator is None:
            cls._locator = ProjectLocator()
        return cls._locator.locate(path)

    @classmethod
    def _config_file(cls, start: str) -> str:
        """The [tool.gradmode] file the config of the project at ``start`` comes from ("" for none)."""
        from pathlib import Path

        from .options import find_pyproject

        if start not in cls._config_files:
            try:
                found = cls.explicit_config or find_pyproject(Path(start))
            except ConfigError:
                found = start  # `config_for` reports it: a key of its own
            cls._config_files[start] = str(found or "")
        return cls._config_files[start]

    @classmethod
    def _analysis_of(cls, filename: str) -> tuple[str, str, str, bool]:
        """(key, root, config start, marked) of the analysis that reports on ``filename``: files of one
        key are analysed together. A file of a project with a marker is analysed from the outermost
        such project (``ProjectLocator.outermost``) under the config found from its own project, as
        the CLI does with pre-commit's file lists; other files are grouped as the CLI groups them. The
        key is "" for a file no analysis reports on: one in a project with settings of its own that
        the walk of the project around it excludes."""
        from .project_roots import excluded_from_here, is_own_project, package_only
        from .globs import within

        root, in_project = cls._located(filename)
        marked = in_project and not package_only(root)
        if cls._loose_folders is None:
            cls._loose_folders = [os.path.abspath(p) for p in cls._named or ["."]
                                  if os.path.isdir(p) and not cls._located(p)[1]]
        walk_root = cls._locator.outermost(root) if marked else root
        own_settings = marked and is_own_project(walk_root)
        if marked and not own_settings and any(root != f and within(root, f) for f in cls._loose_folders):
            marked = False  # a folder given outside any project holds this one: analysed with it, as in the CLI
        if own_settings and cls._locator.excluded_by_the_project_around(walk_root) and (
                not any(cls._locator.reaches(walk_root, os.path.abspath(p)) for p in cls._given())
                or cls._force_exclude(root) and excluded_from_here(walk_root, cls._locator)):
            # the walk of the project around leaves it out, as in the CLI (unless it is what flake8 was given)
            return "", walk_root, root, False
        if marked:
            return f"{walk_root}\0{cls._config_file(root)}", walk_root, root, True
        paths = cls._group_of(filename)
        return "\0".join(sorted(os.path.abspath(p) for p in paths)), root, root, False

    @classmethod
    def _given(cls) -> list[str]:
        """What flake8 was asked to lint: the paths named, the file on stdin, else flake8's own ``.``."""
        return [*cls._named, *([cls._stdin_name] if cls._stdin_name else [])] or ["."]

    @classmethod
    def _force_exclude(cls, start: str) -> bool:
        try:
            return cls.config_for(start).force_exclude
        except ConfigError:
            return False  # the project's files report its error

    @classmethod
    def _project_findings(cls, filename: str, wait: bool = True) -> Optional[dict[str, list]]:
        """path -> findings and errors of the analysis that reports on ``filename``; None where ``wait`` is off and
        its background analysis has not written them yet."""
        key, root, config_start, marked = cls._analysis_of(filename)
        if not key:
            return {}
        found: Optional[dict[str, list]] = cls._by_root.get(key)
        if found is None:
            try:
                config = cls.config_for(config_start)
            except ConfigError as exc:  # every file of the project says so, not only the first
                cls._by_root[key] = found = _ConfigTrouble(config_start, exc)
                return found
            spelt = cls._spelt(root)
            paths = [spelt, *cls._beyond_the_walk(root, config)] if marked else cls._group_of(filename)
            if key in cls._prefetching:
                lock, results, token, ready = cls._prefetching[key]
                # what the background analysis linted (a folder given outside any project: spelt as given)
                linted_there = [os.path.abspath(p) for p in paths] == [os.path.abspath(spelt)]
                # written once the findings are known (before the cache): this run's token means they are, while
                # the lock may be another flake8's by now
                if not wait:
                    found = _prefetched(results, token) if linted_there else None
                    if found is None:
                        return None
                elif linted_there:
                    found = cls._wait_for_prefetch(lock, lambda: _prefetched(results, token), ready=ready)
                else:
                    cls._wait_for_prefetch(lock)  # then the result is in the cache
            if found is None:
                from .engine import lint_project

                run = lint_project(paths, config, jobs=1, cache_dir=default_cache_dir(), apply_noqa=False)
                found = {}
                for item in [*run.findings, *run.errors]:
                    found.setdefault(os.path.abspath(item.path), []).append(item)
            cls._by_root[key] = found
        return found

    @classmethod
    def _spelt(cls, root: str) -> str:
        """A project's root spelt as ``gradmode-lint`` spells it for the paths flake8 was given (``root_spelling``):
        the cache keeps summaries and results by that spelling, so the two then share them."""
        from .project_roots import root_spelling

        return root_spelling(root, cls._given(), below_here_relative=True)

    @classmethod
    def _group_of(cls, filename: str) -> list[str]:
        """The paths linted with ``filename`` (``project_roots.project_groups`` of the paths flake8 was given;
        none given is flake8's own ``.``): those of its group, else ``filename`` alone."""
        from .project_roots import project_groups
        from .globs import within

        if cls._groups is None:
            cls._groups = project_groups(cls._named or ["."])
        absolute = os.path.abspath(filename)
        for group in cls._groups:
            for path in group:
                if within(absolute, os.path.abspath(path)):
                    return group
        return [filename]

    @classmethod
    def _beyond_the_walk(cls, root: str, config: Config) -> list[str]:
        """Paths flake8 was given in this project that the walk from its root does not reach, linted as
        the CLI lints what it is given: one that ``exclude`` matches (unless ``force-exclude``), a script
        not named ``*.py``, one through a symlinked folder (not followed; what ``exclude`` names below a
        folder given stays out)."""
        from .walk import excluded_below

        found = []
        for path in cls._given():
            if path == cls._stdin_name or not os.path.exists(path) or cls._analysis_of(path)[1] != root:
                continue
            linked = os.path.realpath(path) != os.path.abspath(path)
            excluded = excluded_below(path, root, config.exclude, config.root)
            script = os.path.isfile(path) and not path.endswith(".py")
            if (linked or excluded or script) and not (excluded and config.force_exclude):
                found.append(path)
        return found

    @classmethod
    def _buffer_findings(cls, filename: str, text: str) -> dict[str, list]:
        """An editor's buffer read from stdin, for the file it stands for: linted in its project in
        place of that file, as ``python -m lints - --stdin-filename`` does."""
        from .engine import lint_project

        key, _, config_start, _ = cls._analysis_of(filename)
        if not key:
            return {}
        try:
            config = cls.config_for(config_start)
        except ConfigError as exc:
            return _ConfigTrouble(config_start, exc)
        run = lint_project([filename], config, jobs=1, cache_dir=default_cache_dir(), apply_noqa=False,
                           overrides={filename: text})
        return {os.path.abspath(filename): [*run.findings, *run.errors]}

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        if not self.enabled:
            return  # no GM code selected
        if self.filename in ("-", "stdin"):
            return  # no file name: no project to read it in
        if self.filename == self._stdin_name:
            found = self._buffer_findings(self.filename, "".join(self.lines))
        elif os.path.isfile(self.filename):
            body = getattr(self.tree, "body", None)
            # while the background analysis runs, flake8's own checks of the file run first: its findings are
            # reported from its last logical line (``report_deferred``)
            deferrable = _DEFERRED_REPORTS_LOADED and isinstance(body, list) and body
            found = self._project_findings(self.filename, wait=not deferrable)
            if found is None:
                _deferred[self.filename] = max(getattr(node, "end_lineno", None) or 1 for node in body)
                return
        else:
            return
        for line, col, text in _reports(found, self.filename):
            yield line, col, text, type(self)


def _largest_first(filenames: list[str]) -> None:
    """flake8's files, in place, largest first (where each is a file): each worker's first file waits at its end for
    the background analysis, and the files left then are shared out one at a time, so the work done meanwhile is
    largest and what is left evens out (longest processing time first). flake8 6 and later sort their report by file
    name, so nothing they print changes; flake8 5 reports in the order checked, and hands its workers chunks of files:
    its order is left as it is."""
    import stat

    import flake8

    if len(filenames) < 3 or tuple(flake8.__version_info__) < (6,):  # 2 files: one each for two workers
        return
    try:
        sizes = {name: os.stat(name) for name in filenames}
    except (OSError, ValueError):
        return
    if all(stat.S_ISREG(status.st_mode) for status in sizes.values()):
        filenames.sort(key=lambda name: -sizes[name].st_size)  # stable: equal sizes keep their order


def _reports(found: dict[str, list], filename: str) -> Iterator[tuple[int, int, str]]:
    """(line, column, text) of each finding and error of ``filename`` in ``found`` (path -> items)."""
    for item in found.get(os.path.abspath(filename), []):
        if hasattr(item, "code"):
            yield item.line, item.col, f"{item.code} {item.message}"
        else:
            # flake8 reports real syntax errors as E999 itself; this is trouble of ours
            yield 1, 0, f"GM001 gradmode-lint could not analyze this file: {item.message}"


# file -> the line its last statement ends on, for each file whose findings were not known when flake8 ran the
# AST checks (this worker's first file while the background analysis runs)
_deferred: dict[str, int] = {}
# whether flake8 loaded ``report_deferred`` (an install whose entry points predate it did not)
_DEFERRED_REPORTS_LOADED = False


def report_deferred(logical_line: str, filename: str, line_number: int) -> Sequence[tuple[tuple[int, int], str]]:
    """flake8's logical-line entry point ``GM0``: a deferred file's findings, from its last logical line (flake8
    takes a (line, column) as it is), once the background analysis has written them. Every other call is a
    lookup that finds nothing."""
    last = _deferred.get(filename)
    if last is None or line_number < last:
        return ()
    del _deferred[filename]
    found = GradModeChecker._project_findings(filename)
    return [((line, col), text) for line, col, text in _reports(found, filename)]


def _reports_deferred(options: Any) -> None:
    """flake8 calls each loaded plugin's ``parse_options``: for ``report_deferred``, in the main process, before the
    workers start."""
    global _DEFERRED_REPORTS_LOADED
    _DEFERRED_REPORTS_LOADED = True


report_deferred.parse_options = _reports_deferred  # type: ignore[attr-defined]


# The largest prefetched result read back: a project's findings (sglang's are tens of KB).
_MAX_PREFETCHED_BYTES = 16 << 20


def _close(fd: int) -> None:
    """Close ``fd`` where it is one (-1: none)."""
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


def _open_lock(path: str, flags: int) -> int:
    """The lock file, never through a link (a checkout may ship its cache folder) nor blocking on a FIFO."""
    import stat

    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file")
    return fd


def _forked_prefetch(root: str, config: Config, results: str, token: str, lock_fd: int, ready_fd: int) -> bool:
    """The background analysis in a fork of this flake8 process, where that is safe (Linux, one thread: flake8
    has started no worker yet): it has the interpreter and flake8's modules loaded already, which a new one took
    about 0.08 s to do on each run (it imports the engine itself, after the fork). Its standard streams are
    /dev/null and it keeps no file of ours but the lock (pre-commit reads flake8's output until every holder of the
    pipe is gone). It is no child of flake8's: a child forks it and ends at once, and is reaped later
    (``_reap_forks``), since waiting for it cost flake8 3-4 ms before its workers start. Whether it started."""
    import sys
    import threading

    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return False
    _reap_forks(wait=False)
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        if not _reaped_at_exit:
            import atexit

            atexit.register(_reap_forks)
            _reaped_at_exit.append(True)
        _forks.append(pid)
        return True
    try:  # the child: forks the analysis and ends, never returning to flake8
        if os.fork() == 0:
            _analyse_in_background(root, config, results, token, lock_fd, ready_fd)
    finally:
        os._exit(0)


# The children ``_forked_prefetch`` forked, each ending once it has forked its analysis: not yet reaped.
_forks: list[int] = []
_reaped_at_exit: list[bool] = []  # whether ``_reap_forks`` is registered to run at exit (once per process)


def _reap_forks(wait: bool = True) -> None:
    """Reap the children ``_forked_prefetch`` left (``wait``: those still running too; they end at once), so that no
    zombie of ours outlives the run."""
    for pid in list(_forks):
        try:
            ended, _ = os.waitpid(pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:  # not ours to reap (a worker of flake8's, forked with the list)
            ended = pid
        if ended:
            _forks.remove(pid)


def _analyse_in_background(root: str, config: Config, results: str, token: str, lock_fd: int,
                           ready_fd: int) -> NoReturn:
    """The forked analysis: the lock and the pipe's write end kept, no other file of flake8's, its standard streams
    /dev/null."""
    import fcntl

    status = 1
    try:
        # the same lock and pipe, on no standard stream's number
        lock, ready = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (lock_fd, ready_fd))
        null = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(null, stream)
        kept = sorted((lock, ready))
        for low, high in zip([3, kept[0] + 1, kept[1] + 1], [*kept, _MAX_FD]):
            os.closerange(low, high)
        status = _prefetch(root, config, results, token, then=lambda: _findings_out(ready))
    finally:
        os._exit(status)  # no atexit handler of flake8's, no flushing of its buffered output


def _findings_out(ready_fd: int) -> None:
    """Once the findings are written: the waiting workers woken (a byte in the pipe, left there for each to see),
    and the cache writes after it yield the cores to them."""
    try:
        os.write(ready_fd, b"\n")
        os.close(ready_fd)
    except OSError:  # the readers are gone: flake8 ended
        pass
    os.nice(19)


# Past every descriptor a process can hold: os.closerange asks the kernel (close_range) or reads /proc/self/fd.
_MAX_FD = (1 << 31) - 1


def _prefetch_main(root: str, config_json: str, results: str, token: str, ready_fd: str) -> int:
    """``python -m lints.flake8_plugin ROOT CONFIG_JSON RESULTS TOKEN READY_FD``: ``_prefetch`` in a process of its
    own (``READY_FD``: the pipe's write end it was given)."""
    import json

    data = json.loads(config_json)
    data["per_file_ignores"] = tuple((glob, tuple(codes)) for glob, codes in data.get("per_file_ignores", ()))
    return _prefetch(root, Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}),
                     results, token, then=lambda: _findings_out(int(ready_fd)))


def _prefetch(root: str, config: Config, results: str, token: str, then: Callable[[], object] = lambda: None) -> int:
    """The background analysis of one project: fills the cache, and writes its findings with ``token``
    to ``results`` for the workers (a worker then need not walk the project again to find them); ``then``: called
    once they are written."""
    import tempfile

    from .engine import lint_project
    from .summary_cache import encode_json
    from .workers import default_jobs

    def write_findings(run) -> None:  # before a hit or a carry writes the cache: the workers wait for this alone
        # the token on a line of its own: a worker reads no further in a file of another run
        text = token + "\n" + encode_json({"findings": [[os.path.abspath(f.path), f.to_dict()] for f in run.findings],
                                           "errors": [[os.path.abspath(e.path), e.message] for e in run.errors]})
        # a new file renamed over the name, whatever is there (a link the checkout planted is replaced, not followed)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(results), prefix=".tmp-prefetch-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, results)
        except BaseException:
            os.unlink(temporary)
            raise
        then()

    lint_project([root], config, jobs=default_jobs(), cache_dir=default_cache_dir(), apply_noqa=False,
                 findings_ready=write_findings)
    return 0


def _prefetched(results: str, token: str) -> Optional[dict[str, list]]:
    """absolute path -> findings and errors, as this run's background analysis wrote them; None for a
    file of another run, or of anyone else (the checkout's to plant: JSON, never more than read)."""
    import json

    from .model import finding_from_dict
    from .sources import read_regular_bytes

    try:
        raw = read_regular_bytes(results, _MAX_PREFETCHED_BYTES, follow_links=False)
        first, _, text = raw.partition(b"\n")
        if first != token.encode() or len(raw) > _MAX_PREFETCHED_BYTES:
            return None
        data = json.loads(text)
        found: dict[str, list] = {}
        for path, finding in data["findings"]:
            found.setdefault(str(path), []).append(finding_from_dict(finding))
        for path, message in data["errors"]:
            found.setdefault(str(path), []).append(FileError(str(path), str(message)))
        return found
    except Exception:  # unreadable, or of any other shape: the worker reads the cache itself
        return None


if __name__ == "__main__":
    import sys

    sys.exit(_prefetch_main(*sys.argv[1:6]))
