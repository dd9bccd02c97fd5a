"""Glob patterns as the configuration writes them: each set compiled once into one regular expression.

Names (of functions and classes) match case-blind; paths match as ``fnmatch.fnmatch`` takes them
(``os.path.normcase`` on both sides), whole or as a tail after a ``/`` (``pattern`` or
``*/pattern``), so ``tests/fixtures`` matches ``pkg/tests/fixtures``. Paths are compared as the
patterns see them (``relative_to``, ``within``).
"""
from __future__ import annotations

import fnmatch
import functools
import os
import re
from typing import Callable, Optional


@functools.lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...], for_paths: bool) -> "re.Pattern[str]":
    if for_paths:  # normcase after adding `*/`: on Windows it is `*\`, as the path's separators
        forms = [os.path.normcase(form) for p in patterns for form in _path_forms(p)]
    else:
        forms = [p.lower() for p in patterns]
    return re.compile("|".join(f"(?:{fnmatch.translate(form)})" for form in forms) or r"(?!)")


def name_match(name: str, patterns: tuple[str, ...]) -> Optional[str]:
    """The first of ``patterns`` that ``name`` matches, case-blind; None when none does."""
    lowered = name.lower()
    if not _compiled(tuple(patterns), False).match(lowered):
        return None
    return next(p for p in patterns if fnmatch.fnmatchcase(lowered, p.lower()))


def path_match(path: str, patterns: tuple[str, ...]) -> Optional[str]:
    """The first of ``patterns`` that ``path`` (parts joined by ``/``) matches, whole or as a tail (a
    pattern starting ``./`` only whole: ``./build`` is the folder at the top, as in ruff); None when none does."""
    if not _compiled(tuple(patterns), True).match(os.path.normcase(path)):
        return None
    return next(p for p in patterns if any(fnmatch.fnmatch(path, form) for form in _path_forms(p)))


def path_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """``path_match(path, patterns) is not None``, as one test for a walk's every file and folder. Patterns
    without a wildcard (every default exclude) are looked up, not matched: a regular expression of 54
    ``.*/name`` alternatives was a fifth of a run that found its results in the cache."""
    literal = tuple(p for p in patterns if not _WILDCARD.search(p))
    globbed = tuple(p for p in patterns if _WILDCARD.search(p))
    match = _compiled(globbed, True).match if globbed else None
    separator = os.path.normcase("/")
    whole: set[str] = set()
    tails: dict[int, set[str]] = {}  # parts in a tail -> the tails: ``*/name`` is any path ending in ``/name``
    for pattern in literal:
        for form in map(os.path.normcase, _path_forms(pattern)):
            if form.startswith("*" + separator):
                tail = form[2:]
                tails.setdefault(tail.count(separator) + 1, set()).add(tail)
            else:
                whole.add(form)
    by_parts = sorted(tails.items())

    def matches(path: str) -> bool:
        path = os.path.normcase(path)
        if path in whole:
            return True
        for parts, names in by_parts:
            split = path.rsplit(separator, parts)
            if len(split) == parts + 1 and separator.join(split[1:]) in names:
                return True
        return match is not None and match(path) is not None

    return matches


_WILDCARD = re.compile(r"[*?\[]")  # what fnmatch reads as other than itself


@functools.lru_cache(maxsize=64)
def bare_names(patterns: tuple[str, ...]) -> Optional[frozenset[str]]:
    """The names ``patterns`` match wherever they are, normcased, where every pattern is such a name (no wildcard, no
    separator: every default exclude): ``path_matcher`` then matches a path by its last part alone (sglang's 4,719
    files: two matchers each were 5 ms of a run that carries its findings). None where one pattern is more."""
    if any(_WILDCARD.search(p) or "/" in p or "\\" in p for p in patterns):
        return None
    return frozenset(os.path.normcase(p) for p in patterns)


def _path_forms(pattern: str) -> tuple[str, ...]:
    """What a path pattern matches: ``pkg/gen`` and any ``*/pkg/gen``; ``./pkg/gen`` only ``pkg/gen``."""
    if not pattern.startswith("./"):
        return pattern, f"*/{pattern}"
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return (pattern,)


def relative_to(path: str, root: str) -> str:
    """``path`` as path globs match it: counted from the folder ``root`` (with no settings file, "": the
    current folder) when it lies below it, else as given; parts joined by ``/``."""
    inside = relative_inside(path, root)
    return inside if inside is not None else as_glob_path(path)


def relative_inside(path: str, root: str) -> Optional[str]:
    """``relative_to(path, root)`` where ``path`` lies below ``root``; None where it does not."""
    inside = os.path.relpath(os.path.abspath(path), root or os.curdir)
    if inside == os.pardir or inside.startswith(os.pardir + os.sep):
        return None
    return as_glob_path(inside)


def as_glob_path(path: str) -> str:
    """A path's parts joined by ``/``, as globs see them (a backslash too, on every system)."""
    return path.replace(os.sep, "/").replace("\\", "/")


def within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both absolute and normalised)."""
    return path == folder or path.startswith(os.path.join(folder, ""))
