"""Lint a project: find its root and files, summarise every module (cached), analyse, run the rules.

Shared by the CLI, the codemod, the flake8 plugin and the libcst command. The analysis always
covers the whole project around the given paths (its root is the nearest folder above them
with a ``pyproject.toml`` or ``.git``); findings are reported for the given files only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

from . import __version__
from .config import Config
from .files import MAX_FILE_BYTES, SourceFile, decode_source, discover, read_source, run_jobs
from .model import FileError, Finding
from .summary import SCHEMA, import_root, module_name_for, summarize

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
CACHE_FORMAT = f"gradmode-summaries/{SCHEMA}/{__version__}"


def find_project_root(paths: Sequence[str]) -> str:
    """The nearest folder above the first path holding ``pyproject.toml`` or ``.git``; else the path's folder."""
    first = os.path.abspath(paths[0]) if paths else os.getcwd()
    start = first if os.path.isdir(first) else os.path.dirname(first)
    current = start
    while True:
        if os.path.isfile(os.path.join(current, "pyproject.toml")) or os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent


def _display_root(root: str, paths: Sequence[str]) -> str:
    """The root spelt as the user spells paths: relative when they are, so findings keep their form."""
    if paths and all(not os.path.isabs(p) for p in paths):
        relative = os.path.relpath(root)
        return relative
    return root


