"""What the fixes are made from, besides each file's text: findings that no cache of the checkout steered,
the names other modules import from each file (a fix keeps those imports), and one path per file."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Collection, Iterable, Sequence

from .engine import ProjectRun, analyse, project_files
from .gc_pause import collector_paused
from .loose_files import loose_entries
from .model import FileError
from .noqa import without_suppressed
from .options import Config
from .sources import MAX_FILE_BYTES, read_source, text_reader
from .summary_cache import SummaryCache, encode_json
from .summary_jobs import collect_summaries, summarize_source
from .warn import warn


def file_identity(path: str) -> tuple:
    """The same for every path of one file (``a.py`` and ``./a.py``, a symlink and its target, hard links)."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return st.st_dev, st.st_ino


def first_path_per_file(paths: Iterable[str], base: str = "") -> dict[tuple, str]:
    """``file_identity`` -> the first of ``paths`` naming that file (relative ones taken from ``base``).
    A file is fixed once, under that path: fixed twice, the second fix would apply the first's
    positions to its result."""
    first: dict[tuple, str] = {}
    for path in paths:
        first.setdefault(file_identity(os.path.join(base, path)), path)
    return first


def run_to_fix_from(run: ProjectRun, config: Config, analyse_afresh: Callable[[], ProjectRun], jobs: int = 1,
                    max_bytes: int = MAX_FILE_BYTES) -> ProjectRun:
    """``run`` with findings a cache cannot have steered, for the fixes to write: the caches are the
    checkout's, and the cached results or a summary planted in them (their keys are hashes of public
    bytes) would otherwise choose which code is rewritten.

    Where the findings to fix came from the results cache, they are made again from the summaries; the
    summary of each file to fix is made again from its text, and where one differs from the summary the
    analysis used, no cache is trusted: ``analyse_afresh`` runs the project with none (and a warning says
    so). The summaries of the files not written are the cache's, by the hash of their content. A run
    with nothing to fix, or that used no cache, is returned as it is (nothing is written from a cache).
    """
    if run.cache_folder is None or not any(f.fixes for f in run.findings):
        return run
    if run.analysis is None:
        run = _analysed_again(run, config, jobs, max_bytes)
    if _summaries_hold(run, {f.path for f in run.findings if f.fixes}, max_bytes):
        return run
    warn(f"the cache in {run.cache_folder} does not match the files it describes: fixing from a fresh analysis")
    return analyse_afresh()


def _analysed_again(run: ProjectRun, config: Config, jobs: int, max_bytes: int) -> ProjectRun:
    """``run`` (its findings read from the results cache) with the analysis, and the findings of the rules
    that fix (GM1xx), made again from the summaries (the cache's, by the hash of each file's content) and
    reported as ``lint_project`` does. The other findings are the cache's, for the report, with no fix
    (GM2xx findings are reported, not rewritten: their rules, half the analysis' time on sglang, are not
    run again)."""
    from .rules import ALL_RULES

    with collector_paused():
        analysis = analyse(_summaries_again(run, config, jobs, max_bytes), config)
        found = sorted({f for code, rule in ALL_RULES.items() if code.startswith(FIXING_RULES)
                        and config.is_selected(code, rule.DEFAULT_ENABLED) for f in rule().check(analysis)})
    given = {os.path.abspath(p): p for p in run.files}
    findings = [dataclasses.replace(f, path=given[os.path.abspath(f.path)]) for f in found
                if os.path.abspath(f.path) in given]
    findings = without_suppressed([f for f in findings if not config.ignored_in(f.path, f.code)], text_reader({}))
    reported = [dataclasses.replace(f, fixes=(), fixable="") for f in run.findings
                if not f.code.startswith(FIXING_RULES)]
    return dataclasses.replace(run, findings=sorted(findings + reported), analysis=analysis)


# The rules whose findings carry fixes (GM2xx findings are reported, not rewritten).
FIXING_RULES = "GM1"


