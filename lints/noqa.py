"""``# noqa`` comments: which findings they suppress, and adding them (``--add-noqa``)."""
from __future__ import annotations

import io
import re
import tokenize
from typing import Callable, Iterable, Optional

from .files import source_lines
from .model import Finding

# flake8's syntax: `# noqa` alone suppresses everything on the line; `# noqa: GM101, GM2` codes or prefixes.
NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def is_suppressed(line: str, code: str) -> bool:
    if "noqa" not in line.lower():
        return False
    match = NOQA.search(line)
    if match is None:
        return False
    codes = match.group("codes")
    return not codes or any(code.startswith(c.upper()) for c in re.split(r"[,\s]+", codes) if c)


def without_suppressed(findings: Iterable[Finding], text_of: Callable[[str], str]) -> list[Finding]:
    """The findings no ``# noqa`` on their line suppresses; ``text_of(path)`` gives a file's text."""
    kept, lines_of = [], {}
    for finding in findings:
        lines = lines_of.get(finding.path)
        if lines is None:
            lines = lines_of[finding.path] = source_lines(text_of(finding.path))
        line = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
        if not is_suppressed(line, finding.code):
            kept.append(finding)
    return kept


def add_noqa(text: str, codes_by_line: dict[int, set[str]]) -> tuple[str, list[int]]:
    """``text`` with ``# noqa: CODE`` on each given line (codes merged into a ``# noqa: X`` already
    there), and the lines where no comment can go: a line that ends inside a string or with a
    backslash continuation (a comment there would change the program or break it)."""
    lines = source_lines(text)
    tokens = _line_tokens(text)
    refused = []
    for number, codes in sorted(codes_by_line.items()):
        line = lines[number - 1] if 0 < number <= len(lines) else ""
        body = line.rstrip("\r\n")
        if tokens is None or not line or number in tokens.open_lines or body.rstrip().endswith("\\"):
            refused.append(number)
            continue
        comment = tokens.comments.get(number)
        match = NOQA.search(body, comment) if comment is not None else None
        if match is not None and not match.group("codes"):
            continue  # a bare `# noqa` already suppresses everything
        if match is not None:
            have = [c for c in re.split(r"[,\s]+", match.group("codes")) if c]
            merged = have + sorted(c for c in codes if not any(c.startswith(h.upper()) for h in have))
            body = body[:match.start()] + "# noqa: " + ", ".join(merged) + body[match.end():]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        lines[number - 1] = body + line[len(line.rstrip("\r\n")):]
    return "".join(lines), refused


class _LineTokens:
    def __init__(self) -> None:
        self.open_lines: set[int] = set()  # lines whose end falls inside a token (a triple-quoted string)
        self.comments: dict[int, int] = {}  # line -> column where its comment starts


def _line_tokens(text: str) -> Optional[_LineTokens]:
    found = _LineTokens()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found.comments[token.start[0]] = token.start[1]
            elif token.end[0] > token.start[0] and token.type not in (tokenize.NL, tokenize.NEWLINE):
                found.open_lines.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return None
    return found
