"""``# noqa`` comments: which findings they suppress, and adding them (``--add-noqa``).

As flake8 does, a finding's line stands for its whole unit of lines: the run of physical lines
between two NL/NEWLINE tokens (lines joined by a backslash, or spanned by a multi-line string), so
that a ``# noqa`` at the end of a statement's last line covers a finding on its first. Unlike
flake8 (and like ruff), only comments count: ``m("# noqa")`` suppresses nothing.
"""
from __future__ import annotations

import re
import tokenize
from typing import Callable, Iterable, NamedTuple, Optional

from .sources import source_lines
from .model import Finding

# flake8's syntax: `# noqa` alone suppresses everything on the line; `# noqa: GM101, GM2` codes or prefixes.
# The word `noqa` is matched in any case; the codes are compared as written (flake8 compares them
# case-sensitively: `# NOQA:gm101` names no code of ours, and is not a bare `# noqa` either).
# As flake8, `# noqa` is spelt with one space (`#noqa` is no directive to flake8, so not to us either).
NOQA = re.compile(r"# noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_SEPARATORS = re.compile(r"[,\s]+")


def _listed(codes: str) -> list[str]:
    return [c for c in _SEPARATORS.split(codes) if c]


def _first_noqa(comments: Iterable[str]) -> Optional[re.Match]:
    """The first ``# noqa`` in ``comments`` (the one that decides, as flake8 takes the first)."""
    for comment in comments:
        if "noqa" in comment.lower():
            match = NOQA.search(comment)
            if match is not None:
                return match
    return None


def _suppresses(comments: Iterable[str], code: str) -> bool:
    match = _first_noqa(comments)
    if match is None:
        return False
    codes = match.group("codes")
    return not codes or code.startswith(tuple(_listed(codes)))


def is_suppressed(line: str, code: str) -> bool:
    """Whether a ``# noqa`` comment in ``line`` suppresses ``code``. ``line``: a physical line, or the
    lines of a unit joined; only its comments count, found by reading ``line`` on its own
    (``_comments``), so a ``# noqa`` inside a string literal is no comment."""
    if "noqa" not in line.lower():
        return False
    return _suppresses(_comments(line), code)


def without_suppressed(findings: Iterable[Finding], text_of: Callable[[str], str]) -> list[Finding]:
    """The findings no ``# noqa`` comment of their unit of lines suppresses; ``text_of(path)`` gives a
    file's text."""
    kept, marks_of = [], {}
    for finding in findings:
        marks = marks_of.get(finding.path)
        if marks is None:
            marks = marks_of[finding.path] = _Marks(text_of(finding.path))
        if not marks.suppresses(finding.line, finding.code):
            kept.append(finding)
    return kept


class _Marks:
    """The ``# noqa`` comments of one file, by line."""

    def __init__(self, text: str) -> None:
        self.any = "noqa" in text.lower()  # most files have none: no need to tokenize them
        self.lines = source_lines(text) if self.any else []
        self.units = _units(text) if self.any else None

    def suppresses(self, number: int, code: str) -> bool:
        if not self.any:
            return False
        unit = self.units.by_line.get(number) if self.units is not None else None
        if unit is not None:
            return _suppresses((comment for _, _, comment in unit.comments), code)
        # The file does not tokenize (or the line holds no token): its units, and which of its text is
        # string, are unknown. Conservatively, only the physical line counts, read on its own, and
        # only what is a comment there (`_comments`: not a `#` inside a quote, nor any after a quote
        # left open). flake8 searches the raw line here, so that a `"# noqa"` in a string would hide a
        # finding; a finding wrongly hidden costs more than one reported. (A line that is really the
        # inside of a multi-line string can still be misread: without the tokens nothing can tell.)
        line = self.lines[number - 1] if 0 < number <= len(self.lines) else ""
        return is_suppressed(line, code)


def add_noqa(text: str, codes_by_line: dict[int, set[str]]) -> tuple[str, list[int]]:
    """``text`` with ``# noqa: CODE`` for each given line, at the end of the last line of its unit
    (the lines joined with it by a backslash or a multi-line string, where flake8 and
    ``without_suppressed`` look), its codes merged into a ``# noqa: X`` comment already there; and
    the lines where no comment can go: those of a file that does not tokenize (where a comment would
    go is not known), and line numbers outside the file."""
    lines = source_lines(text)
    units = _units(text)
    refused: list[int] = []
    wanted: dict[_Unit, set[str]] = {}
    for number, codes in sorted(codes_by_line.items()):
        unit = units.by_line.get(number) if units is not None and 0 < number <= len(lines) else None
        if unit is None:
            refused.append(number)
            continue
        wanted.setdefault(unit, set()).update(codes)
    for unit, codes in sorted(wanted.items(), key=lambda item: item[0].last):
        found = next(((number, column, match) for number, column, comment in unit.comments
                      for match in [NOQA.search(comment)] if match is not None), None)
        if found is None:
            number = unit.last
            body = lines[number - 1].rstrip("\r\n")
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        else:
            number, column, match = found
            if not match.group("codes"):
                continue  # a bare `# noqa` already suppresses everything
            have = _listed(match.group("codes"))
            new = sorted(c for c in codes if not c.startswith(tuple(have)))
            if not new:
                continue
            body = lines[number - 1].rstrip("\r\n")
            start, end = column + match.start(), column + match.end()
            body = body[:start] + "# noqa: " + ", ".join(have + new) + body[end:]
        line = lines[number - 1]
        lines[number - 1] = body + line[len(line.rstrip("\r\n")):]
    return "".join(lines), refused


class _Unit(NamedTuple):
    """A run of physical lines between two NL/NEWLINE tokens (flake8's ``_noqa_line_mapping``) and
    its comments: (line, column, text)."""
    first: int
    last: int
    comments: tuple[tuple[int, int, str], ...]


class _Units:
    def __init__(self) -> None:
        self.by_line: dict[int, _Unit] = {}


def _units(text: str) -> Optional[_Units]:
    """The units of ``text``'s lines, or None when it does not tokenize."""
    # Lines as `source_lines` numbers them (a lone CR ends a line too, as for the compiler), each
    # ended by LF; a BOM left in the text (stdin, an editor's buffer) is not given to the tokenizer,
    # and counted back into the first line's columns.
    feed = [line.rstrip("\r\n") + "\n" if line.endswith(("\r", "\n")) else line for line in source_lines(text)]
    bom = 1 if feed and feed[0].startswith("\ufeff") else 0
    if bom:
        feed[0] = feed[0][1:]
    lines = iter(feed)
    found = _Units()
    first, last, comments = 0, 0, []
    try:
        for token in tokenize.generate_tokens(lambda: next(lines, "")):
            if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            first = min(first, token.start[0]) if first else token.start[0]
            last = max(last, token.end[0])
            if token.type == tokenize.COMMENT:
                number, column = token.start
                comments.append((number, column + (bom if number == 1 else 0), token.string))
            elif token.type in (tokenize.NL, tokenize.NEWLINE):
                unit = _Unit(first, last, tuple(comments))
                for number in range(first, last + 1):
                    found.by_line[number] = unit
                first, last, comments = 0, 0, []
    except (tokenize.TokenError, SyntaxError):
        return None
    return found


_QUOTE_OR_COMMENT = re.compile(r"'''|\"\"\"|['\"#]")


def _comments(text: str) -> list[str]:
    """The comments of ``text`` read on its own, without the tokenizer (which stops at, or misreads,
    a fragment of a file): a ``#`` outside string literals starts one. After a string left open at
    the end of a line (an unterminated quote, or a multi-line string going on past ``text``),
    nothing is taken for a comment."""
    out, at, size = [], 0, len(text)
    while True:
        match = _QUOTE_OR_COMMENT.search(text, at)
        if match is None:
            return out
        if match.group() == "#":
            end = match.start()
            while end < size and text[end] not in "\r\n":
                end += 1
            out.append(text[match.start():end])
            at = end
            continue
        quote, at = match.group(), match.end()
        while True:
            if at >= size:
                return out  # open to the end: what follows the quote is string, not comment
            char = text[at]
            if char == "\\":
                at += 3 if text.startswith("\r\n", at + 1) else 2
            elif text.startswith(quote, at):
                at += len(quote)
                break
            elif len(quote) == 1 and char in "\r\n":
                return out  # an unterminated string: the rest of the text cannot be read safely
            else:
                at += 1
