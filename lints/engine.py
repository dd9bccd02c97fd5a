"""Lint a project: find its root and files, summarise every module (cached), analyse, run the rules.

Shared by the CLI, the codemod, the flake8 plugin and the libcst command. The analysis always
covers the whole project around the given paths (its root: ``project_roots``); findings are
reported for the given files only.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from pathlib import Path
from typing import Callable, Collection, NamedTuple, Optional, Sequence

from .cache_folders import cache_folder, markerless_cache_folder
from .gitignore import forget as forget_ignore_files
from .freed_memory import give_back_freed_memory
from .gc_pause import collector_paused
from .loose_files import loose_entries, loose_project
from .model import FileError, Finding, ServingMode, finding_from_dict
from .module_names import import_root, module_name_for, module_names_for
from .options import Config
from .project_roots import ProjectLocator, excluded_from_here, is_own_project, package_only, root_spelling
from .sources import MAX_FILE_BYTES, read_source, text_reader
from .summary_cache import CACHE_FORMAT, KeptWords, MemorySummaries, SummaryCache, decoded_json, encode_json, words_in
from .summary_jobs import ProjectFile, collect_summaries, content_key, file_stamp, text_key
from .summary_records import forget_shared_objects
from .walk import WALKS_FILE, discover, excluded_below, walks_kept_in
from .warn import warn


@dataclasses.dataclass
class ProjectRun:
    """Everything one run produced."""

    root: str
    files: list[str]  # the requested files
    findings: list[Finding]
    errors: list[FileError]
    serving: ServingMode
    analysis: object = None  # None when the results came from the cache
    # False where some module that may import the files was not analysed (``loose_project``)
    whole_project: bool = True
    loose_members: Optional[list[str]] = None  # the files analysed, for loose files (not a walk)
    loose_folder: Optional[str] = None  # the folder their module names are counted from
    cache_folder: Optional[Path] = None  # the cache the run read and wrote; None without one
    summary_cache: Optional[SummaryCache] = None  # that cache, with the summaries it read (for the fixes)


def project_files(root: str, config: Config, extra: Sequence[str] = (),
                  overrides: Optional[dict[str, str]] = None, read_keys: bool = True,
                  max_bytes: int = MAX_FILE_BYTES, cache: Optional[SummaryCache] = None,
                  walked: Optional[list[str]] = None,
                  stats: Optional[FileStats] = None,
                  last: Optional[dict] = None) -> list[ProjectFile]:
    """``cache``: the stamps its rows keep (``known_keys``), where a file's key need not be read again; ``walked``:
    what ``project_walk(root, config)`` found already; ``stats``: what ``file_stats`` took of its files (a file it
    lacks, or could not stat, is looked at again); ``last``: what the last results were made of (``_made_of``),
    whose module names stand where the files are the same, named from the same folders, and whose keys stand where a
    file's stamp is as it was then (no row's stamp read: 5 ms on sglang)."""
    if walked is None:
        walked = project_walk(root, config)
    files = list(walked)  # a walk of folders spells each file as normpath does (``discover``)
    # Named files the walk skipped (outside the root, or under an excluded folder: exclude applies
    # to what a walk finds, as in ruff) join the project. One the walk found keeps its spelling,
    # unless its text is given: overrides are looked up by the spelling they were given in.
    spelt = set(files) if extra else set()
    where: Optional[dict[str, int]] = None  # absolute path -> its place in ``files``, once a path is spelt otherwise
    for path in extra:
        # spelt as the walk spells it (each file of a package given below the root): nothing to look up; a buffer's
        # spelling is (the last one given wins)
        if path in spelt and not (overrides and path in overrides):
            continue
        if where is None:
            named = {os.path.basename(p) for p in extra}  # only a file of a name given can be one given
            where = {os.path.abspath(f): i for i, f in enumerate(files) if os.path.basename(f) in named}
        absolute = os.path.abspath(path)
        if absolute not in where:
            where[absolute] = len(files)
            files.append(path)
            spelt.add(path)
        elif overrides and path in overrides:
            files[where[absolute]] = path
    last_files = _last_files(files, root, last)
    if last_files is not None:
        modules, was_keys, was_stamps = last_files
        packages = [path.endswith(_PACKAGE_ENDS) or path in ("__init__.py", "__init__") for path in files]
    else:
        named = module_names_for(files, import_root(root))
        modules, packages = [name[0] for name in named], [name[1] for name in named]
        was_keys = was_stamps = [None] * len(files)
    stamps = stats.stamps if stats is not None and read_keys else {}
    overrides = overrides or {}
    entries = []
    unknown = []  # the files whose key is read or remembered by the rows
    # one pass of few steps: sglang's 4,719 files
    for path, module, is_package, was_key, was_stamp in zip(files, modules, packages, was_keys, was_stamps):
        if path in overrides:
            entries.append(ProjectFile(path, module, is_package, text_key(path, overrides[path], max_bytes)))
        elif was_stamp is not None and was_stamp == stamps.get(path):
            entries.append(ProjectFile(path, module, is_package, was_key, was_stamp))
        else:
            entry = ProjectFile(path, module, is_package, None)
            entries.append(entry)
            if read_keys:
                unknown.append(entry)
    if unknown:
        known = cache.known_keys_of([entry.path for entry in unknown]) if cache is not None else None
        for entry in unknown:
            entry.key = content_key(entry.path, max_bytes, known, stamps.get(entry.path))
            kept = known.get(entry.path) if known is not None else None
            entry.stamp = kept[0] if kept is not None and kept[1] == entry.key else None
        if known:  # with what ``content_key`` learnt (the save writes only the stamps that differ from the rows')
            cache.remember_keys(known)
    return entries


def _named_from(root: str) -> list[str]:
    """What a module name depends on beside its file's path as spelt: the current folder and the import root."""
    return [os.getcwd(), import_root(root)]