def file_key(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


class SummaryCache:
    """Summaries by path and content hash, as one JSON file (never pickle: a checkout may be hostile).

    An unreadable, corrupt or foreign cache is empty; a stale entry (other content) is a miss.
    """

    def __init__(self, folder: Optional[Path]) -> None:
        self.path = Path(folder) / "summaries.json" if folder is not None else None
        self._entries: dict[str, list] = {}
        self._dirty = False
        if self.path is None:
            return
        try:
            with open(self.path, "rb") as handle:
                data = json.loads(handle.read())
            if isinstance(data, dict) and data.get("format") == CACHE_FORMAT and isinstance(data.get("entries"), dict):
                self._entries = data["entries"]
        except (OSError, ValueError, RecursionError, MemoryError):
            self._entries = {}

    def get(self, path: str, key: str) -> Optional[dict]:
        entry = self._entries.get(path)
        if (isinstance(entry, list) and len(entry) == 2 and entry[0] == key and isinstance(entry[1], dict)
                and entry[1].get("schema") == SCHEMA and entry[1].get("path") == path):
            return entry[1]
        return None

    def put(self, path: str, key: str, summary: dict) -> None:
        self._entries[path] = [key, summary]
        self._dirty = True

    def prune(self, live: Iterable[str]) -> None:
        live = set(live)
        for path in [p for p in self._entries if p not in live]:
            del self._entries[path]
            self._dirty = True

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.path.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Created by gradmode-lint\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-summaries-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump({"format": CACHE_FORMAT, "entries": self._entries}, handle, separators=(",", ":"))
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as exc:  # a read-only checkout still lints
            print(f"gradmode-lint: warning: cannot write cache {self.path}: {exc.strerror or exc}", file=sys.stderr)


def summarize_source(source: SourceFile, module: str, is_package: bool) -> Union[dict, FileError]:
    """The summary of one decoded file, or the one-line reason it has none."""
    try:
        return summarize(source.text, source.path, module, is_package)
    except SyntaxError as exc:
        return FileError(source.path, f"syntax error at line {exc.lineno}, column {exc.offset}: {exc.msg}")
    except (RecursionError, MemoryError):
        return FileError(source.path, "cannot analyze: expressions nested too deeply")
    except ValueError as exc:
        return FileError(source.path, f"cannot parse: {exc}")


@dataclasses.dataclass
class _Job:
    path: str
    module: str
    is_package: bool
    max_bytes: int
    size: int = 0


def _summarize_job(job: _Job) -> tuple[str, Union[dict, FileError]]:
    source = read_source(job.path, job.max_bytes)
    if isinstance(source, FileError):
        return "", source
    try:
        return file_key(source.raw), summarize_source(source, job.module, job.is_package)
    except Exception as exc:  # one bad file must not stop the run
        return file_key(source.raw), FileError(job.path, f"internal error while summarising: "
                                                         f"{type(exc).__name__}: {exc}")


@dataclasses.dataclass
class ProjectRun:
    """Everything one run produced."""

    root: str
    files: list[str]  # the requested files
    findings: list[Finding]
    errors: list[FileError]
    analysis: object = None
    texts: dict = dataclasses.field(default_factory=dict)


def collect_summaries(root: str, config: Config, jobs: int, cache: Optional[SummaryCache],
                      max_bytes: int = MAX_FILE_BYTES, overrides: Optional[dict[str, str]] = None,
                      extra: Sequence[str] = ()) -> tuple[dict[str, dict], dict[str, FileError]]:
    """path -> summary for every Python file of the project (``overrides``: path -> text to use instead)."""
    files, _ = discover([root], config.exclude)
    files = [os.path.normpath(f) for f in files]
    for path in extra:
        if path not in files:
            files.append(path)
    base = import_root(root)
    summaries: dict[str, dict] = {}
    errors: dict[str, FileError] = {}
    todo: list[_Job] = []
    overrides = overrides or {}
    for path in files:
        module, is_package = module_name_for(path, base)
        if path in overrides:
            source = decode_source(path, overrides[path].encode("utf-8"))
            result = summarize_source(source, module, is_package) if isinstance(source, SourceFile) else source
            (errors if isinstance(result, FileError) else summaries)[path] = result
            continue
        if cache is not None:
            try:
                with open(path, "rb") as handle:
                    raw = handle.read(max_bytes + 1) if os.path.isfile(path) else b""
            except OSError:
                raw = b""
            cached = cache.get(path, file_key(raw)) if raw else None
            if cached is not None and cached.get("module") == module:
                summaries[path] = cached
                continue
        todo.append(_Job(path, module, is_package, max_bytes))
    for job, (key, result) in zip(todo, run_jobs(_summarize_job, todo, jobs,
                                                 on_crash=lambda j, why: ("", FileError(j.path, why)),
                                                 weight=_job_weight)):
        if isinstance(result, FileError):
            errors[job.path] = result
        else:
            summaries[job.path] = result
            if cache is not None and key:
                cache.put(job.path, key, result)
    if cache is not None:
        cache.prune(summaries)
        cache.save()
    return summaries, errors


def _job_weight(job: _Job) -> int:
    try:
        return os.stat(job.path).st_size
    except OSError:
        return 0


def analyse(summaries: dict[str, dict], config: Config):
    from .analysis import ProjectAnalysis
    from .project import Project

    return ProjectAnalysis(Project(summaries.values()), config, serving_config_set=config.serving_grad_mode != "auto")


def run_rules(analysis, config: Config, wanted: Optional[set[str]] = None) -> list[Finding]:
    from .rules import ALL_RULES

    findings: list[Finding] = []
    for code, rule_class in ALL_RULES.items():
        if not config.is_selected(code, rule_class.DEFAULT_ENABLED):
            continue
        for finding in rule_class().check(analysis):
            if wanted is None or finding.path in wanted:
                findings.append(finding)
    return sorted(set(findings))


def lint_project(paths: Sequence[str], config: Config, jobs: int = 1, cache_dir: Optional[Path] = None,
                 use_cache: bool = True, max_bytes: int = MAX_FILE_BYTES,
                 overrides: Optional[dict[str, str]] = None, apply_noqa: bool = True) -> ProjectRun:
    """Lint ``paths`` (files or folders) with the whole project around them as context."""
    requested, errors = discover(paths, config.exclude)
    requested = [os.path.normpath(p) for p in requested]
    root = _display_root(find_project_root(paths or ["."]), paths)
    root = os.path.normpath(root)
    cache = SummaryCache(cache_dir if cache_dir is not None else Path(root) / ".gradmode_cache") \
        if use_cache else None
    overrides = {os.path.normpath(k): v for k, v in (overrides or {}).items()}
    summaries, summary_errors = collect_summaries(root, config, jobs, cache, max_bytes, overrides,
                                                  extra=[p for p in requested if _outside(p, root)])
    wanted = set(requested)
    for path in requested:
        if path in summary_errors:
            errors.append(summary_errors[path])
        elif path not in summaries:
            source = read_source(path, max_bytes)
            errors.append(source if isinstance(source, FileError) else FileError(path, "not analysed"))
    analysis = analyse(summaries, config)
    findings = run_rules(analysis, config, wanted)
    texts: dict[str, str] = {}
    if apply_noqa and findings:
        findings = _without_noqa(findings, texts, overrides)
    errors.sort(key=lambda e: e.path)
    return ProjectRun(root, requested, findings, errors, analysis, texts)


def _outside(path: str, root: str) -> bool:
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return relative.startswith("..")


def _without_noqa(findings: list[Finding], texts: dict[str, str], overrides: dict[str, str]) -> list[Finding]:
    kept = []
    for finding in findings:
        if finding.path not in texts:
            if finding.path in overrides:
                texts[finding.path] = overrides[finding.path]
            else:
                source = read_source(finding.path)
                texts[finding.path] = source.text if isinstance(source, SourceFile) else ""
        lines = texts[finding.path].splitlines()
        line = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
        if not is_suppressed(line, finding.code):
            kept.append(finding)
    return kept


def is_suppressed(line: str, code: str) -> bool:
    if "noqa" not in line.lower():
        return False
    match = _NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    return not codes or any(code.startswith(c.upper()) for c in re.split(r"[,\s]+", codes) if c)
