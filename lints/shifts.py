"""Edits that only move code: a summary's positions, its shape without them, and a run's findings
carried to the new positions.

The analysis reads summaries only, and compares positions only by order (an allocation before an
update, a call inside a block) and by column (an indentation). An edit after which a file's summary
is the same but for line numbers that keep their order and columns that stay as they were (a
comment, a blank line, a docstring, code the summaries do not record) therefore leaves every
finding as it was, at the moved lines: the findings of the last run are carried over instead of
analysing the project again (the "early cutoff" of incremental build systems).

So does an edit that also binds, or stops binding, a module-level name whose value the summary does not
record (a constant: the module scope's "locals" holds its name alone) where no summary of the analysis
mentions that name in any other place: nothing can resolve to it, so no fact changes (the name-level
dependencies of an incremental build, with "mentions" as the dependency). The analysis reads what it knows
of module-level bindings by name only; ``tests/test_shifts.py`` runs the fresh analysis beside each such
carry.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterable, Optional

from .model import Finding, Fix
from .summary_cache import encode_json, word_count
from .summary_records import CLASS_FIELDS, FUNCTION_FIELDS, MODULE_SCOPE, SUMMARY_FIELDS

NO_COLUMN = -1
_REDEFINED = re.compile(r"@(\d+)(?=\.|$)")


def shape_and_places(summary: dict) -> Optional[tuple[str, list[tuple[int, int]]]]:
    """The summary as JSON with every position zeroed, and its positions in order ((line, NO_COLUMN)
    for a line alone); None for a summary of fields this module does not know."""
    if set(summary) - SUMMARY_FIELDS:
        return None
    places: list[tuple[int, int]] = []

    def at(line: int, col: int = NO_COLUMN) -> int:
        places.append((line, col))
        return 0

    def named(qual: Optional[str]) -> Optional[str]:
        # a redefinition is named by its line (``f@12``, ``summary.py``): that line is a position too
        if qual is None or "@" not in qual:
            return qual
        def line_out(match: re.Match) -> str:
            at(int(match.group(1)))
            return "@"

        return _REDEFINED.sub(line_out, qual)

    functions = []  # pairs, not a dict: two names that differ only by a line must stay two
    for qual, fn in summary["functions"].items():
        if set(fn) - FUNCTION_FIELDS:
            return None
        shaped = dict(fn)
        shaped["qual"], shaped["parent"] = named(fn["qual"]), named(fn["parent"])
        shaped["nested"] = [named(q) for q in fn["nested"]]
        if qual != MODULE_SCOPE:  # the module's own scope is at (1, 0) whatever the file holds
            shaped["line"], shaped["col"] = at(fn["line"], fn["col"]), 0
        shaped["dec"] = [[d[0], at(d[1], d[2]), 0] for d in fn["dec"]]
        shaped["calls"] = [[c[0], c[1], c[2], at(c[3], c[4]), 0, *c[5:]] for c in fn["calls"]]
        shaped["assigns"] = [[a[0], a[1], a[2], at(a[3], a[4]), 0, *a[5:]] for a in fn["assigns"]]
        shaped["rets"] = [[r[0], at(r[1], r[2]), 0, *r[3:]] for r in fn["rets"]]
        shaped["guards"] = [[g[0], g[1], g[2], at(g[3]), *g[4:]] for g in fn["guards"]]
        shaped["withs"] = [[at(w[0], w[1]), 0, [[i[0], at(i[1], i[2]), 0, *i[3:]] for i in w[2]], w[3], w[4],
                            at(w[5]), *w[6:]] for w in fn["withs"]]
        shaped["blocks"] = [[at(first), at(last)] for first, last in fn["blocks"]]
        shaped["asserts"] = [[a[0], a[1], at(a[2]), *a[3:]] for a in fn["asserts"]]
        functions.append([named(qual), shaped])
    classes = []
    for qual, klass in summary["classes"].items():
        if set(klass) - CLASS_FIELDS:
            return None
        classes.append([named(qual), {**klass, "qual": named(klass["qual"]), "scope": named(klass["scope"]),
                                      "line": at(klass["line"])}])
    rest = {k: v for k, v in summary.items() if k not in ("functions", "classes")}
    try:
        return encode_json([rest, functions, classes]), places
    except (ValueError, RecursionError):
        return None


def line_shift(old: dict, new: dict, mentioned_elsewhere: Callable[[str], bool] = lambda name: True
               ) -> Optional[dict[int, int]]:
    """old line -> new line, where ``new`` is ``old`` moved: the same shape, each line moved to one
    line, their order kept and every column as it was, leaving out module-level constants bound in
    only one of them where neither summary names them elsewhere and ``mentioned_elsewhere(name)`` (the
    other summaries of the analysis) is false; None otherwise."""
    names = rebound_constants(old, new)
    unbound = _without_constants(old, new, names)
    if unbound is None:
        return None
    old, new = unbound
    before, after = shape_and_places(old), shape_and_places(new)
    if before is None or after is None or before[0] != after[0]:
        return None
    # a shape holds the summary's words as they are (only numbers are zeroed): a name it holds is mentioned
    if names and (mentions(before[0], *names) or any(map(mentioned_elsewhere, sorted(names)))):
        return None
    lines: dict[int, int] = {}
    for (old_line, old_col), (new_line, new_col) in zip(before[1], after[1]):
        if old_col != new_col or lines.setdefault(old_line, new_line) != new_line:
            return None
    ordered = sorted(lines.items())
    if any(earlier >= later for (_, earlier), (_, later) in zip(ordered, ordered[1:])):
        return None
    # names with a line in them keep their order (the analysis sorts functions by name): f@9 and f@12
    # would swap as f@10 and f@13
    for field in ("functions", "classes"):
        renamed = {qual: _REDEFINED.sub(lambda m: f"@{lines[int(m.group(1))]}", qual) for qual in old[field]}
        if [renamed[q] for q in sorted(renamed)] != sorted(new[field]):
            return None
    return lines


def _without_constants(old: dict, new: dict, names: set[str]) -> Optional[tuple[dict, dict]]:
    """``old`` and ``new`` without ``names`` (``rebound_constants``) in their module scope's "locals", for
    ``line_shift`` to look for other mentions of them in what is left; None where one is no name a carry may leave
    out. A mention is the name as a word anywhere in a summary's JSON (a part of a path, of a dotted name, of a
    string: more than a read, never less); the name is an ASCII identifier, which JSON writes as it is."""
    if not names:
        return old, new
    if not all(isinstance(name, str) and name.isascii() and name.isidentifier()
               and not (name.startswith("__") and name.endswith("__")) for name in names):
        return None  # a dunder (``__all__``, ``__getattr__``) is a name the analysis may ask for itself
    unbound_old, unbound_new = _unbound(old, names), _unbound(new, names)
    return (unbound_old, unbound_new) if unbound_old is not None and unbound_new is not None else None


def _module_scope(summary: dict) -> Optional[dict]:
    """The summary's module scope, where it has one with a list of "locals"."""
    scope = summary.get("functions", {}).get(MODULE_SCOPE)
    return scope if isinstance(scope, dict) and isinstance(scope.get("locals"), list) else None