# a package's file, as ``module_name_for`` tells it (Windows spells paths with either separator)
_PACKAGE_ENDS = tuple(sep + name for sep in dict.fromkeys([os.sep, os.altsep or os.sep])
                      for name in ("__init__.py", "__init__"))


class _LastFiles(NamedTuple):
    """The files as the last results had them (``_made_of``), column by column, in the order of the walk."""

    modules: list[str]
    keys: list[Optional[str]]
    stamps: list[Optional[str]]  # the stamp each key stood for (None: none settled, or of another shape)


def _last_files(files: list[str], root: str, last: Optional[dict]) -> Optional[_LastFiles]:
    """``files`` as the last results had them, where they named these very files from the same folders
    (``module_names_for``: 8 ms of a carry on sglang); None otherwise."""
    columns = _file_columns(last.get("files")) if isinstance(last, dict) and last.get("named_from") == _named_from(
        root) else None
    if columns is None:
        return None
    paths, modules, keys, stamps = columns
    if paths != files or not all(type(module) is str for module in modules):
        return None
    known = [type(stamp) is str and type(key) is str for key, stamp in zip(keys, stamps)]
    return _LastFiles(modules, [key if ok else None for key, ok in zip(keys, known)],
                      [stamp if ok else None for stamp, ok in zip(stamps, known)])


def _file_columns(files: object) -> Optional[tuple[list, list, list, list]]:
    """The last results' files (``_made_of``: [path, module, key, stamp] each) as four columns; None for a list of any
    other shape (the results are the checkout's to plant)."""
    if not isinstance(files, list) or not all(type(entry) is list and len(entry) == 4 for entry in files):
        return None
    paths, modules, keys, stamps = (list(column) for column in zip(*files)) if files else ([], [], [], [])
    return paths, modules, keys, stamps


def project_walk(root: str, config: Config) -> list[str]:
    """The files of the project at ``root``: its walk, as ``config`` excludes."""
    return discover([root], config.exclude, stop_at=is_own_project, anchor=config.root,
                    respect_gitignore=config.respect_gitignore)[0]


def _distinct(paths: list[str]) -> list[str]:
    """The first path naming each file (``a.py`` and ``/abs/a.py`` are one module, not two)."""
    seen: set[str] = set()
    return [p for p in paths if not (os.path.abspath(p) in seen or seen.add(os.path.abspath(p)))]


