"""Lint a project: find its root and files, summarise every module (cached), analyse, run the rules.

Shared by the CLI, the codemod, the flake8 plugin and the libcst command. The analysis always
covers the whole project around the given paths (its root is the nearest folder above them
with one of ``PROJECT_MARKERS``); findings are reported for the given files only.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Collection, Iterable, Iterator, Optional, Sequence, Union

from . import __version__
from .options import Config, ConfigError, declares_config, load_config
from .files import (MAX_FILE_BYTES, HandOver, SourceFile, collector_paused, discover, excluded_below,
                    in_forked_child, read_regular_bytes, read_source, run_jobs, source_from_text, text_reader, warn,
                    within)
from .gitignore import forget as forget_ignore_files, rules_at
from .model import FileError, Finding, Fix
from .noqa import without_suppressed
from .summary import SCHEMA, import_root, module_name_for, parse_quietly, relative_import_base, summarize


def _tool_fingerprint() -> str:
    """The tool's own files (size, mtime): an edited checkout of the tool never reuses stale results."""
    folder = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.blake2b(digest_size=8)
    for path in discover([folder], ("__pycache__",), respect_gitignore=False)[0]:
        st = os.stat(path)
        h.update(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


# The interpreter too: its `ast` decides what parses (tox runs several on one checkout).
CACHE_FORMAT = (f"gradmode-summaries/{SCHEMA}/{__version__}/{_tool_fingerprint()}/"
                f"{sys.implementation.name}-{sys.version_info.major}.{sys.version_info.minor}")


# What makes a folder a project's root (black's and setuptools' markers as well as ruff's).
PROJECT_MARKERS = ("pyproject.toml", ".git", ".hg", "setup.py", "setup.cfg")


def locate_project(paths: Sequence[str]) -> tuple[str, bool]:
    """The nearest folder above the first path holding one of ``PROJECT_MARKERS``; without one, the
    outermost folder above it holding an ``__init__.py`` (the top package), else the path's folder;
    and whether it is a project (a marker or a package was found)."""
    first = os.path.abspath(paths[0]) if paths else os.getcwd()
    start = first if os.path.isdir(first) else os.path.dirname(first)
    current = start
    while True:
        if any(os.path.exists(os.path.join(current, marker)) for marker in PROJECT_MARKERS):
            return current, True
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    package = None
    folder = start
    while True:  # by dirname: Path.parents is quadratic in a tree 1,000 deep
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            package = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return (package, True) if package is not None else (start, False)


class ProjectLocator:
    """Where paths belong, with ``locate_project`` run once per folder (pre-commit passes thousands of
    files that share a few folders)."""

    def __init__(self) -> None:
        self._by_folder: dict[str, tuple[str, bool]] = {}
        self._excluded: dict[str, bool] = {}

    def locate(self, path: str) -> tuple[str, bool]:
        folder = os.path.abspath(path) if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        if folder not in self._by_folder:
            self._by_folder[folder] = locate_project([folder])
        return self._by_folder[folder]

    def outermost(self, root: str) -> str:
        """The outermost project with a marker holding the one at ``root``, up to the first that is a
        project of its own (``is_own_project``): a pyproject.toml that only packages a folder of a
        repository does not cut it off from its callers, while a project with its own settings (a
        tree downloaded into a repository, a service of a monorepo) or a checkout is analysed on its
        own, and the walks of the projects around it leave it out."""
        while not is_own_project(root):
            parent = os.path.dirname(root)
            if parent == root:
                return root
            above, inside = self.locate(parent)
            if not inside or package_only(above):
                return root
            root = above
        return root

    def excluded_by_the_project_around(self, project: str) -> bool:
        """Whether the walk of a project around ``project`` (a project of its own) leaves it out by its
        ``exclude`` or ``.gitignore``, or leaves out a project around it: what flake8 and the libcst
        command are handed, a walk from the folder the user gave would not reach. A loop outwards, not
        a recursion: projects may nest thousands deep."""
        chain: list[tuple[str, Optional[str], bool]] = []  # (project, the one around it, left out by it)
        current: Optional[str] = project
        while current is not None and current not in self._excluded:
            parent = os.path.dirname(current)
            outer = self.marked_root(parent) if parent != current else None
            directly = outer is not None and _excluded_by_settings_at(parent, current, outer)
            chain.append((current, outer, directly))
            current = None if directly else outer
        for inner, outer, directly in reversed(chain):
            self._excluded[inner] = outer is not None and (directly or self._excluded[outer])
        return self._excluded[project]

    def walk_reaches(self, project: str, start: str) -> bool:
        """Whether the walk of a folder ``start`` above ``project`` (a project of its own) reaches it: no
        folder on the way is excluded by the settings of the project around it, nor, where ``start``
        is above that project too, by the settings of the projects around that one (a loop outwards)."""
        while True:
            parent = os.path.dirname(project)
            outer = self.marked_root(parent) if parent != project else None
            if outer is not None and outer != start and within(outer, start):
                if _excluded_by_settings_at(parent, project, outer):
                    return False
                project = outer
                continue
            return not _excluded_by_settings_at(parent, project, start)

    def reaches(self, project: str, given: str) -> bool:
        """Whether a run given the absolute path ``given`` takes in ``project`` (one with settings of its
        own): ``given`` is in it, or is a folder above it whose walk reaches it (as the CLI walks)."""
        return within(given, project) or (within(project, given) and os.path.isdir(given)
                                          and self.walk_reaches(project, given))

    def marked_root(self, path: str) -> Optional[str]:
        """The root a path in a project with a marker is analysed from (``outermost``); None for a
        path outside any such project."""
        root, inside = self.locate(path)
        return self.outermost(root) if inside and not package_only(root) else None


def _excluded_by_settings_at(folder: str, project: str, walk_from: str) -> bool:
    """Whether the settings found from ``folder`` (those of the project around ``project``) make a walk
    from ``walk_from`` leave ``project`` out; a broken config excludes nothing (its project reports it)."""
    try:
        around = load_config(start=Path(folder))[0]
    except ConfigError:
        return False
    return excluded_below(project, walk_from, around.exclude, around.root, around.respect_gitignore)


def excluded_from_here(path: str, locator: ProjectLocator) -> bool:
    """force-exclude: whether ``path`` is in a project with settings of its own that the project around
    excludes, run from where a walk does not reach it (run from inside it, or from a folder whose walk
    reaches it, it is the project worked on, as a submodule's own pre-commit run is)."""
    project = locator.marked_root(path)
    return (project is not None and is_own_project(project) and locator.excluded_by_the_project_around(project)
            and not locator.reaches(project, os.path.abspath(os.curdir)))


# A checkout's root: settings above it may apply to it (as in ruff), but its root and cache stay inside.
CHECKOUT_MARKERS = (".git", ".hg")


def is_own_project(folder: str, names: Optional[Collection[str]] = None) -> bool:
    """Whether ``folder`` is the root of a project of its own, where the walk of a project around it
    stops (``discover``'s ``stop_at``; ``names``: its entries' names) and the climb to the outermost
    project (``ProjectLocator.outermost``) ends: a checkout's root (``CHECKOUT_MARKERS``, a folder or,
    in a submodule or a worktree, a file), or a folder with settings of its own (``_declares_own_settings``).
    A workspace's or a home folder's settings thus never pull a checkout's analysis, or its cache, out of
    it, nor join sibling checkouts into one project."""
    if names is not None:
        if any(marker in names for marker in CHECKOUT_MARKERS):
            return True
    elif any(os.path.lexists(os.path.join(folder, marker)) for marker in CHECKOUT_MARKERS):
        return True
    return _declares_own_settings(folder, names)


# The name the front ends (cli, flake8_plugin) know it by, from when settings were the only mark.
has_own_settings = is_own_project


def _declares_own_settings(folder: str, names: Optional[Collection[str]] = None) -> bool:
    """Whether ``folder`` holds a pyproject.toml with [tool.gradmode] (or one that cannot be read,
    whose error its own run reports)."""
    if names is not None and "pyproject.toml" not in names:
        return False
    try:
        return declares_config(Path(folder))
    except ConfigError:
        return True


def project_groups(paths: Sequence[str], locator: Optional[ProjectLocator] = None) -> list[list[str]]:
    """``paths`` split by the project each belongs to (in order of first appearance), each group to be
    linted on its own, the folder that names it first:
    - a path inside a folder given is linted with the outermost such folder (its walk reaches it),
      unless it is in a project with settings of its own inside that folder (the walk stops there);
    - else, in a project with a marker: the outermost project with a marker holding it
      (``ProjectLocator.outermost``, which ``lint_project`` analyses from);
    - else (a loose file, or a package with no marker above it, which a script beside it imports):
      the folder holding it, with the other paths there.
    """
    locator = locator or ProjectLocator()
    locate = locator.locate

    def own_key(path: str) -> tuple[str, str]:
        marked = locator.marked_root(path)
        if marked is not None:
            return "project", marked
        root, inside = locate(path)
        if os.path.isdir(path) and not inside:
            return "folder", os.path.abspath(path)
        return "loose", os.path.dirname(root) if inside else root

    absolute = [os.path.abspath(p) for p in paths]
    folders = sorted({a for p, a in zip(paths, absolute) if os.path.isdir(p)}, key=len)
    groups: dict[tuple[str, str], list[str]] = {}
    for path, full in zip(paths, absolute):
        holding = next((f for f in folders if within(full, f)), None)
        if holding is not None:
            own = locator.marked_root(path)
            if own is not None and own != holding and within(own, holding) and is_own_project(own):
                holding = None
        groups.setdefault(own_key(holding if holding is not None else path), []).append(path)
    out = []
    for (kind, folder), members in groups.items():
        if kind == "folder":  # the folder first: lint_project takes its root from the first path
            members.sort(key=lambda p: os.path.abspath(p) != folder)
        elif kind == "loose":  # loose files first: a package beside them is what they import
            members.sort(key=lambda p: locate(p)[1])
        out.append(members)
    return out


def package_only(root: str) -> bool:
    """A root found as a top package, with no project marker (``locate_project``)."""
    return (os.path.isfile(os.path.join(root, "__init__.py"))
            and not any(os.path.exists(os.path.join(root, marker)) for marker in PROJECT_MARKERS))


# At most this many files join loose files' project; at most this many files and bytes of their
# folder are read to look for importers (a loose file may sit in /tmp or a home folder).
LOOSE_IMPORTS_LIMIT = 1000
LOOSE_SCAN_LIMIT = 2000
LOOSE_SCAN_BYTES = 16 << 20


def _loose_project(paths: list[str], folder: str, overrides: dict[str, str], max_bytes: int
                   ) -> tuple[list[str], bool]:
    """The modules analysed with loose files (and packages without a marker) of ``folder``, and
    whether every file there that may import one of them is among those (else who imports them is
    not known). Python puts a script's folder first on ``sys.path``: the project is ``paths``, the
    folder's scripts that import one of them, and what all of these import from the folder,
    transitively."""
    relative = not os.path.isabs(paths[0]) if paths else True
    out = list(paths)
    seen = {os.path.abspath(p) for p in out}

    def add(candidate: str) -> bool:
        if os.path.abspath(candidate) in seen or not os.path.isfile(candidate):
            return True
        if len(out) >= LOOSE_IMPORTS_LIMIT:
            return False
        seen.add(os.path.abspath(candidate))
        out.append(os.path.relpath(candidate) if relative else candidate)
        return True

    names = {module_name_for(p, folder)[0].split(".")[0] for p in paths}
    importers, complete = _scripts_importing(folder, names, seen, max_bytes)
    for candidate in importers:
        complete &= add(candidate)
    # a script one folder up may import these as modules of a namespace package (`tools.w`)
    parent, name = os.path.dirname(folder), os.path.basename(folder)
    if complete and parent != folder and not os.path.isfile(os.path.join(folder, "__init__.py")):
        above, known = _scripts_importing(parent, {name}, set(), max_bytes)
        complete = known and not above
    index = 0
    while index < len(out):
        path = out[index]
        index += 1
        source = source_from_text(path, overrides[path]) if path in overrides else read_source(path, max_bytes)
        if isinstance(source, FileError):
            continue
        for name in _imported_names(source, folder):
            parts = name.split(".")
            for n in range(1, len(parts) + 1):
                base = os.path.join(folder, *parts[:n])
                for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                    if not add(candidate):
                        return out, False
    return out, complete


def _scripts_importing(folder: str, names: set[str], skip: set[str], max_bytes: int) -> tuple[list[str], bool]:
    """The ``.py`` files of ``folder`` (not below it) that import a module named in ``names`` from
    there (an import line must name one before the file is parsed), and whether all were looked at
    (at most ``LOOSE_SCAN_LIMIT`` files and ``LOOSE_SCAN_BYTES``; one that cannot be read may be one)."""
    try:
        scanned = sorted(e.path for e in os.scandir(folder) if e.name.endswith(".py"))
    except OSError:
        return [], False
    if not names or len(scanned) > LOOSE_SCAN_LIMIT:
        return [], not scanned
    importing = re.compile(r"^[ \t]*(?:from[ \t]+(?:%s)\b|import[ \t][^\n]*\b(?:%s)\b)" % (
        "|".join(map(re.escape, names)), "|".join(map(re.escape, names))), re.MULTILINE)
    found: list[str] = []
    budget = LOOSE_SCAN_BYTES
    for candidate in scanned:
        if os.path.abspath(candidate) in skip:
            continue
        source = read_source(candidate, max_bytes)
        if isinstance(source, FileError):
            if os.path.isfile(candidate):
                return found, False
            continue
        budget -= len(source.raw)
        if budget < 0:
            return found, False
        if importing.search(source.text) and names & {n.split(".", 1)[0] for n in _imported_names(source, folder)}:
            found.append(candidate)
    return found, True


def loose_entries(members: list[str], folder: str, overrides: dict[str, str], max_bytes: int) -> list[_Entry]:
    """The entries of a loose project (``_loose_project``), module names counted from ``folder``."""
    return [_Entry(p, *module_name_for(p, folder), text_key(p, overrides[p], max_bytes) if p in overrides
                   else content_key(p, max_bytes)) for p in members]


def _imported_names(source: SourceFile, folder: str) -> list[str]:
    """Every module name a file imports, absolute (``from a.b import c``: ``a.b`` and ``a.b.c``;
    relative ones resolved inside its package, its module name counted from ``folder``)."""
    try:
        tree = parse_quietly(source.text, source.path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # summarising it reports why
    module, is_package = module_name_for(source.path, folder)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = relative_import_base(module, is_package, node.level)
                if not base:
                    continue  # a script's relative import fails when it runs: nothing to follow
                head = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                head = node.module
            else:
                continue
            names.extend([head, *(f"{head}.{alias.name}" for alias in node.names)])
    return names


def _display_root(root: str, paths: Sequence[str]) -> str:
    """The root spelt as the user spells paths: relative when they are, so findings keep their form."""
    if paths and all(not os.path.isabs(p) for p in paths):
        relative = os.path.relpath(root)
        return relative
    return root


def file_key(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def text_key(path: str, text: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The key of ``text`` given in place of the file at ``path`` (an editor's buffer): the file's own
    key when the file holds that very text, so that a buffer as saved reuses the run's result; else a
    key no file's bytes can have (a buffer's UTF-8 may be a file's bytes under another coding cookie)."""
    on_disk = read_source(path, max_bytes)
    if not isinstance(on_disk, FileError) and on_disk.text == text:
        return file_key(on_disk.raw)
    return "text-" + file_key(text.encode("utf-8", "surrogatepass"))


class SummaryCache:
    """Summaries by path and content hash, as JSON (never pickle: a checkout may be hostile).

    ``summaries.json`` holds them all. A run that changes only a few writes just those to
    ``summaries-changes.json``, which names the ``summaries.json`` it amends (rewriting 50 MB of
    summaries after a one-line edit of sglang took 1 s of CPU and slowed the analysis beside it);
    past ``CHANGES_LIMIT`` changed files, or 5% of them, the whole file is written again and the
    changes file is removed once it is. An unreadable, corrupt or foreign file is empty, changes to
    another ``summaries.json`` are ignored, and a stale entry (other content) is a miss.
    """

    # Changed files a run may add to summaries-changes.json: at least this many, or 5% of the files.
    CHANGES_LIMIT = 64
    # Fewer summaries to encode than this are written in process: a fork cost more (400 projects of
    # 6 files each: 1.5 s of the run went to forking and waiting for the writers).
    BACKGROUND_MIN_ENTRIES = 256

    def __init__(self, folder: Optional[Path]) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.path = self.folder / "summaries.json" if self.folder is not None else None
        self.changes_path = self.folder / "summaries-changes.json" if self.folder is not None else None
        self._entries: Optional[dict[str, list]] = None
        self._base: Optional[str] = None  # the id of the summaries.json read
        self._changed: set[str] = set()  # paths whose entry differs from that file's
        self._texts: dict[str, str] = {}  # path -> its summary as JSON text, where a worker encoded it
        self._dirty = False
        self.reused = 0  # summaries this run took from the cache
        self.max_file_bytes = MAX_CACHE_BYTES  # a larger file is not read (``limit_to_sources``)

    def limit_to_sources(self, source_bytes: int) -> None:
        """Read no file larger than what the project's ``source_bytes`` of source can produce: a larger
        one is no cache of this project (a checkout may ship a sparse file of 1 GiB: read whole, it cost
        2.4 GB and 26 s on a 2-file project), so it is absent, and written again."""
        self.max_file_bytes = min(MAX_CACHE_BYTES, CACHE_BYTES_PER_SOURCE_BYTE * source_bytes + CACHE_SLACK_BYTES)

    def _load(self) -> dict[str, list]:
        if self._entries is None:
            data = _read_json(self.path, self.max_file_bytes) if self.path is not None else {}
            if not isinstance(data.get("entries"), dict):
                data = {"entries": {}}
            self._entries = data["entries"]
            self._base = data.get("id") if isinstance(data.get("id"), str) else None
            if self._base is not None:
                changes = _read_json(self.changes_path, self.max_file_bytes)
                if changes.get("base") == self._base and isinstance(changes.get("entries"), dict):
                    for path, entry in changes["entries"].items():
                        if entry is None:
                            self._entries.pop(path, None)
                        else:
                            self._entries[path] = entry
                        self._changed.add(path)
        return self._entries

    def results(self, digest: str) -> Optional[dict]:
        """The findings of a run over exactly these files, config and tool version, if cached."""
        if self.folder is None:
            return None
        data = _read_json(self.folder / "results.json", self.max_file_bytes)
        return data if data.get("digest") == digest and isinstance(data.get("findings"), list) else None

    def save_results(self, digest: str, findings: list[Finding], errors: dict[str, FileError], serving) -> None:
        if self.folder is None:
            return
        data = {"format": CACHE_FORMAT, "digest": digest, "findings": [f.to_dict() for f in findings],
                "errors": {p: e.message for p, e in errors.items()}, "serving": list(serving)}
        self._write(self.folder / "results.json", data)

    def is_empty(self) -> bool:
        """Nothing saved yet (without reading it: the summaries are tens of MB on a big tree)."""
        return self.folder is None or not (self.path.is_file() or (self.folder / "results.json").is_file())

    def get(self, path: str, key: str) -> Optional[dict]:
        entry = self._load().get(path)
        if (isinstance(entry, list) and len(entry) == 2 and entry[0] == key and isinstance(entry[1], dict)
                and entry[1].get("schema") == SCHEMA and entry[1].get("path") == path and _well_shaped(entry[1])):
            return entry[1]
        return None

    def forget(self) -> None:
        """Drop every entry read: the run summarises each file afresh and rewrites the whole file."""
        self._entries, self._base, self._changed, self.reused = {}, None, set(), 0
        self._texts = {}

    def put(self, path: str, key: str, summary: dict, text: Optional[str] = None) -> None:
        """Record ``summary``; ``text``, its JSON encoding, where it was made already."""
        self._load()[path] = [key, summary]
        if text is not None:
            self._texts[path] = text
        else:
            self._texts.pop(path, None)
        self._changed.add(path)
        self._dirty = True

    def prune(self, live: Iterable[str]) -> None:
        live = set(live)
        entries = self._load()
        for path in [p for p in entries if p not in live]:
            del entries[path]
            self._texts.pop(path, None)
            self._changed.add(path)
            self._dirty = True

    def save(self, background: bool = False) -> Callable[[], None]:
        """Write the summaries if any changed; returns the wait for the write. A few changes go to
        summaries-changes.json. Otherwise they are all written: the summaries workers handed back
        are JSON text already (``put``'s ``text``), and the rest are encoded here or, with
        ``background`` and many of them, by a forked child while this process analyses (on sglang
        0.5.15 encoding them all takes 0.7 s, as long as the analysis; the child's copy-on-write
        pages slowed the analysis beside it by a third)."""
        if self.path is None or not self._dirty:
            return _nothing
        self._dirty = False
        entries = self._load()
        if self._base is not None and len(self._changed) <= max(self.CHANGES_LIMIT, len(entries) // 20):
            self._write(self.changes_path, {"format": CACHE_FORMAT, "base": self._base,
                                            "entries": {p: entries.get(p) for p in sorted(self._changed)}})
            return _nothing
        self._base, self._changed = os.urandom(8).hex(), set()
        texts = self._texts
        to_encode = len(entries) - len(texts)
        background = background and to_encode > 0 and to_encode >= self.BACKGROUND_MIN_ENTRIES
        wait = in_forked_child(lambda: self._write_all(entries, texts)) if background else None
        if wait is None:
            self._write_all(entries, texts)
        self._texts = {}  # written (46 MB on sglang 0.5.15): they no longer match what a later change puts
        return wait or _nothing

    def _write_all(self, entries: dict, texts: dict[str, str]) -> None:
        def pieces() -> Iterator[str]:
            yield f'{{"format":{encode_json(CACHE_FORMAT)},"id":{encode_json(self._base)},"entries":{{'
            for n, (path, entry) in enumerate(entries.items()):
                text = texts.get(path)
                value = encode_json(entry) if text is None else f"[{encode_json(entry[0])},{text}]"
                yield f'{"," if n else ""}{encode_json(path)}:{value}'
            yield "}}"

        # The changes name the summaries.json replaced: once it is, they are dead. Until then (a
        # write that fails) they still amend the file on disk.
        if self._write(self.path, pieces()):
            try:
                self.changes_path.unlink()
            except OSError:
                pass

    def _write(self, target: Path, data: Union[dict, Iterator[str]]) -> bool:
        """Write ``data`` (or the JSON text it yields) to ``target`` whole or not at all; whether it was written."""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            ignore_in_git(target.parent)
            pieces = [encode_json(data)] if isinstance(data, dict) else data
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-cache-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.writelines(pieces)
                os.replace(tmp, target)
                return True
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as exc:  # a read-only checkout still lints
            warn(f"cannot write cache {target}: {exc.strerror or exc}")
            return False
        except (ValueError, RecursionError) as exc:  # a summary JSON cannot hold: the run goes on without a cache
            warn(f"cannot write cache {target}: {type(exc).__name__}: {exc}")
            return False


def encode_json(data) -> str:
    """Our JSON: one C-encoder call (json.dump is ~10x slower); the data is ours and acyclic, and not
    tracking every list for cycles takes a quarter off (sglang 0.5.15: 0.66 s against 0.87 s)."""
    return json.dumps(data, separators=(",", ":"), check_circular=False)


def cache_folder(root: str, cache_dir: Optional[Path], loose: bool = False) -> Optional[Path]:
    """Where the cache of the project at ``root`` lives: a folder of its own in ``cache_dir`` (named
    by the root's path, as ruff does: projects sharing one cache folder prune each other's
    summaries otherwise), else ``project_cache_folder``; loose files have none of their own."""
    if cache_dir is not None:
        name = hashlib.sha256(os.path.abspath(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return Path(cache_dir) / name
    return None if loose else project_cache_folder(root)


def ignore_in_git(folder: Path) -> None:
    """Give a cache folder a ``.gitignore`` of ``*`` (as ruff does), unless it has one; raises OSError."""
    try:  # O_EXCL: never through a link there, dangling or not
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
    except FileExistsError:
        return  # ours, the user's or a link: left as it is
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# Created by gradmode-lint\n*\n")


def project_cache_folder(root: str) -> Optional[Path]:
    """A project's own cache folder, ``<root>/.gradmode_cache``; None (with a warning, once) where that
    is a symbolic link (a checkout may point it anywhere) or a folder git tracks (a cache the checkout
    ships, made to pass for ours): nothing is read or written there."""
    folder = Path(root) / ".gradmode_cache"
    if folder.is_symlink():
        why = "it is a symbolic link"
    elif folder.is_dir() and _tracked_by_git(folder):
        why = "git tracks it (a cache shipped with the checkout is not trusted)"
    else:
        return folder
    if str(folder) not in _refused_caches_reported:
        _refused_caches_reported.add(str(folder))
        warn(f"not using cache {folder}: {why}")
    return None


_refused_caches_reported: set[str] = set()
_tracked: dict[str, bool] = {}  # folder -> _tracked_by_git(folder), once per process


def _tracked_by_git(folder: Path) -> bool:
    """Whether git tracks anything in ``folder``: ``git ls-files --error-unmatch`` (about 5 ms), asked
    only inside a git checkout and once per process; False where git is missing or cannot tell (a
    repository of another user's, which git refuses). The checkout's own configuration cannot make
    git run a command of its (``core.fsmonitor`` is set off on the command line, which wins)."""
    key = str(folder)
    if key not in _tracked:
        git = shutil.which("git")
        _tracked[key] = False
        if git is not None and rules_at(key) is not None:  # rules_at: None outside any checkout
            env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
            env["GIT_OPTIONAL_LOCKS"] = "0"
            try:
                _tracked[key] = subprocess.run(
                    [git, "--literal-pathspecs", "-c", "core.fsmonitor=false", "ls-files", "--error-unmatch",
                     "--", folder.name], cwd=folder.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, env=env, timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                pass
    return _tracked[key]


def _nothing() -> None:
    pass


def _well_shaped(summary: dict) -> bool:
    """Whether a cached summary's fields have the types a fresh one's have. The records inside are not
    checked (too slow on a 50 MB cache): an analysis that fails on one is rerun without the cache."""
    return (isinstance(summary.get("module"), str) and isinstance(summary.get("package"), bool)
            and isinstance(summary.get("star"), list)
            and all(isinstance(summary.get(field), dict) and all(isinstance(v, dict) for v in summary[field].values())
                    for field in ("functions", "classes")))


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# A cache file larger than this is no cache of ours (sglang's summaries are about 50 MB).
MAX_CACHE_BYTES = 1 << 30
# What a project's cache files may hold per byte of its source (summaries took 1.2 bytes a byte on
# torch's nn and _dynamo: 8.2 MB for 6.7 MB), and beyond that (findings and their chains).
CACHE_BYTES_PER_SOURCE_BYTE = 32
CACHE_SLACK_BYTES = 16 << 20


def _source_bytes(entries: list[_Entry], overrides: dict[str, str]) -> int:
    """The size of the project's source: a stat per file (sglang's 2,000 files: a few ms)."""
    total = 0
    for entry in entries:
        if entry.path in overrides:
            total += len(overrides[entry.path])
            continue
        try:
            total += os.stat(entry.path).st_size
        except (OSError, ValueError):
            pass
    return total


def _read_json(path: Path, max_bytes: int = MAX_CACHE_BYTES) -> dict:
    """A cache file's data; anything unreadable, corrupt or foreign is empty (a miss, never an error).

    The cache folder is the checkout's: only a regular file is read, and not through a link, since
    a FIFO there would block the run and a link to /dev/zero would never end.
    """
    try:
        raw = read_regular_bytes(path, max_bytes, follow_links=False)
        with collector_paused():  # tens of MB of summaries: with it on, decoding took 4.6 s, not 0.8 s
            data = json.loads(raw)
    except (OSError, ValueError, RecursionError, MemoryError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else {}


def finding_from_dict(data: dict) -> Finding:
    fixes = tuple(Fix(str(f["action"]), _position(f["at"]), bool(f["safe"]), tuple(_position(i) for i in f["items"]))
                  for f in data.get("fixes", ()))
    return Finding(str(data["path"]), int(data["line"]), int(data["col"]), str(data["code"]), str(data["message"]),
                   str(data["severity"]), str(data["fixable"]), tuple(str(n) for n in data.get("notes", ())), fixes)


def _position(value) -> tuple[int, int]:
    line, col = value
    return int(line), int(col)


def summarize_source(source: SourceFile, module: str, is_package: bool) -> Union[dict, FileError]:
    """The summary of one decoded file, or the one-line reason it has none."""
    try:
        return summarize(source.text, source.path, module, is_package)
    except SyntaxError as exc:
        # syntax newer than this interpreter's (PEP 695, PEP 701): summarised from libcst's reading
        from .newer_syntax import downlevel  # libcst is slow to import: only for such files

        newer = downlevel(source.text)
        if newer is not None:
            try:
                return summarize(newer, source.path, module, is_package)
            except SyntaxError:
                pass
        return FileError(source.path, f"syntax error at line {exc.lineno}, column {exc.offset}: {exc.msg}")
    except (RecursionError, MemoryError):
        return FileError(source.path, "cannot analyze: expressions nested too deeply")
    except ValueError as exc:
        return FileError(source.path, f"cannot parse: {exc}")


@dataclasses.dataclass
class _Job:
    """One file to summarise in a worker process."""

    path: str
    module: str
    is_package: bool
    max_bytes: int


def _summarize_job(job: _Job) -> tuple[str, Union[dict, FileError]]:
    with collector_paused():
        return _summarize_file(job)


def _pack_summary(result: tuple[str, Union[dict, FileError]]) -> tuple[str, Union[str, FileError]]:
    """In a worker: a summary travels back as the JSON text the summaries cache holds. Encoding it
    once serves the cache too, and decoding JSON costs the main process less than unpickling."""
    key, summary = result
    if isinstance(summary, dict):
        try:
            return key, encode_json(summary)
        except (ValueError, RecursionError):  # not JSON (nested too deep): pickled, as in process; not cached
            pass
    return result


def _unpack_summary(packed: tuple[str, Union[str, FileError]]) -> tuple:
    """In the main process: ``(key, summary, text)`` for a summary that came as text, else as it came."""
    key, value = packed
    return (key, json.loads(value), value) if isinstance(value, str) else packed


SUMMARY_HAND_OVER = HandOver(_pack_summary, _unpack_summary)


def _summarize_file(job: _Job) -> tuple[str, Union[dict, FileError]]:
    source = read_source(job.path, job.max_bytes)
    if isinstance(source, FileError):
        return content_key(job.path, job.max_bytes), source  # the key a rerun compares, also for a file it cannot use
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
    serving: object  # analysis.ServingMode
    analysis: object = None  # None when the results came from the cache
    # False where some module that may import the files was not analysed (``_loose_project``)
    whole_project: bool = True
    loose_members: Optional[list[str]] = None  # the files analysed, for loose files (not a walk)
    loose_folder: Optional[str] = None  # the folder their module names are counted from
    cache_folder: Optional[Path] = None  # the cache the run read and wrote; None without one


@dataclasses.dataclass
class _Entry:
    path: str
    module: str
    is_package: bool
    # content hash; "" when unreadable (summarising reports why); None when not read yet: with no
    # cached summaries to compare, the worker that summarises a file hashes it (read once, not twice)
    key: Optional[str]


def project_files(root: str, config: Config, extra: Sequence[str] = (),
                  overrides: Optional[dict[str, str]] = None, read_keys: bool = True,
                  max_bytes: int = MAX_FILE_BYTES) -> list[_Entry]:
    files, _ = discover([root], config.exclude, stop_at=is_own_project, anchor=config.root,
                        respect_gitignore=config.respect_gitignore)
    files = [os.path.normpath(f) for f in files]
    # Named files the walk skipped (outside the root, or under an excluded folder: exclude applies
    # to what a walk finds, as in ruff) join the project. One the walk found keeps its spelling,
    # unless its text is given: overrides are looked up by the spelling they were given in.
    where = {os.path.abspath(f): i for i, f in enumerate(files)}
    for path in extra:
        absolute = os.path.abspath(path)
        if absolute not in where:
            where[absolute] = len(files)
            files.append(path)
        elif overrides and path in overrides:
            files[where[absolute]] = path
    base = import_root(root)
    entries = []
    for path in files:
        module, is_package = module_name_for(path, base)
        if overrides and path in overrides:
            key: Optional[str] = text_key(path, overrides[path], max_bytes)
        elif not read_keys:
            key = None
        else:
            key = content_key(path, max_bytes)
        entries.append(_Entry(path, module, is_package, key))
    return entries


def _distinct(paths: list[str]) -> list[str]:
    """The first path naming each file (``a.py`` and ``/abs/a.py`` are one module, not two)."""
    seen: set[str] = set()
    return [p for p in paths if not (os.path.abspath(p) in seen or seen.add(os.path.abspath(p)))]


def content_key(path: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The hash the caches compare a file by; "" when it cannot be read (or is no regular file, or is
    over ``max_bytes``: its cached summary must not stand in for the error summarising it gives)."""
    try:
        with open(path, "rb", opener=_nonblocking) as handle:
            raw = handle.read(max_bytes + 1)
            return file_key(raw) if os.path.isfile(path) and len(raw) <= max_bytes else ""
    except OSError:
        return ""


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def collect_summaries(entries: list[_Entry], jobs: int, cache: Optional[SummaryCache],
                      max_bytes: int = MAX_FILE_BYTES, overrides: Optional[dict[str, str]] = None,
                      progress=None) -> tuple[dict[str, dict], dict[str, FileError]]:
    """path -> summary for every file (``overrides``: path -> text to use instead of the file's)."""
    summaries: dict[str, dict] = {}
    errors: dict[str, FileError] = {}
    todo: list[_Job] = []
    todo_entries: list[_Entry] = []
    overrides = overrides or {}
    for entry in entries:
        if entry.path in overrides:
            result = summarize_source(source_from_text(entry.path, overrides[entry.path]), entry.module,
                                      entry.is_package)
            (errors if isinstance(result, FileError) else summaries)[entry.path] = result
            continue
        cached = cache.get(entry.path, entry.key) if cache is not None and entry.key else None
        if cached is not None and cached.get("module") == entry.module:
            summaries[entry.path] = cached
            cache.reused += 1
            continue
        todo.append(_Job(entry.path, entry.module, entry.is_package, max_bytes))
        todo_entries.append(entry)
    if progress is not None:
        progress.start(len(todo))
    try:
        with collector_paused():  # the summaries the workers hand back are millions of objects
            results = run_jobs(_summarize_job, todo, jobs, progress.advance if progress is not None else None,
                               on_crash=lambda j, why: ("", FileError(j.path, why)), weight=_job_weight,
                               batch_weight=SUMMARY_BATCH_BYTES, min_weight=PARALLEL_MIN_BYTES,
                               hand_over=SUMMARY_HAND_OVER)
    finally:
        if progress is not None:
            progress.close()
    for job, entry, (key, result, *text) in zip(todo, todo_entries, results):
        entry.key = key
        if isinstance(result, FileError):
            errors[job.path] = result
        else:
            summaries[job.path] = result
            if cache is not None and key:
                cache.put(job.path, key, result, text[0] if text else None)
    if cache is not None:
        cache.prune(summaries)
    return summaries, errors


# Small files are summarised in tasks of about this much source: one task per file cost the main
# process twice the CPU time (sglang 0.5.15, -j 2: 0.95 s against 0.46 s; wall 3.5 s against 3.0 s).
SUMMARY_BATCH_BYTES = 1 << 18
# Less source than this is summarised in process whatever --jobs says: starting the workers took
# longer (400 projects of 6 files each, as separate projects: 8.4 s with workers, 2.0 s without).
PARALLEL_MIN_BYTES = 1 << 20


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


def _digest(config: Config, entries: list[_Entry], max_bytes: int) -> str:
    h = hashlib.sha256(f"{CACHE_FORMAT}|{config.fingerprint()}|{max_bytes}".encode())
    if config.libraries:  # a library installed, upgraded or removed changes the analysis
        from .libraries import environment_key

        h.update(f"|{environment_key(_site_folders(config))}".encode())
    for entry in entries:
        # paths as the file system gave them: a name that is not UTF-8 comes with lone surrogates
        h.update(f"|{entry.path}|{entry.module}|{entry.key}".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _summarise_and_analyse(entries: list[_Entry], config: Config, jobs: int, cache: Optional[SummaryCache],
                           max_bytes: int, overrides: dict[str, str], progress, use_cache: bool = True):
    summaries, summary_errors = collect_summaries(entries, jobs, cache, max_bytes, overrides, progress)
    saved = cache.save(background=jobs > 1) if cache is not None else _nothing
    try:
        library = _library_summaries(list(summaries.values()), config, jobs, max_bytes, use_cache)
        analysis = analyse({**summaries, **library}, config) if library else analyse(summaries, config)
        return summaries, summary_errors, analysis, run_rules(analysis, config)
    finally:
        saved()


def _site_folders(config: Config) -> list[str]:
    from .libraries import site_folders

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
        found, errors = collect_summaries([_Entry(m.path, m.module, m.is_package, None) for m in modules], jobs,
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
                 alone: bool = False, progress=None) -> ProjectRun:
    """Lint ``paths`` (files or folders) with the whole project around them as context
    (``alone``: the given files are the whole project, e.g. a snippet fixed in memory;
    ``progress``: a ``lints.progress.Progress`` advanced per file summarised). Files outside any
    project (no marker or package above them) are linted with the files of their folder that import
    them and what these import (``_loose_project``), not with the whole folder, which may be ``/tmp``
    or a home folder, and without a cache unless ``cache_dir`` is given. ``paths`` are of one
    project (``project_groups`` splits them).

    A rerun over unchanged files reuses the whole result; a change re-summarises only the files
    that changed and re-runs the (in-memory) project analysis.
    """
    from .analysis import ServingMode

    overrides = {os.path.normpath(k): v for k, v in (overrides or {}).items()}
    forget_ignore_files()  # a run reads them afresh (the flake8 plugin runs many in one process)
    requested, errors = discover([p for p in paths if os.path.normpath(p) not in overrides], config.exclude,
                                 stop_at=is_own_project, anchor=config.root,
                                 respect_gitignore=config.respect_gitignore)
    requested = _distinct([os.path.normpath(p) for p in requested] + [p for p in overrides if p not in requested])
    locator = ProjectLocator()
    if config.force_exclude:  # a path given that exclude matches (it, or a folder above it) is left out too,
        # and all of a project with its own settings that the project around excludes
        requested = [] if requested and excluded_from_here(requested[0], locator) else [
            p for p in requested if not excluded_below(p, config.root or os.curdir, config.exclude, config.root,
                                                       respect_gitignore=False)]
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
    root = os.path.normpath(_display_root(found, paths))
    folder = cache_folder(root, cache_dir, loose)
    cache = SummaryCache(folder) if use_cache and folder is not None else None
    if loose:
        packages = {r for p in paths for r, inside in [locator.locate(p)] if inside}
        # a package is one unit
        whole_packages = discover(sorted(packages), config.exclude, stop_at=is_own_project,
                                  respect_gitignore=config.respect_gitignore,
                                  anchor=config.root)[0] if packages else []
        members, whole = _loose_project(_distinct(requested + [os.path.normpath(p) for p in whole_packages]),
                                        os.path.abspath(found), overrides, max_bytes)
        entries = loose_entries(members, os.path.abspath(found), overrides, max_bytes)
    elif alone:
        base = import_root(os.path.dirname(os.path.abspath(requested[0])) if requested else root)
        entries = [_Entry(p, *module_name_for(p, base), text_key(p, overrides[p], max_bytes) if p in overrides
                          else "") for p in requested]
    else:
        entries = project_files(root, config, requested, overrides,
                                read_keys=cache is not None and not cache.is_empty(), max_bytes=max_bytes)
    # results are saved with summaries: without any, they cannot be a hit
    if not entries:  # nothing to keep: no cache folder is made (a workspace above its checkouts has none)
        cache = None
    if cache is not None:  # before anything of it is read
        cache.limit_to_sources(_source_bytes(entries, overrides))
    complete = all(entry.key is not None for entry in entries)
    # a text given in place of a file is in the digest by its content: an editor's buffer that is
    # the file as saved reuses the run's result; results are saved only for the files as they are
    cached = cache.results(_digest(config, entries, max_bytes)) if cache is not None and complete else None
    analysis = None
    if cached is not None:
        try:
            all_findings = [finding_from_dict(f) for f in cached["findings"]]
            summary_errors = {p: FileError(p, str(m)) for p, m in dict(cached["errors"]).items()}
            serving = ServingMode(*[str(v) for v in cached["serving"]])
        except Exception:  # a result of any other shape (the checkout's to plant) is a miss
            cached = None
    if cached is None:
        with collector_paused():
            try:
                summaries, summary_errors, analysis, all_findings = _summarise_and_analyse(
                    entries, config, jobs, cache, max_bytes, overrides, progress, use_cache)
            except (KeyError, TypeError, AttributeError, IndexError, ValueError):
                if cache is None or not cache.reused:
                    raise  # from fresh summaries only: a bug of ours
                # a cached summary garbled deeper than `SummaryCache.get` checks: once more, all afresh
                cache.forget()
                summaries, summary_errors, analysis, all_findings = _summarise_and_analyse(
                    entries, config, jobs, cache, max_bytes, overrides, progress, use_cache)
        serving = analysis.serving
        if cache is not None and not overrides:
            cache.save_results(_digest(config, entries, max_bytes), all_findings, summary_errors, serving)
    # the project's paths are spelt from its root; report them as the user spelt the request
    wanted = {os.path.abspath(p): p for p in requested}
    findings = [dataclasses.replace(f, path=wanted[os.path.abspath(f.path)]) for f in all_findings
                if os.path.abspath(f.path) in wanted]
    findings = [f for f in findings if not config.ignored_in(f.path, f.code)]
    summarised = {os.path.abspath(p) for p in summaries} if cached is None else None
    problems = {os.path.abspath(p): e for p, e in summary_errors.items()}
    for absolute, path in wanted.items():
        if absolute in problems:
            errors.append(FileError(path, problems[absolute].message))
        elif summarised is not None and absolute not in summarised and path not in overrides:
            source = read_source(path, max_bytes)  # not in the project walk (a FIFO, an excluded file)
            if isinstance(source, FileError):
                errors.append(source)
    if apply_noqa and findings:
        findings = without_suppressed(findings, text_reader(overrides))
    errors.sort(key=lambda e: e.path)
    return ProjectRun(root, requested, findings, errors, serving, analysis, whole_project=whole,
                      loose_members=members, loose_folder=os.path.abspath(found) if loose else None,
                      cache_folder=folder if cache is not None else None)
