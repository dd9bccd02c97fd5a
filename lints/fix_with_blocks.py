"""Edits of a ``with`` statement that keep its comments: its body unwrapped into the enclosing block, its last
items dropped. Part of the fixes (``lints.fixer``)."""
from __future__ import annotations

from typing import Union

import libcst as cst


def _drop_last_items(node: cst.With, items: list[cst.WithItem],
                     old_last_comma: Union[cst.Comma, cst.MaybeSentinel]) -> cst.With:
    """``node`` with ``items`` left, its old last item(s) dropped.

    The new last item keeps the comment after its own comma (``a,  # why``): it is about ``a``.
    Comments on the dropped items' lines go with them (as when a first item is dropped). A
    trailing comma stays only where there was one.
    """
    new_last = items[-1]
    own = new_last.comma
    rpar = node.rpar
    if not (isinstance(own, cst.Comma) and isinstance(own.whitespace_after, cst.ParenthesizedWhitespace)
            and isinstance(rpar, cst.RightParen)):
        # One line, or no comment of its own: the new last item takes over the old last one's comma.
        items[-1] = new_last.with_changes(comma=old_last_comma)
        return node.with_changes(items=items)
    closing = rpar.whitespace_before  # the line the `)` was on keeps its indentation
    after = own.whitespace_after.with_changes(
        indent=closing.indent if isinstance(closing, cst.ParenthesizedWhitespace) else True,
        last_line=closing.last_line if isinstance(closing, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(""))
    if isinstance(old_last_comma, cst.Comma):  # `a,  # why` + newline + `)`
        items[-1] = new_last.with_changes(comma=own.with_changes(whitespace_after=after))
        return node.with_changes(items=items, rpar=rpar.with_changes(whitespace_before=cst.SimpleWhitespace("")))
    # `a  # why` + newline + `)`: no comma where there was no trailing one (`with (a,):` needs 3.9+)
    items[-1] = new_last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(items=items, rpar=rpar.with_changes(whitespace_before=after))


class _Comments(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Comment] = []

    def visit_Comment(self, node: cst.Comment) -> None:
        self.found.append(node)


def _header_comments(with_node: cst.With) -> list[cst.EmptyLine]:
    """Comments inside a (parenthesized) ``with`` header, as lines of their own."""
    collect = _Comments()
    for part in (with_node.lpar, *with_node.items, with_node.rpar, with_node.whitespace_before_colon):
        if isinstance(part, cst.CSTNode):
            part.visit(collect)
    return [cst.EmptyLine(indent=True, comment=comment) for comment in collect.found]


def _unwrapped(with_node: cst.With) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
    """The body of ``with_node`` as statements of the enclosing block, comments kept."""
    body = with_node.body
    inside = _header_comments(with_node)  # `with (  # why` ... `):` keeps those too
    if isinstance(body, cst.SimpleStatementSuite):
        line = cst.SimpleStatementLine(body=body.body, leading_lines=[*with_node.leading_lines, *inside],
                                       trailing_whitespace=body.trailing_whitespace)
        return [line], []
    assert isinstance(body, cst.IndentedBlock)
    moved: list[cst.EmptyLine] = [*with_node.leading_lines, *inside]
    if body.header.comment is not None:  # `with torch.inference_mode():  # why` keeps its comment
        moved.append(cst.EmptyLine(indent=True, comment=body.header.comment))
    statements = list(body.body)
    statements[0] = statements[0].with_changes(leading_lines=[*moved, *statements[0].leading_lines])
    return statements, list(body.footer)