class _RequestedSpelling:
    """A file of the project as the request spells it (``path in it``, ``it[path]``): the same text, else the
    same absolute path (worked out for every file requested only when asked: sglang's 4,719 ``abspath`` took a
    fifth of a run that carries its findings)."""

    def __init__(self, requested: list[str]) -> None:
        self._requested = requested
        self._spelt = set(requested)
        self._by_absolute: Optional[dict[str, str]] = None

    def get(self, path: str) -> Optional[str]:
        if path in self._spelt:
            return path
        if self._by_absolute is None:
            self._by_absolute = {os.path.abspath(p): p for p in self._requested}
        return self._by_absolute.get(os.path.abspath(path))

    def __contains__(self, path: str) -> bool:
        return self.get(path) is not None

    def __getitem__(self, path: str) -> str:
        spelt = self.get(path)
        if spelt is None:
            raise KeyError(path)
        return spelt


def _respelt_below(path: str, root: str, top: Optional[str] = None) -> str:
    """``path`` as a walk from ``root`` spells it, where it lies below the root and is spelt otherwise
    (absolute against a relative root, or the reverse); else as it is. ``top``: ``abspath(root)``, where the
    caller has it."""
    if os.path.isabs(path) == os.path.isabs(root):
        return path
    top = top or os.path.abspath(root)
    absolute = path if os.path.isabs(path) else os.path.abspath(path)
    if not absolute.startswith(os.path.join(top, "")):
        return path
    return os.path.normpath(os.path.join(root, absolute[len(top):].lstrip(os.sep)))


def _source_bytes(paths: Sequence[str], overrides: dict[str, str]) -> int:
    """The size of the project's source: a stat per file (sglang's 4,719 files: about 10 ms)."""
    total = 0
    for path in dict.fromkeys(paths):
        if path in overrides:
            total += len(overrides[path])
            continue
        status = _stat_or_none(path)
        total += status.st_size if status is not None else 0
    return total


class FileStats(NamedTuple):
    """What ``file_stats`` took of the project's files, one stat each."""

    stamps: dict[str, Optional[str]]  # path -> its ``file_stamp`` (None where it cannot be taken)
    source_bytes: int  # as ``_source_bytes`` counts it


def file_stats(paths: Sequence[str], overrides: dict[str, str], max_bytes: int) -> FileStats:
    """Each path's stamp and the source's size from one ``os.stat`` a file. A stamp is kept, not the stat: 4,719 of
    them were 3 MB of memory a forked run faults in."""
    stamps: dict[str, Optional[str]] = {}
    total = 0
    for path in paths:
        if path in stamps:
            continue
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            stamps[path] = None
            total += len(overrides[path]) if path in overrides else 0
            continue
        stamps[path] = file_stamp(status, max_bytes)
        total += len(overrides[path]) if path in overrides else status.st_size
    return FileStats(stamps, total)


def _stat_or_none(path: str) -> Optional[os.stat_result]:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def analyse(summaries: dict[str, dict], config: Config, jobs: int = 1):
    """``jobs`` over 1, where a buffer rule is on: a forked child finds half of the call graph, then the kept
    buffers, beside the grad modes (``lints/forked_work.py``)."""
    from .analysis import ProjectAnalysis
    from .forked_work import can_fork
    from .project import Project
    from .rules import ALL_RULES

    fork = can_fork(jobs) and any(config.is_selected(code, ALL_RULES[code].DEFAULT_ENABLED)
                                  for code in BUFFER_RULES)
    return ProjectAnalysis(Project(summaries.values()), config, serving_config_set=config.serving_grad_mode != "auto",
                           fork_buffers=fork, buffer_holders=config.is_selected(
                               HOLDER_RULE, ALL_RULES[HOLDER_RULE].DEFAULT_ENABLED))


BUFFER_RULES = ("GM201", "GM202")  # the rules that read ``ProjectAnalysis.kept_buffers``
HOLDER_RULE = "GM201"  # the rule that reads ``Allocation.per_holder``


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


def _base_digest(config: Config, max_bytes: int) -> str:
    """What a run's results depend on beside its files: the tool, the settings, the size limit and the installed
    libraries (taken once per run: listing site-packages is its cost)."""
    h = hashlib.sha256(f"{CACHE_FORMAT}|{config.fingerprint()}|{max_bytes}".encode())
    if config.libraries:  # a library installed, upgraded or removed changes the analysis
        from .site_packages import environment_key

        h.update(f"|{environment_key(_site_folders(config))}".encode())
    return h.hexdigest()


def _digest(base: str, entries: list[ProjectFile]) -> str:
    """The results' key: ``_base_digest`` and each file's path, module name and content key."""
    h = hashlib.sha256(base.encode())
    # paths as the file system gave them: a name that is not UTF-8 comes with lone surrogates
    h.update("".join([f"|{entry.path}|{entry.module}|{entry.key}" for entry in entries]).encode(
        "utf-8", "surrogateescape"))
    return h.hexdigest()


