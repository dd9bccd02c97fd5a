"""The children of an ``ast`` node that may hold an expression: ``ast.iter_child_nodes`` without operators
and load/store contexts, pushed on a stack (walking a tree this way is several times faster than
``ast.walk``, whose generators dominate the summarising of large files)."""
from __future__ import annotations

import ast

# Fields that never hold an expression: operators and load/store contexts.
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "type_comment", "kind", "conversion", "level", "is_async"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def push_children(node: ast.AST, stack: list) -> None:
    """``stack.extend(ast.iter_child_nodes(node))`` without operators and contexts, and faster."""
    kind = type(node)
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in _NOT_CHILDREN)
    for name in fields:
        value = getattr(node, name, None)
        if value is None:
            continue
        if isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            stack.append(value)