def rebound_constants(old: dict, new: dict) -> set[str]:
    """The names in the module scope's "locals" of only one of ``old`` and ``new``."""
    scopes = [_module_scope(summary) for summary in (old, new)]
    return set() if None in scopes else set(scopes[0]["locals"]) ^ set(scopes[1]["locals"])


def _unbound(summary: dict, names: set[str]) -> Optional[dict]:
    """``summary`` without ``names`` in its module scope's "locals"; None for a summary without that scope."""
    scope = _module_scope(summary)
    if scope is None:
        return None
    kept = [name for name in scope["locals"] if name not in names]
    return {**summary, "functions": {**summary["functions"], MODULE_SCOPE: {**scope, "locals": kept}}}


def mentioned_elsewhere_by(library_words: Iterable[str], changed: dict[str, tuple[dict, dict]],
                           others: Optional[list[dict]]) -> Callable[[str, str], bool]:
    """``mentioned(name, path)``: whether a summary of the analysis other than changed file ``path``'s two reads
    ``name`` otherwise than by binding it as a module-level constant of its own (which no other module's binding
    changes): an installed library's (by its ``library_words``), another changed file's, old or new (``changed``:
    path -> (old, new)), or another file's (``others``: those that may mention a name sought; None: not known, as if
    every one did). Another changed file that (un)binds the name too looks for its other mentions itself
    (``line_shift``, which every changed file must pass). Each answer is asked once, each summary encoded once."""
    known = set(library_words)
    rebinds = {path: rebound_constants(old, new) for path, (old, new) in changed.items()}
    texts: dict[int, Optional[str]] = {}  # id of a summary -> its JSON (None: none)
    reads: dict[tuple[Optional[str], str], bool] = {}

    def read_by(summary, name: str) -> bool:
        scope = _module_scope(summary) if isinstance(summary, dict) else None
        if scope is None:
            return True
        if id(summary) not in texts:
            try:
                texts[id(summary)] = encode_json(summary)
            except (ValueError, RecursionError):
                texts[id(summary)] = None
        text = texts[id(summary)]
        return text is None or word_count(text, name) > scope["locals"].count(name)

    def read_in(path: Optional[str], name: str) -> bool:  # path None: the other files
        if (path, name) not in reads:
            summaries = others if path is None else changed[path]
            reads[path, name] = summaries is None or (path is None or name not in rebinds[path]) and any(
                read_by(summary, name) for summary in summaries)
        return reads[path, name]

    def mentioned(name: str, path: str) -> bool:
        return name in known or any(read_in(other, name) for other in sorted(changed) if other != path) \
            or read_in(None, name)

    return mentioned


