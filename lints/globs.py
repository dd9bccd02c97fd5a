"""Glob patterns as the configuration writes them: each set compiled once into one regular expression.

Names (of functions and classes) match case-blind; paths match as ``fnmatch.fnmatch`` takes them
(``os.path.normcase`` on both sides), whole or as a tail after a ``/`` (``pattern`` or
``*/pattern``), so ``tests/fixtures`` matches ``pkg/tests/fixtures``.
"""
from __future__ import annotations

import fnmatch
import functools
import os
import re
from typing import Optional


@functools.lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...], for_paths: bool) -> "re.Pattern[str]":
    if for_paths:  # normcase after adding `*/`: on Windows it is `*\`, as the path's separators
        forms = [os.path.normcase(form) for p in map(_path_form, patterns) for form in (p, f"*/{p}")]
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
    """The first of ``patterns`` that ``path`` (parts joined by ``/``) matches, whole or as a tail;
    None when none does."""
    if not _compiled(tuple(patterns), True).match(os.path.normcase(path)):
        return None
    return next(p for p in patterns
                if fnmatch.fnmatch(path, _path_form(p)) or fnmatch.fnmatch(path, f"*/{_path_form(p)}"))


def _path_form(pattern: str) -> str:
    """``./pkg/gen`` is ``pkg/gen``: paths are matched without a leading ``./``, as ruff's patterns are."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern


def relative_to(path: str, root: str) -> str:
    """``path`` as path globs match it: counted from the folder ``root`` when it lies below it ("": as
    given), parts joined by ``/``."""
    if root:
        inside = os.path.relpath(os.path.abspath(path), root)
        if inside != os.pardir and not inside.startswith(os.pardir + os.sep):
            path = inside
    return path.replace(os.sep, "/").replace("\\", "/")