def _made_of(base: str, root: str, entries: list[ProjectFile], words: list[str], project_words: Optional[dict]
             ) -> dict:
    """What a run's results were made of, file by file, for a later run to tell what changed since
    (``words``: the installed libraries' summaries' identifiers, ``library_words``; ``project_words``: which of the
    project's are kept beside them, ``_project_words``)."""
    made_of = {"base": base, "files": [[e.path, e.module, e.key, e.stamp] for e in entries],
               "named_from": _named_from(root), "library_words": words}
    if project_words is not None:
        made_of["project_words"] = project_words
    return made_of


class _NamedWords(NamedTuple):
    """The project's words some results name (``_kept_project_words``)."""

    id: str  # of the words kept beside them
    added: str  # the names bound since, each between spaces
    held: set[str]  # those of the names asked about among the words kept


def _kept_project_words(cache: SummaryCache, made_of: dict, names: Collection[str]) -> Optional[_NamedWords]:
    """The project's words the results ``made_of`` name, and which of ``names`` they hold; None for none."""
    named = made_of.get("project_words")
    if not isinstance(named, dict) or not isinstance(named.get("id"), str) or not isinstance(named.get("added"), str):
        return None
    added = named["added"]
    # the added names between spaces: `` name `` is sought there
    held = cache.words_held(named["id"], names) if added.startswith(" ") and added.endswith(" ") else None
    return _NamedWords(named["id"], added, held) if held is not None else None


def _project_words(cache: SummaryCache, entries: list[ProjectFile], summarised: Collection[str],
                   before: Optional[dict], base: str) -> tuple[Optional[dict], Optional[KeptWords]]:
    """At least every identifier of the project's rows as saved (``SummaryCache.row_identifiers``), so that a carry
    finds a name no row holds without reading any row (sglang: 29 ms): (what the results name, ``{"id": ...,
    "added": " "}``; the words to keep beside them where they changed). The words of the last results with those of
    the rows that changed since (a row of the same path, module name and key is the same summary); every row's where
    there are none, or many rows changed. A superset: a word of a row since changed or gone stays until then, and only
    makes a carry read the rows. (None, None) where a row cannot be read."""
    made_of = before.get("made_of") if isinstance(before, dict) else None
    kept = _kept_project_words(cache, made_of, ()) if isinstance(made_of, dict) and made_of.get("base") == base \
        else None
    files = made_of.get("files") if kept is not None else None
    found: Optional[set[bytes]] = None
    if kept is not None and isinstance(files, list):
        # a row of the same path, module name and key is the same summary (a moved import root renames modules)
        unchanged = {tuple(f[:3]) for f in files
                     if isinstance(f, list) and len(f) == 4 and all(type(part) is str for part in f[:3])}
        changed = {e.path: e.key for e in entries
                   if (e.path, e.module, e.key) not in unchanged and e.path in summarised}
        if len(changed) < BULK_SUMMARIES:
            found = cache.row_identifiers(changed) if changed else set()
    if found is not None:
        words_id = kept.id
        candidates = _texts(found | set(kept.added.encode("ascii", "replace").split()))
        held = cache.words_held(words_id, candidates)
        if held is not None:
            new = candidates - held
            if not new:
                return {"id": words_id, "added": " "}, None
            new_id = hashlib.sha256(f"{words_id} {_spaced(new)}".encode("ascii", "replace")).hexdigest()[:16]
            return {"id": new_id, "added": " "}, KeptWords(new_id, new, added_to=words_id)
    found = cache.row_identifiers({e.path: e.key for e in entries if e.path in summarised})
    if found is None:
        return None, None
    words = _texts(found)
    words_id = hashlib.sha256(f" {_spaced(words)}".encode("ascii", "replace")).hexdigest()[:16]  # the same words, id
    return {"id": words_id, "added": " "}, KeptWords(words_id, words)


def _texts(words: set[bytes]) -> set[str]:
    return {word.decode("ascii", "replace") for word in words}


def _spaced(words: set[str]) -> str:
    """``words`` sorted, each followed by a space."""
    return "".join(f"{word} " for word in sorted(words))


