"""What an if-branch's test says about the places it names: which it finds missing or stale, so that the
branch (re)allocates them (``if self._buf is None``, ``if key not in cache``, ``if not hasattr(self, "_x")``,
``if buf.shape[0] < n``, ``if needs_alloc(buf)``), and which it finds there (a feature switch: ``if self._pool
is not None``, ``if isinstance(x, torch.Tensor) and torch.isnan(x).any()``)."""
from __future__ import annotations

import ast
from typing import Optional

from .syntax_children import push_children

# Calls that test that their first argument is there (and of a kind); under `not`, that it is missing.
_PRESENCE_TESTS = frozenset({"isinstance", "hasattr", "callable", "is_tensor"})


def missing_names(test: ast.AST) -> list[str]:
    """The dotted names ``test`` finds missing (``is None``, ``not in``, ``not x``, ``not hasattr``) or stale (a
    size, device or other comparison, a predicate called on it), sorted. A stale test of a name the test also
    finds present (``x is not None and x.shape[0] < n``, ``isinstance(x, T) and torch.isnan(x).any()``) repairs
    or resizes what is there: not an allocation of the first call's."""
    missing: set[str] = set()
    stale: set[str] = set()
    present: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(test, True)]
    while stack:
        node, positive = stack.pop()
        kind = type(node)  # syntax nodes are of their exact classes: `is` tests, cheaper than isinstance
        if kind is ast.UnaryOp and type(node.op) is ast.Not:
            stack.append((node.operand, not positive))
        elif kind is ast.BoolOp:
            stack.extend((value, positive) for value in node.values)
        elif kind is ast.NamedExpr:
            stack.append((node.value, positive))
        elif (kind is ast.Name or kind is ast.Attribute) and (name := dotted_name(node)) is not None:
            # `if self._pool:` finds it there; `if not self._pool:` missing
            (present if positive else missing).add(name)
        elif kind is ast.Compare and len(node.ops) == 1:
            op, left, right = node.ops[0], node.left, node.comparators[0]
            if isinstance(right, ast.Constant) and right.value is None and isinstance(op, (ast.Is, ast.IsNot, ast.Eq,
                                                                                        ast.NotEq)):
                absent = isinstance(op, (ast.Is, ast.Eq)) == positive
                (missing if absent else present).update(_subjects(left))
            elif isinstance(op, (ast.In, ast.NotIn)):
                (present if isinstance(op, ast.In) == positive else missing).update(_subjects(right))
            elif positive:  # a size, a device, a dtype that no longer fits
                stale.update(_subjects(left) | _subjects(right))
        elif kind is ast.Call and _call_name(node) in _PRESENCE_TESTS and node.args:
            subject = _attribute_of(node) if _call_name(node) == "hasattr" else _subjects(node.args[0])
            (present if positive else missing).update(subject)
        elif kind is ast.Call and _getattr_name(node) is not None:
            (present if positive else missing).add(_getattr_name(node))
        else:  # `needs_alloc(buf)`, a chained comparison, an arithmetic test
            stale.update(_subjects(node))
    stale = {name for name in stale if not any(name == p or name.startswith(p + ".") for p in present)}
    return sorted(missing | stale)


# A clause: literals (name, is_none) of which one holds at least. Tests with more are not followed.
_MAX_CLAUSES = 8
_MAX_LITERALS = 4


def none_clauses(test: ast.AST, holds: bool, aliases: Optional[dict[str, tuple[list, list]]] = None,
                 depth: int = 0) -> list[list[tuple[str, bool]]]:
    """What ``test`` says of plain names being None where it ``holds`` (or fails), as clauses that all hold:
    ``x is None`` holding gives ``[[("x", True)]]``; ``a is None and b is None`` failing gives ``[[("a", False),
    ("b", False)]]``; a bare ``x`` holding says it is not None. ``aliases``: what a local says where it holds and
    where it fails, from the test it was bound to (``use_x = x is not None``). Names with a dot are left out (a
    call may set a field); so is what grows past a few clauses (a weaker answer, never a wrong one)."""
    if depth > 8:
        return []
    kind = type(test)
    if kind is ast.UnaryOp and type(test.op) is ast.Not:
        return none_clauses(test.operand, not holds, aliases, depth + 1)
    if kind is ast.BoolOp:
        parts = [none_clauses(value, holds, aliases, depth + 1) for value in test.values]
        if (type(test.op) is ast.And) == holds:  # each part holds (an `and`), or each fails (an `or`)
            return [clause for part in parts for clause in part][:_MAX_CLAUSES]
        # one part holds, or one fails: each clause of the answer takes a clause of every part
        if not all(parts):
            return []
        combined: list[list[tuple[str, bool]]] = [[]]
        for part in parts:
            combined = [clause + other for clause in combined for other in part]
            if len(combined) > _MAX_CLAUSES or any(len(clause) > _MAX_LITERALS for clause in combined):
                return []
        return combined
    if kind is ast.Name:
        if aliases and test.id in aliases:
            return aliases[test.id][0 if holds else 1]
        return [[(test.id, False)]] if holds else []
    if kind is ast.Compare and len(test.ops) == 1 and type(test.left) is ast.Name \
            and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return [[(test.left.id, (type(test.ops[0]) is ast.Is) == holds)]]
    return []


def _call_name(call: ast.Call) -> str:
    name = dotted_name(call.func)
    return name.rpartition(".")[2] if name else ""


def _attribute_of(call: ast.Call) -> set[str]:
    """``hasattr(self, "_cu")`` tests ``self._cu``."""
    owner = dotted_name(call.args[0])
    if owner is not None and len(call.args) > 1 and isinstance(call.args[1], ast.Constant) \
            and isinstance(call.args[1].value, str):
        return {f"{owner}.{call.args[1].value}"}
    return set()


def _getattr_name(call: ast.Call) -> Optional[str]:
    """``getattr(self, "_buf", None)`` reads ``self._buf``."""
    func = call.func
    if type(func) is ast.Name and func.id == "getattr" and len(call.args) in (2, 3):
        found = _attribute_of(call)
        return found.pop() if found else None
    return None


def _subjects(node: ast.AST) -> set[str]:
    """Every dotted name in ``node`` (``getattr(o, "a")`` as ``o.a``), a chain's prefixes too (``a.b``: ``a``)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        sub = stack.pop()
        kind = type(sub)
        if kind is ast.Name:
            found.add(sub.id)
            continue
        if kind is ast.Attribute:
            name = dotted_name(sub)
            if name is not None:  # a whole chain: its prefixes are what its inner nodes would add
                found.add(name)
                while "." in name:
                    name = name.rpartition(".")[0]
                    found.add(name)
                continue
        elif kind is ast.Call:
            name = _getattr_name(sub)
            if name:
                found.add(name)
        push_children(sub, stack)
    return found


def dotted_name(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a chain of attributes on a name, None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None
