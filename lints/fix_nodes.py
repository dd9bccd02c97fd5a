"""The nodes a fix can name in a libcst module, by start position (as the summaries count them), and the
statement or block holding each. Part of the fixes (``lints.fixer``)."""
from __future__ import annotations

import bisect
from typing import Collection, Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


_BLOCKS = (cst.BaseStatement, cst.BaseSuite, cst.Else, cst.ExceptHandler, cst.Finally, cst.MatchCase,
           *((cst.ExceptStarHandler,) if hasattr(cst, "ExceptStarHandler") else ()))


class _Nodes(cst.CSTVisitor):
    """The nodes a fix can name, by start position (``(line, col)``, as the summaries count them)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, lines: Optional[Collection[int]] = None) -> None:
        super().__init__()
        # with ``lines``: only the nodes that span one of them are visited (the fixes' lines)
        self._lines = sorted(set(lines)) if lines is not None else None
        self.withs: dict[tuple[int, int], cst.With] = {}
        self.items: dict[tuple[int, int], cst.WithItem] = {}
        self.calls: dict[tuple[int, int], list[cst.Call]] = {}
        self.decorators: dict[tuple[int, int], cst.Decorator] = {}
        self.functions: dict[tuple[int, int], cst.FunctionDef] = {}  # by the position of `def` (or `async`)
        # Statements and blocks, by id: the one holding each (None at the top level), and the innermost one
        # holding each node a fix can name. A fix rewrites that one; ``FixTransformer`` visits no other.
        self.block_parent: dict[int, Optional[cst.CSTNode]] = {}
        self.block_of: dict[int, cst.CSTNode] = {}
        self._blocks: list[cst.CSTNode] = []
        self.name_used_otherwise: dict[str, bool] = {}  # ``_uses_name_otherwise`` of this module, by name

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._lines is not None and not isinstance(node, cst.Module) and not self._spans_a_line(node):
            return False
        if isinstance(node, _BLOCKS):
            self.block_parent[id(node)] = self._blocks[-1] if self._blocks else None
            self._blocks.append(node)
        return super().on_visit(node)

    def _spans_a_line(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` spans one of ``lines`` (its decorators too: a def's position starts after them)."""
        where = self.get_metadata(PositionProvider, node, None)
        if where is None:
            return True
        first = where.start.line
        for decorator in getattr(node, "decorators", ()):
            first = min(first, self.get_metadata(PositionProvider, decorator).start.line)
        index = bisect.bisect_left(self._lines, first)
        return index < len(self._lines) and self._lines[index] <= where.end.line

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self._blocks and self._blocks[-1] is original_node:
            self._blocks.pop()
        super().on_leave(original_node)

    def _at(self, node: cst.CSTNode) -> tuple[int, int]:
        if self._blocks:
            self.block_of[id(node)] = self._blocks[-1]
        start = self.get_metadata(PositionProvider, node).start
        return start.line, start.column

    def visit_With(self, node: cst.With) -> None:
        self.withs[self._at(node)] = node
        for item in node.items:
            self.items[self._at(item.item)] = item

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.setdefault(self._at(node), []).append(node)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self.decorators[self._at(node.decorator)] = node
        self.block_of[id(node)] = self._blocks[-1]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions[self._at(node)] = node


def node_positions(module: cst.Module, lines: Optional[Collection[int]] = None) -> _Nodes:
    """The nodes a fix can name in ``module``, by position (one walk, reusable for its findings); with
    ``lines``, those on these lines only (the walk skips what spans none of them: two thirds of the time
    of fixing a big module went to walking all its nodes)."""
    nodes = _Nodes(lines)
    MetadataWrapper(module, unsafe_skip_copy=True).visit(nodes)
    return nodes