def library_words(library: dict[str, dict]) -> list[str]:
    """Each word of the installed libraries' summaries' JSON (``summary_cache.words_in``): the names they may read."""
    return sorted(words_in(encode_json([library[path] for path in sorted(library)]))) if library else []


# More changed files than this are analysed afresh: a commit's worth of edits rarely only moves code.
MOVED_FILES_MAX = 8
# Summarised afresh at least this many files, a run gives the C heap's free memory back before its analysis
# (``freed_memory``): a few files' texts are not worth the 10-40 ms
BULK_SUMMARIES = 256


def _moved_results(cache: SummaryCache, entries: list[ProjectFile], base: str, max_bytes: int,
                   overrides: dict[str, str]
                   ) -> Optional[tuple[list[Finding], dict[str, FileError], tuple, list[str], Optional[dict]]]:
    """The last run's (findings, errors, serving mode, library words, what the results name of the project's words
    (``_project_words``)), carried to the new places where the files changed since only moved code or bound
    unmentioned constants (``lints.shifts``); None where anything else changed."""
    from .shifts import carried, line_shift, mentioned_elsewhere_by, rebound_constants

    last = cache.last_results()
    made_of = last.get("made_of") if last is not None else None
    if not isinstance(made_of, dict) or made_of.get("base") != base:
        return None
    columns = _file_columns(made_of.get("files"))
    if columns is None:
        return None
    paths, modules, keys, _ = columns
    if paths != [entry.path for entry in entries] or modules != [entry.module for entry in entries] \
            or not all(type(key) is str for key in keys):
        return None
    changed = [(entry, key) for entry, key in zip(entries, keys) if key != entry.key]
    errors = last.get("errors")
    if not changed or len(changed) > MOVED_FILES_MAX or not isinstance(errors, dict) or any(
            entry.path in errors or not key for entry, key in changed):
        return None
    old = {entry.path: cache.get(entry.path, key, records=False) for entry, key in changed}  # compared as JSON
    if any(summary is None for summary in old.values()):
        return None
    fresh, fresh_errors = collect_summaries([entry for entry, _ in changed], 1, cache, max_bytes, overrides,
                                            prune=False)
    if fresh_errors:
        return None
    words = made_of.get("library_words")
    if not isinstance(words, list):
        return None
    changed_paths = {entry.path for entry, _ in changed}
    names = sorted(set().union(*(rebound_constants(old[p], fresh[p]) for p in sorted(changed_paths))))
    others: Optional[list[dict]] = []  # the other files' summaries that may mention one of them
    project_words = _kept_project_words(cache, made_of, names) if names else None
    if project_words is not None and not project_words.held and not any(f" {name} " in project_words.added
                                                                        for name in names):
        pass  # no row of the analysed project holds one (``_project_words``): none need be read
    elif names:  # from one snapshot of the rows, each of which must be its file's summary as analysed
        rows = cache.rows_mentioning(names)
        if rows is None or any(rows[0].get(e.path) != e.key for e in entries
                               if e.path not in changed_paths and e.path not in errors):  # (no summary: no row)
            others = None
        else:
            project_paths = {entry.path for entry in entries}
            others = [decoded_json(text) for path, text in rows[1]
                      if path in project_paths and path not in changed_paths]
    mentioned = mentioned_elsewhere_by(words, {p: (old[p], fresh[p]) for p in changed_paths}, others)
    shifts = {}
    for entry, _ in changed:
        lines = line_shift(old[entry.path], fresh[entry.path], lambda name, path=entry.path: mentioned(name, path))
        if lines is None:
            return None
        shifts[entry.path] = lines
    serving = ServingMode(*[str(v) for v in last["serving"]])
    moved = carried([finding_from_dict(f) for f in last["findings"]], serving.evidence, shifts)
    if moved is None:
        return None
    named = made_of.get("project_words") if not names else None  # nothing (un)bound: the words stand
    if project_words is not None:  # a carried file's identifiers are its last ones and the names it (un)binds
        named = {"id": project_words.id, "added": project_words.added + "".join(
            f"{name} " for name in names if name not in project_words.held and f" {name} " not in project_words.added)}
    return (moved[0], {p: FileError(p, str(m)) for p, m in errors.items()}, serving._replace(evidence=moved[1]),
            [str(word) for word in words], named)


