"""Source in syntax newer than the running interpreter's ``ast``, made parseable with every position kept.

Engines already write Python 3.12 (PEP 695 ``type X = ...`` and ``def f[T]()``, PEP 701 f-strings that
nest their own quotes); on Python 3.11 ``ast.parse`` refuses such a file. libcst parses it, and each newer
construct is overwritten in place, same lines, same length, with a spelling 3.11 reads:

* ``type X = value``: ``X = value`` (padded with spaces);
* type parameters ``[T, U]`` of a ``def`` or ``class``: spaces;
* an f-string: an empty string literal of the same extent (the calls inside it are lost: a message's
  text rarely holds a grad-mode switch or a buffer).

Nothing else moves, so the summary's lines and columns are the file's own.
"""
from __future__ import annotations

from typing import Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .limits import source_limits_error


def downlevel(text: str) -> Optional[str]:
    """``text`` with its newer constructs overwritten, or None when libcst cannot parse it either (or it is
    past the limits libcst is safe with)."""
    if source_limits_error(text) is not None:
        return None
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    finder = _Newer()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(finder)
    if not finder.edits:
        return None
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = text
    for (start, end), replacement in sorted(finder.edits, key=lambda e: e[0][0], reverse=True):
        begin, stop = starts[start[0] - 1] + start[1], starts[end[0] - 1] + end[1]
        out = out[:begin] + _same_extent(out[begin:stop], replacement) + out[stop:]
    return out


def _same_extent(original: str, replacement: str) -> str:
    """``replacement`` laid over ``original``: the same line breaks, each line padded to the same length."""
    if "\n" not in original:
        return replacement.ljust(len(original)) if len(replacement) <= len(original) else replacement
    breaks = original.count("\n")
    return replacement + "\n" * breaks if "\n" not in replacement else replacement


class _Newer(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.edits: list[tuple[tuple[tuple[int, int], tuple[int, int]], str]] = []
        self._in_fstring = 0

    def _span(self, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
        where = self.get_metadata(PositionProvider, node)
        return (where.start.line, where.start.column), (where.end.line, where.end.column)

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        span = self._span(node)
        quote = node.start[-3:] if node.start.endswith(('"""', "'''")) else node.start[-1]
        if span[0][0] == span[1][0]:
            self.edits.append((span, '""'))
        else:  # a multi-line f-string: a triple-quoted literal holding its line breaks
            self.edits.append((span, ('"""' if quote != "'''" else "'''") + "\n" * (span[1][0] - span[0][0])
                               + ('"""' if quote != "'''" else "'''")))
        return False

    def visit_TypeAlias(self, node: cst.CSTNode) -> bool:
        span = self._span(node)
        value = cst.Module(body=[]).code_for_node(node.value)
        self.edits.append((span, f"{node.name.value} = {value}"))
        return False

    def visit_TypeParameters(self, node: cst.CSTNode) -> bool:
        span = self._span(node)
        self.edits.append((span, ""))
        return False