def mentions(text: str, *names: str) -> bool:
    """Whether the JSON ``text`` holds one of the identifiers ``names`` as a word (``word_count``): ``_edit`` is not
    in ``post_edit_steps``."""
    return any(word_count(text, name) for name in names)


class _Unmoved(Exception):
    """A place in a finding that the shift does not cover: the findings cannot be carried."""


def _mover(shifts: dict[str, dict[int, int]]) -> tuple[Callable[[str, int], int], Callable[[str], str]]:
    # "path:line" as ``Project.where`` writes it, not inside a longer path or number
    spelt = re.compile("(?<![\\w./\\\\-])(" + "|".join(re.escape(p) for p in sorted(shifts, key=len, reverse=True))
                       + "):(\\d+)(?!\\d)")

    def line(path: str, number: int) -> int:
        lines = shifts.get(path)
        if lines is None:
            return number
        moved = lines.get(number)
        if number == 1 and moved in (None, 1):
            return 1  # the module's own scope is at line 1, whatever moved
        if moved is None or number == 1:  # not a place of the file's summary; or either of two places
            raise _Unmoved(f"{path}:{number}")
        return moved

    def text(value: str) -> str:
        return spelt.sub(lambda m: f"{m.group(1)}:{line(m.group(1), int(m.group(2)))}", value)

    return line, text


def carried(findings: Iterable[Finding], evidence: str, shifts: dict[str, dict[int, int]]
            ) -> Optional[tuple[list[Finding], str]]:
    """``findings`` and the serving mode's ``evidence`` at the places ``shifts`` (path -> line_shift)
    move them to; None where a place they name is not one the shifts know."""
    line, text = _mover(shifts)
    try:
        moved = []
        for f in findings:
            fixes = tuple(Fix(x.action, (line(f.path, x.at[0]), x.at[1]), x.safe,
                              tuple((line(f.path, i[0]), i[1]) for i in x.items)) for x in f.fixes)
            moved.append(dataclasses.replace(f, line=line(f.path, f.line), message=text(f.message),
                                             notes=tuple(text(n) for n in f.notes), fixes=fixes))
        return sorted(moved), text(evidence)
    except _Unmoved:
        return None
