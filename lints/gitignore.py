"""``.gitignore`` files (and ``.git/info/exclude``) read as git reads them, through ``pathspec``: which
files and folders of a checkout a walk leaves out (ruff's ``respect-gitignore``).

As in git, they count inside a checkout only (a folder with ``.git``, a folder or a file, at or above
the walk), each ``.gitignore`` for the folder it is in and everything below, the deeper one first, and
``info/exclude`` below them all. The global ``core.excludesFile`` is not read (it is the user's, not
the project's, and finding it means running git).
"""
from __future__ import annotations

import functools
import os
import re
from typing import Collection, NamedTuple, Optional

from .sources import read_regular_bytes

# A .gitignore larger than this is not read, and patterns past the limit are not used: they are a few KB,
# and pathspec takes 0.2 ms a pattern (a checkout may plant a huge one).
MAX_IGNORE_FILE_BYTES = 256 << 10
MAX_PATTERNS = 1000
# Regular expressions backtrack: `*a*a*a*b` took 7 s on one name of 250 characters, `a/**/a/**/a/**/b` 3 s on
# one path 500 folders deep. A pattern with more wildcards than this (within a folder name, or `**`) is
# not used: its files are walked, as if git did not ignore them.
MAX_STARS_IN_A_NAME = 2
MAX_DOUBLE_STARS = 2
_STARS = re.compile(r"\*+")
_ESCAPED = re.compile(r"\\.")
_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_]\w*>")
# pathspec's regular expression for a pattern with no slash inside: the name, in any folder
_ANY_FOLDER = "^(?:.+/)?"


@functools.cache
def _pattern_class() -> type:
    """pathspec's class for one line, with git's own semantics: imported where a checkout has a pattern (about
    11 ms, which flake8's processes and a walk of a tree without any need not pay)."""
    import pathspec

    return type(pathspec.GitIgnoreSpec.from_lines(["x"]).patterns[0])


class IgnoreFile(NamedTuple):
    """The patterns of one ignore file. A pattern with no slash inside (``*.log``, ``build/``) matches a
    name in any folder, and is matched against the name alone (matching it against the whole path
    cost 3x more); the others against the path from ``base``."""

    base: str  # the absolute folder its patterns count from
    any_name: Optional["re.Pattern[str]"]  # all name patterns at once: None when none matches, the common case
    any_path: Optional["re.Pattern[str]"]
    patterns: tuple[tuple[bool, bool, "re.Pattern[str]"], ...]  # (ignores, by name, regex), in file order

    def decides(self, relative: str, name: str) -> Optional[bool]:
        """Whether the last pattern that matches ignores the entry (``relative``: its path from ``base``,
        ``name``: its name; a folder's both end with ``/``); None when no pattern matches."""
        if not ((self.any_name is not None and self.any_name.match(name))
                or (self.any_path is not None and self.any_path.match(relative))):
            return None
        for ignores, by_name, regex in reversed(self.patterns):
            if regex.match(name if by_name else relative):
                return ignores
        return None


Rules = tuple[IgnoreFile, ...]  # the ignore files that apply in a folder, outermost first


def parse_ignore_file(base: str, lines: list[str]) -> Optional[IgnoreFile]:
    """The patterns of ``lines`` counted from ``base``; None when there are none. A line pathspec cannot
    read is skipped, as git skips it, and so is one too costly to match (``MAX_STARS_IN_A_NAME``)."""
    patterns = []
    pattern_class = _pattern_class() if lines else None  # outside the per-line ``except``: pathspec must be there
    for line in lines:
        if len(patterns) >= MAX_PATTERNS:
            break
        if _too_costly(line):
            continue
        try:
            pattern = pattern_class(line)
        except Exception:  # noqa: BLE001 - pathspec's errors for a bad pattern have no common base
            continue
        if pattern.include is None or pattern.regex is None:  # a comment or a blank line
            continue
        source = _NAMED_GROUP.sub("(?:", pattern.regex.pattern)
        bare = line.strip().lstrip("!").rstrip("/")
        while bare.startswith("**/"):
            bare = bare[3:]
        by_name = "/" not in bare and source.startswith(_ANY_FOLDER)
        if by_name:
            source = "^" + source[len(_ANY_FOLDER):]
        try:
            patterns.append((bool(pattern.include), by_name, re.compile(source)))
        except (re.error, OverflowError, RecursionError):
            continue
    if not patterns:
        return None

    def any_of(by_name: bool) -> Optional["re.Pattern[str]"]:
        sources = [regex.pattern for _, named, regex in patterns if named == by_name]
        try:
            return re.compile("|".join(f"(?:{s})" for s in sources)) if sources else None
        except (re.error, OverflowError, RecursionError):
            return re.compile("")  # matches all: each pattern is then tried in turn

    return IgnoreFile(base, any_of(True), any_of(False), tuple(patterns))