def _summarise_and_analyse(entries: list[ProjectFile], config: Config, jobs: int, cache: Optional[SummaryCache],
                           max_bytes: int, overrides: dict[str, str], progress, use_cache: bool = True):
    summaries, summary_errors = collect_summaries(entries, jobs, cache, max_bytes, overrides, progress)
    if cache is not None:
        cache.save()
    if len(summaries) - (cache.reused if cache is not None else 0) >= BULK_SUMMARIES:
        give_back_freed_memory()  # their texts are gone: the analysis' objects could not have reused them
    library = _library_summaries(list(summaries.values()), config, jobs, max_bytes, use_cache)
    forget_shared_objects()
    analysis = analyse({**summaries, **library} if library else summaries, config, jobs)
    try:
        return summaries, summary_errors, analysis, run_rules(analysis, config), library
    finally:
        analysis.close()


def _site_folders(config: Config) -> list[str]:
    from .site_packages import site_folders

    python = config.python
    if python and not os.path.isabs(python):  # as written in [tool.gradmode]: from its folder
        python = os.path.join(config.root or os.curdir, python)
    return site_folders(python or None)


def _library_summaries(project: list[dict], config: Config, jobs: int, max_bytes: int, use_cache: bool
                       ) -> dict[str, dict]:
    """path -> summary of each installed library module the project reaches (``lints/libraries.py``)."""
    if not config.libraries:
        return {}
    from .libraries import LibraryCache, library_summaries, user_cache_folder

    def summarise(modules) -> dict[str, object]:
        found, errors = collect_summaries([ProjectFile(m.path, m.module, m.is_package, None) for m in modules], jobs,
                                          None, max_bytes)
        return {**found, **errors}

    cache = LibraryCache(user_cache_folder() if use_cache else None, CACHE_FORMAT)
    found, warnings = library_summaries(project, _site_folders(config), cache, summarise)
    for message in warnings:
        warn(message)
    return {summary["path"]: summary for summary in found}