def _summaries_again(run: ProjectRun, config: Config, jobs: int, max_bytes: int) -> dict[str, dict]:
    """path -> summary of each module of ``run``'s project (whose findings came from the results cache): from
    its cache, by the hash of each file's content, or made again. The cache is read, never written."""
    entries = loose_entries(run.loose_members, run.loose_folder, {}, max_bytes) if run.loose_members is not None \
        else project_files(run.root, config, run.files, max_bytes=max_bytes)
    cache = run.summary_cache if run.summary_cache is not None else SummaryCache(run.cache_folder, run.root)
    cache.limit_to_sources(sum(_size(entry.path) for entry in entries))  # as ``lint_project`` reads it
    with collector_paused():
        return collect_summaries(entries, jobs, cache, max_bytes, prune=False)[0]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0


def _summaries_hold(run: ProjectRun, paths: Collection[str], max_bytes: int) -> bool:
    """Whether the summary ``run``'s analysis has of each of ``paths`` is the one its text gives now."""
    used: dict[str, dict] = {}
    for summary in run.analysis.project.modules.values():
        used.setdefault(os.path.abspath(summary["path"]), summary)
    for path in paths:
        summary = used.get(os.path.abspath(path))
        source = read_source(path, max_bytes)
        if summary is None or isinstance(source, FileError):
            return False  # a finding in a file the analysis has no summary of, or one that cannot be read
        module = summary["module"].partition("#")[0]  # ``Project`` names a second module of one name `m#2`
        fresh = summarize_source(dataclasses.replace(source, path=summary["path"]), module, summary["package"])
        if isinstance(fresh, FileError) or _as_json(fresh) != _as_json({**summary, "module": module}):
            return False
    return True


def _as_json(summary: dict):
    """A summary as the cache holds it (lists for tuples), to compare one made here with a cached one."""
    return json.loads(encode_json(summary))


def names_imported_elsewhere(run, config: Config, jobs: int = 1, max_bytes: int = MAX_FILE_BYTES) -> dict:
    """``file_identity`` -> the names other modules of ``run``'s project import from that file's module, or None
    where they may use any (an ``__init__.py``; a module imported whole or with ``*``): a fix keeps those imports."""
    summaries: Iterable[dict]
    if not run.whole_project:  # who imports the files is not known, so every import stays
        return {}
    if run.analysis is not None:
        summaries = run.analysis.project.modules.values()
    else:  # the findings came from the results cache; the summaries are cached too
        summaries = _summaries_again(run, config, jobs, max_bytes).values()
    try:
        with collector_paused():  # sets over every import beside millions of live summary objects
            return _imported_names(list(summaries))
    except (KeyError, TypeError, AttributeError, ValueError):  # a cached summary garbled (the cache is the checkout's)
        return {}  # not known: every import stays


def names_imported_across(runs: Sequence[tuple], jobs: int = 1, max_bytes: int = MAX_FILE_BYTES) -> dict:
    """``names_imported_elsewhere`` of several (run, config) pairs, merged by file."""
    imported: dict = {}
    for run, config in runs:
        for identity, names in names_imported_elsewhere(run, config, jobs, max_bytes).items():
            held = imported.get(identity, frozenset())
            imported[identity] = None if names is None or held is None else names | held
    return imported


def _imported_names(summaries: list[dict]) -> dict:
    children: dict[str, set[tuple[str, str]]] = {}  # dotted name -> (name under it, importing module)
    whole: dict[str, set[str]] = {}  # module or package bound by an import -> the importing modules
    for summary in summaries:
        importer = summary["module"]
        for fn in summary["functions"].values():
            for full in fn["imports"].values():
                parts = full.split(".")
                whole.setdefault(full, set()).add(importer)
                for i in range(1, len(parts)):
                    children.setdefault(".".join(parts[:i]), set()).add((parts[i], importer))
        for source in summary["star"]:
            whole.setdefault(source, set()).add(importer)
    out: dict = {}
    for summary in summaries:
        module = summary["module"]
        parts = module.split(".")
        # `import a.b` binds `a`: every module under it may be reached as an attribute
        reached = summary["package"] or any(whole.get(".".join(parts[:i]), set()) - {module}
                                            for i in range(1, len(parts) + 1))
        identity = file_identity(summary["path"])
        if reached or (identity in out and out[identity] is None):
            out[identity] = None
        else:
            names = {name for name, importer in children.get(module, ()) if importer != module}
            out[identity] = frozenset(names | out.get(identity, frozenset()))
    return out