def _too_costly(line: str) -> bool:
    """More wildcards than a regular expression matches in bounded time (see ``MAX_STARS_IN_A_NAME``)."""
    if "*" not in line:
        return False
    parts = _ESCAPED.sub("", line.strip()).split("/")  # `\*` is a star itself
    stars = max((len(_STARS.findall(part)) for part in parts if part != "**"), default=0)
    return stars > MAX_STARS_IN_A_NAME or sum(part == "**" for part in parts) > MAX_DOUBLE_STARS


def read_ignore_file(path: str, base: str) -> Optional[IgnoreFile]:
    """The ignore file at ``path`` (patterns counted from ``base``); None when it is absent, empty, or no
    regular file (a FIFO would block the walk; a link is not followed, as git does not follow one)."""
    try:
        raw = read_regular_bytes(path, MAX_IGNORE_FILE_BYTES, follow_links=False)
    except OSError:
        return None
    return parse_ignore_file(base, raw.decode("utf-8", "surrogateescape").splitlines())


def is_checkout(names: Collection[str]) -> bool:
    """Whether a folder with these entries is a checkout's root (``.git``: a folder, or a file naming
    where the repository is, as in a submodule or a worktree)."""
    return ".git" in names


def rules_entering(folder: str, outer: Optional[Rules], names: Collection[str]) -> Optional[Rules]:
    """The rules for the entries of the absolute ``folder`` (whose entries are ``names``), given those of
    the folder holding it (``outer``; None: not in a checkout). A checkout's root starts afresh."""
    if is_checkout(names):
        outer = ()
        exclude = read_ignore_file(os.path.join(folder, ".git", "info", "exclude"), folder)
        if exclude is not None:
            outer = (exclude,)
    if outer is None or ".gitignore" not in names:
        return outer
    own = read_ignore_file(os.path.join(folder, ".gitignore"), folder)
    return outer if own is None else (*outer, own)


def rules_at(folder: str) -> Optional[Rules]:
    """The rules for the entries of ``folder``, with those of the folders above it up to its checkout's
    root; None outside any checkout. A loop up and one down (a tree may be thousands of folders deep),
    remembered until ``forget``: a run asks of every project's folder, and each ask climbs."""
    folder = os.path.abspath(folder)
    climbed = []
    current = folder
    rules: Optional[Rules] = None
    while current not in _remembered:
        climbed.append(current)
        if os.path.lexists(os.path.join(current, ".git")):
            break  # a checkout's root: what is above it does not count
        parent = os.path.dirname(current)
        if parent == current:  # no checkout above
            _remembered.update(dict.fromkeys(climbed))
            return None
        current = parent
    else:
        rules = _remembered[current]
    for each in reversed(climbed):
        rules = rules_entering(each, rules, markers_in(each))
        _remembered[each] = rules
    return _remembered[folder]


_remembered: dict[str, Optional[Rules]] = {}  # folder -> rules_at(folder), until forget()


def forget() -> None:
    """Read the ignore files above a walk afresh from now on (a new run, or files changed)."""
    _remembered.clear()


def markers_in(folder: str) -> set[str]:
    """Which of the entries ``rules_entering`` asks about ``folder`` has (a stat each, not a listing)."""
    return {name for name in (".git", ".gitignore") if os.path.lexists(os.path.join(folder, name))}


def is_ignored(rules: Optional[Rules], folder: str, name: str, is_dir: bool) -> bool:
    """Whether ``rules`` (those of the absolute ``folder``) ignore its entry ``name``."""
    if not rules:
        return False
    key = name + "/" if is_dir else name
    for ignore_file in reversed(rules):  # the deepest file decides first
        base = ignore_file.base
        if folder == base or ignore_file.any_path is None:  # no pattern of it reads the path
            relative = key
        elif folder.startswith(base) and folder[len(base):len(base) + 1] == os.sep:
            relative = folder[len(base) + 1:].replace(os.sep, "/") + "/" + key
        else:
            relative = os.path.relpath(folder, base).replace(os.sep, "/") + "/" + key
        decision = ignore_file.decides(relative, key)
        if decision is not None:
            return decision
    return False