def lint_project(paths: Sequence[str], config: Config, jobs: int = 1, cache_dir: Optional[Path] = None,
                 use_cache: bool = True, max_bytes: int = MAX_FILE_BYTES,
                 overrides: Optional[dict[str, str]] = None, apply_noqa: bool = True,
                 alone: bool = False, progress=None, summary_cache: Optional[SummaryCache] = None,
                 findings_ready: Optional[Callable[[ProjectRun], None]] = None) -> ProjectRun:
    """Lint ``paths`` (files or folders) with the whole project around them as context
    (``alone``: the given files are the whole project, e.g. a snippet fixed in memory;
    ``progress``: a ``lints.progress.Progress`` advanced per file summarised). Files outside any
    project (no marker or package above them) are linted with the files of their folder that import
    them and what these import (``loose_project``), not with the whole folder, which may be ``/tmp``
    or a home folder, and without a cache unless ``cache_dir`` is given. ``paths`` are of one
    project (``project_groups`` splits them).

    A rerun over unchanged files reuses the whole result; a change re-summarises only the files
    that changed and re-runs the (in-memory) project analysis. ``summary_cache``: the summaries to
    reuse and add to instead of the project's cache folder (the language server keeps one in memory
    across runs, ``lints/server.py``); with ``use_cache`` on, it is used whatever the folder, and a
    ``MemorySummaries`` reads what it lacks from the folder. ``findings_ready``: called with the run before
    a hit or a carry writes the cache (flake8's background analysis hands the findings to its workers first).
    """
    overrides = {os.path.normpath(k): v for k, v in (overrides or {}).items()}
    given_overrides = overrides  # spelt as given (``overrides`` as the project's walk spells the files, below)
    forget_ignore_files()  # a run reads them afresh (the flake8 plugin runs many in one process)
    locator = ProjectLocator()
    found, in_project = locator.locate(paths[0] if paths else ".")
    loose, whole, members = False, True, None
    if not alone and paths and (not in_project or package_only(found)):
        # a folder given outside any project is its own project; else the files and packages without
        # a marker given are loose, in the folder holding them (``project_groups``)
        folders = [os.path.abspath(p) for p in paths if os.path.normpath(p) not in overrides
                   and os.path.isdir(p) and not locator.locate(p)[1]]
        if folders:
            found = min(folders, key=len)
        else:
            loose, found = True, os.path.dirname(found) if in_project else found
    elif in_project and not package_only(found):
        found = locator.outermost(found)
    root = os.path.normpath(root_spelling(found, paths, below_here_relative=not loose and not alone))
    packages = {r for p in paths for r, inside in [locator.locate(p)] if inside} if loose else set()
    folder = cache_folder(root, cache_dir, loose)
    if folder is None and packages:  # packages without a marker are cached as a project is, not in their folder
        folder = markerless_cache_folder(found, packages)
    cache = summary_cache if summary_cache is not None and use_cache else \
        SummaryCache(folder, root) if use_cache and folder is not None else None
    if isinstance(cache, MemorySummaries) and folder is not None:
        cache.read_beside(folder, root)  # what the CLI and the hooks left there, read and never written
    # a walk kept by an earlier run stands where its folders are as they were (not the language server's: it keeps
    # its own in memory)
    kept_walks = str(folder / WALKS_FILE) if use_cache and folder is not None and summary_cache is None else None
    with walks_kept_in(kept_walks, CACHE_FORMAT):
        given = [p for p in paths if os.path.normpath(p) not in overrides]
        requested, errors = discover(given, config.exclude, stop_at=is_own_project, anchor=config.root,
                                     respect_gitignore=config.respect_gitignore)
        walked = requested  # the project's own walk, where the one folder given is its root (below)
        # a walk spells its files as normpath does already: only a path given as it is needs it (4,719 calls: 3 ms)
        named = set(given)
        requested = [os.path.normpath(p) if p in named else p for p in requested] + [
            p for p in overrides if p not in requested]
        if len(given) + len(overrides) > 1:  # one walk spells each file once
            requested = _distinct(requested)
        if config.force_exclude:  # a path given that exclude matches (it, or a folder above it) is left out too,
            # and all of a project with its own settings that the project around excludes
            requested = [] if requested and excluded_from_here(requested[0], locator) else [
                p for p in requested if not excluded_below(p, config.root or os.curdir, config.exclude, config.root,
                                                           respect_gitignore=False)]
        if loose:
            # a package is one unit
            whole_packages = discover(sorted(packages), config.exclude, stop_at=is_own_project,
                                      respect_gitignore=config.respect_gitignore,
                                      anchor=config.root)[0] if packages else []
            members, whole = loose_project(_distinct(requested + [os.path.normpath(p) for p in whole_packages]),
                                           os.path.abspath(found), overrides, max_bytes)
            entries = loose_entries(members, os.path.abspath(found), overrides, max_bytes)
        elif alone:
            base = import_root(os.path.dirname(os.path.abspath(requested[0])) if requested else root)
            entries = [ProjectFile(p, *module_name_for(p, base), text_key(p, overrides[p], max_bytes)
                                   if p in overrides else "") for p in requested]
        else:
            top = os.path.abspath(root)
            same_walk = len(given) == 1 and not errors and os.path.abspath(given[0]) == top
            if same_walk and os.path.normpath(given[0]) != root:  # the root given spelt otherwise (absolute)
                walked = [_respelt_below(os.path.normpath(p), root, top) for p in walked]
            # an editor's buffer of a file below the root, and a file given that the walk skips, spelt as a walk from
            # the root spells them
            overrides = {_respelt_below(p, root, top): text for p, text in overrides.items()}
            # the root's own walk names every file but a buffer's the walk skips (the language server's every run: not
            # its 4,719 files respelt again on sglang)
            extra = list(overrides) if same_walk else [_respelt_below(p, root, top) for p in requested]
            if not same_walk:
                walked = project_walk(root, config)
            read_keys = cache is not None and not cache.is_empty()
            stats = file_stats([*walked, *extra], overrides, max_bytes) if read_keys else None
            if cache is not None and cache.reads_a_file():  # before its stamps are read (``known_keys``)
                cache.limit_to_sources(stats.source_bytes if stats is not None else
                                       _source_bytes([*walked, *extra], overrides))
            last = cache.last_results() if read_keys else None
            entries = project_files(root, config, extra, overrides, read_keys=read_keys, max_bytes=max_bytes,
                                    cache=cache, walked=walked,
                                    stats=stats, last=last.get("made_of") if isinstance(last, dict) else None)
    # results are saved with summaries: without any, they cannot be a hit
    if not entries:  # nothing to keep: no cache folder is made (a workspace above its checkouts has none)
        cache = None
    if cache is not None and cache.reads_a_file():  # loose files, a snippet alone: before anything of it is read
        cache.limit_to_sources(_source_bytes([entry.path for entry in entries], overrides))
    complete = all(entry.key is not None for entry in entries)
    # a text given in place of a file is in the digest by its content: an editor's buffer that is
    # the file as saved reuses the run's result; results are saved only for the files as they are,
    # but in a cache in memory (the language server's) for its buffers too
    base = _base_digest(config, max_bytes) if cache is not None else ""
    digest = _digest(base, entries) if cache is not None and complete else None
    cached = cache.results(digest) if digest is not None else None
    analysis = None
    writes: list[Callable[[], None]] = []  # a hit's or a carry's, once its findings are out (``findings_ready``)
    if cached is not None:
        try:
            all_findings = [finding_from_dict(f) for f in cached["findings"]]
            summary_errors = {p: FileError(p, str(m)) for p, m in dict(cached["errors"]).items()}
            serving = ServingMode(*[str(v) for v in cached["serving"]])
        except Exception:  # a result of any other shape (the checkout's to plant) is a miss
            cached = None
        else:
            writes.append(cache.save)  # the files' stamps it learnt, if any: the next run need not read them
    keep_results = cache is not None and (not overrides or cache.folder is None)
    if cached is None and digest is not None:
        try:
            moved = _moved_results(cache, entries, base, max_bytes, overrides)
        except Exception:  # a result of any other shape (the checkout's to plant) is a miss
            moved = None
        if moved is not None:
            all_findings, summary_errors, serving, words, project_words = moved
            cached = {"carried": True}  # not analysed: as a hit
            writes.append(cache.save)
            if keep_results:
                writes.append(functools.partial(cache.save_results, digest, all_findings, summary_errors, serving,
                                                _made_of(base, root, entries, words, project_words)))
    if cached is None:
        with collector_paused():
            try:
                summaries, summary_errors, analysis, all_findings, library = _summarise_and_analyse(
                    entries, config, jobs, cache, max_bytes, overrides, progress, use_cache)
            except (KeyError, TypeError, AttributeError, IndexError, ValueError):
                if cache is None or not cache.reused:
                    raise  # from fresh summaries only: a bug of ours
                # a cached summary garbled deeper than `SummaryCache.get` checks: once more, all afresh
                cache.forget()
                summaries, summary_errors, analysis, all_findings, library = _summarise_and_analyse(
                    entries, config, jobs, cache, max_bytes, overrides, progress, use_cache)
        serving = analysis.serving
        if keep_results:
            named, kept = _project_words(cache, entries, summaries, cache.last_results(), base)
            cache.save_results(_digest(base, entries), all_findings, summary_errors, serving,
                               _made_of(base, root, entries, library_words(library), named), kept)
    try:  # a hit's or a carry's writes run whatever happens below, once ``findings_ready`` has the findings
        # the project's paths are spelt from its root; report them as the user spelt the request
        as_requested = _RequestedSpelling(requested)
        findings = [dataclasses.replace(f, path=as_requested[f.path]) for f in all_findings if f.path in as_requested]
        findings = [f for f in findings if not config.ignored_in(f.path, f.code)]
        if cached is not None:  # only the files with an error need a look
            errors += [FileError(as_requested[p], e.message) for p, e in summary_errors.items() if p in as_requested]
        else:
            summarised = {os.path.abspath(p) for p in summaries}
            problems = {os.path.abspath(p): e for p, e in summary_errors.items()}
            for path in requested:
                absolute = os.path.abspath(path)
                if absolute in problems:
                    errors.append(FileError(path, problems[absolute].message))
                elif absolute not in summarised and path not in given_overrides:
                    source = read_source(path, max_bytes)  # not in the project walk (a FIFO, an excluded file)
                    if isinstance(source, FileError):
                        errors.append(source)
        if apply_noqa and findings:
            from .noqa import without_suppressed  # not for flake8, which applies `# noqa` itself

            findings = without_suppressed(findings, text_reader(given_overrides))
        errors.sort(key=lambda e: e.path)
        run = ProjectRun(root, requested, findings, errors, serving, analysis, whole_project=whole,
                         loose_members=members, loose_folder=os.path.abspath(found) if loose else None,
                         cache_folder=cache.folder if cache is not None else None, summary_cache=cache)
        if findings_ready is not None:
            findings_ready(run)
    finally:
        for write in writes:
            write()
    return run
