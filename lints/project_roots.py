"""Where a project starts and ends: its root (the nearest marker above a path, climbing through nested
projects up to one of its own), the projects of their own inside it (a checkout, settings of their
own), which paths of a command line belong together, and what the project around a nested one excludes."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Collection, Optional, Sequence

from .globs import within
from .options import ConfigError, declares_config, load_config
from .walk import excluded_below


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


def package_only(root: str) -> bool:
    """A root found as a top package, with no project marker (``locate_project``)."""
    return (os.path.isfile(os.path.join(root, "__init__.py"))
            and not any(os.path.exists(os.path.join(root, marker)) for marker in PROJECT_MARKERS))


def root_spelling(root: str, paths: Sequence[str], below_here_relative: bool = False) -> str:
    """The root spelt as the user spells paths: relative when they are, so findings keep their form; with
    ``below_here_relative``, also where it is the current folder or lies below it. The cache keeps summaries and
    results by that spelling, and the notes of findings spell other files' places by it, so that an editor's
    absolute path, flake8's and pre-commit's relative ones share one cache (as ruff, they print paths relative
    to the current folder)."""
    try:
        relative = os.path.relpath(root)
    except ValueError:  # another drive (Windows)
        return root
    if paths and all(not os.path.isabs(p) for p in paths):
        return relative
    if below_here_relative and relative != os.pardir and not relative.startswith(os.pardir + os.sep):
        return relative
    return root


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
