"""Where the code a finding points at ends, for editors (``--format json``'s end positions).

The analysis records start positions only (that is all the text formats and the fixer need); the
ends are found again, for the few files with findings, from CPython's ``ast``: the largest
expression that starts exactly at the finding, else the end of the code on that line.
"""
from __future__ import annotations

import ast
import warnings

from .sources import source_lines


def end_positions(text: str, starts: set[tuple[int, int]]) -> dict[tuple[int, int], tuple[int, int]]:
    """(line, 0-based character column) -> (end line, 0-based end column, exclusive)."""
    lines = source_lines(text)
    ends: dict[tuple[int, int], tuple[int, int]] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None

    def chars(line: int, byte_col: int) -> int:
        text_line = lines[line - 1] if 0 < line <= len(lines) else ""
        return len(text_line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    if tree is not None:
        wanted_lines = {line for line, _ in starts}
        for node in ast.walk(tree):
            if not isinstance(node, ast.expr) or node.lineno not in wanted_lines or node.end_lineno is None:
                continue
            start = (node.lineno, chars(node.lineno, node.col_offset))
            if start in starts:
                end = (node.end_lineno, chars(node.end_lineno, node.end_col_offset))
                if end > ends.get(start, start):
                    ends[start] = end
    for line, col in starts - ends.keys():
        code = (lines[line - 1] if 0 < line <= len(lines) else "").rstrip("\r\n")
        comment = code.find("#", col)  # a rough cut: the fallback only has to end inside the line
        ends[(line, col)] = (line, max(col, len((code[:comment] if comment >= 0 else code).rstrip())))
    return ends
