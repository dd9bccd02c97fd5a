"""What one module says, as plain JSON data: no syntax nodes, so it can be cached and shared.

A summary is built from CPython's ``ast`` in one walk (about ten times faster than libcst);
rules and the project analysis read only summaries, and libcst is used only to rewrite the
files that have fixes. Every position is ``(line, column)`` with 1-based lines and 0-based
columns counted in characters, as libcst and flake8 count them. The records' layouts and the
tagged form of expressions are in ``lints/summary_records.py``.
"""
from __future__ import annotations

import ast
import re
import warnings
from typing import Iterable, Iterator, Optional

from .branch_tests import dotted_name, missing_names, none_clauses
from .module_names import relative_import_base
from .names import is_notable_call
from .sources import source_lines
from .syntax_children import push_children
from .summary_records import (MODULE_SCOPE, SCHEMA, Assertion, Assign, Call, Decorator, Guard, Item, Return, With,
                              callee_leaf, new_function, values_taken)

_UNKNOWN = ["?"]
_FRESH = ["f"]
# Expressions whose value is always a new object that holds no other (on tensors too: `b + x` allocates,
# `b += x` does not). Not `+b` (a tensor gives itself back), nor displays (`[b]` holds b).
_FRESH_KINDS = frozenset({ast.BinOp, ast.Compare, ast.JoinedStr})


class _Scope:
    """The facts of one function (or of the module's top level) as they are collected."""

    __slots__ = ("data", "withs", "guards", "qual", "blocks", "none_tests", "node", "_bound_once")

    def __init__(self, data: dict, qual: str, node: Optional[ast.AST] = None) -> None:
        self.data = data
        self.qual = qual
        self.node = node  # the function's definition (None for the module's top level)
        self._bound_once: Optional[set[str]] = None
        self.withs: list[int] = []  # indices of the enclosing with-statements, innermost last
        self.guards: list[int] = []  # indices of the enclosing if-branches, innermost last
        self.blocks = 0  # how many loop, try or match bodies are around
        # local -> the test of None it was bound to, at the top of the function, not bound since (`has_x = x is
        # not None`): a test of the local reads that test (``branch_tests.none_clauses``)
        self.none_tests: dict[str, tuple[list, list]] = {}

    def tests_read_here(self) -> dict[str, tuple[list, list]]:
        """The locals' tests of None a test here reads: every one outside loop and try bodies (no binding can come
        between, but one written between, which drops it); in such a body, those of locals bound once (a later
        binding in the body may run before the next round's test); never one of a name a function (this one, or
        one nested in it) declares global or nonlocal: another function may bind it between."""
        if not self.none_tests:
            return self.none_tests
        return {name: test for name, test in self.none_tests.items()
                if name not in self.data["other_binds"] and name not in self.data["globals"]
                and (not self.blocks or self.bound_once(name))}

    def bound_once(self, name: str) -> bool:
        """Whether the function binds ``name`` in one place alone (no other assignment, loop or with target,
        walrus, ``del``, ``global`` or ``nonlocal`` of it, in it or in a function nested in it)."""
        if self._bound_once is None:
            counts: dict[str, int] = {}
            stack = list(ast.iter_child_nodes(self.node)) if self.node is not None else []
            while stack:
                sub = stack.pop()
                kind = type(sub)
                bound: Optional[str] = None
                if kind is ast.Name and type(sub.ctx) is not ast.Load:
                    bound = sub.id
                elif kind is ast.Global or kind is ast.Nonlocal:
                    for declared in sub.names:
                        counts[declared] = 2
                elif kind is ast.arg:
                    bound = sub.arg
                elif kind is ast.alias:
                    bound = (sub.asname or sub.name).split(".", 1)[0]
                elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                    bound = sub.name
                else:  # an except target, a match capture
                    for field in ("name", "rest"):
                        value = getattr(sub, field, None)
                        if isinstance(value, str) and kind is not ast.ImportFrom:
                            counts[value] = counts.get(value, 0) + 1
                if bound is not None:
                    counts[bound] = counts.get(bound, 0) + 1
                stack.extend(ast.iter_child_nodes(sub))
            self._bound_once = {name for name, count in counts.items() if count == 1}
        return name in self._bound_once


class _Summarizer:
    def __init__(self, text: str, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self._ascii = text.isascii()
        self._lines: Optional[list[str]] = None if self._ascii else source_lines(text)
        self.functions: dict[str, dict] = {}
        self.classes: dict[str, dict] = {}
        self.star_imports: list[str] = []
        self._deferring = 0  # > 0 inside a lambda's body or a comprehension's lazy parts (see "deferred")
        self._deferred_nodes: set[int] = set()  # ids of such parts met by ``walk_expr``, walked once each
        self._open_functions: list[dict] = []  # the functions being walked, outermost first (class bodies between)

    # positions -----------------------------------------------------------------
    def pos(self, node: ast.AST) -> tuple[int, int]:
        line, col = node.lineno, node.col_offset
        if not self._ascii and 0 < line <= len(self._lines):
            text = self._lines[line - 1]
            if not text.isascii():
                col = len(text.encode("utf-8")[:col].decode("utf-8", "replace"))
        return line, col

    # imports -------------------------------------------------------------------
    def _absolute(self, node: ast.ImportFrom) -> str:
        base = relative_import_base(self.module, self.is_package, node.level)
        return ".".join([*base, *([node.module] if node.module else [])])

    def _import(self, node: ast.AST, scope: _Scope) -> None:
        table = scope.data["imports"]
        for alias in node.names:
            scope.none_tests.pop((alias.asname or alias.name).split(".", 1)[0], None)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    table[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    table[head] = head
        else:
            source = self._absolute(node)
            for alias in node.names:
                if alias.name == "*":
                    if scope.qual == MODULE_SCOPE:
                        self.star_imports.append(source)
                    continue
                table[alias.asname or alias.name] = f"{source}.{alias.name}" if source else alias.name

    # expressions ---------------------------------------------------------------
    def expr(self, node: Optional[ast.AST], scope: _Scope) -> list:
        """The tagged form of ``node``; records every call it holds in ``scope``."""
        if node is None:
            return ["k", None]
        kind = type(node)
        if kind is ast.Name:
            return ["n", node.id]
        if kind is ast.Attribute:
            base = self.expr(node.value, scope)
            if base[0] == "n":
                return ["n", f"{base[1]}.{node.attr}"]
            return ["a", base, node.attr]
        if kind is ast.Call:
            index = self.call(node, scope)
            return index if isinstance(index, list) else ["c", index]
        if kind is ast.Yield or kind is ast.YieldFrom:
            self._return(node.value, node, scope, True)
            return _UNKNOWN
        if kind is ast.Constant:
            return ["k", _plain_constant(node.value)]
        if kind is ast.BoolOp:
            return ["b", [self.expr(v, scope) for v in node.values]]
        if kind is ast.IfExp:
            self.walk_expr(node.test, scope)
            return ["i", self.expr(node.body, scope), self.expr(node.orelse, scope)]
        if kind is ast.Subscript:
            self.walk_expr(node.slice, scope)
            return ["s", self.expr(node.value, scope)]
        if kind is ast.Lambda:
            self._deferring += 1
            try:
                return ["l", self.expr(node.body, scope)]
            finally:
                self._deferring -= 1
        if kind is ast.NamedExpr:
            value = self.expr(node.value, scope)
            self._assign(node.target, value, None, node, scope)
            return value
        if kind is ast.Await:
            return self.expr(node.value, scope)
        if kind is ast.ListComp or kind is ast.SetComp or kind is ast.GeneratorExp:
            for number, gen in enumerate(node.generators):
                self._deferring += number > 0  # only the first iterable is evaluated where the comprehension is
                iterated = self.expr(gen.iter, scope)
                self._deferring += number == 0
                if isinstance(gen.target, ast.Name):
                    scope.data["assigns"].append(self._fact(["n", gen.target.id], iterated, None, gen.target, scope))
                else:
                    self.walk_expr(gen.target, scope)
                for test in gen.ifs:
                    self.walk_expr(test, scope)
                self._deferring -= 1
            self._deferring += 1
            try:
                return ["m", self.expr(node.elt, scope)]
            finally:
                self._deferring -= 1
        if kind is ast.Tuple and isinstance(node.ctx, ast.Load):
            elements = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    self.walk_expr(element.value, scope)
                    elements.append(_UNKNOWN)
                else:
                    elements.append(self.expr(element, scope))
            return ["t", elements]
        names = _registry_names(node)
        if names:
            return ["r", names]
        self.walk_expr(node, scope)
        fresh = kind in _FRESH_KINDS or (kind is ast.UnaryOp and not isinstance(node.op, ast.UAdd))
        return _FRESH if fresh else _UNKNOWN

    def walk_expr(self, node: ast.AST, scope: _Scope) -> None:
        """Record the calls inside ``node`` (an expression we do not model), iteratively."""
        stack = [node]
        deferred_nodes = self._deferred_nodes
        while stack:
            current = stack.pop()
            if current is _END_DEFERRED:
                self._deferring -= 1
                continue
            if deferred_nodes and id(current) in deferred_nodes:
                deferred_nodes.discard(id(current))
                self._deferring += 1
                stack.append(_END_DEFERRED)  # popped once all of ``current`` is walked
            kind = type(current)
            if kind in _MODELLED:
                self.expr(current, scope)
                continue
            if kind in _LEAVES:
                continue
            if kind in _COMPREHENSIONS:
                for number, gen in enumerate(current.generators):
                    if isinstance(gen.target, ast.Name):
                        self._deferring += number > 0
                        scope.data["assigns"].append(self._fact(["n", gen.target.id], self.expr(gen.iter, scope),
                                                                None, gen.target, scope))
                        self._deferring -= number > 0
                    lazy = gen.ifs if number == 0 else [gen.iter, *gen.ifs]
                    deferred_nodes.update(id(part) for part in lazy)
                parts = (getattr(current, name, None) for name in ("elt", "key", "value"))
                deferred_nodes.update(id(part) for part in parts if part is not None)
            push_children(current, stack)

    def call(self, node: ast.Call, scope: _Scope):
        func = node.func
        # getattr(x, "name") is x.name; with a default it is `x.name or default`
        if (isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) in (2, 3)
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                and node.args[1].value.isidentifier() and not node.keywords):
            base = self.expr(node.args[0], scope)
            if base[0] == "n":
                named = ["n", f"{base[1]}.{node.args[1].value}"]
                return named if len(node.args) == 2 else ["b", [named, self.expr(node.args[2], scope)]]
        f = self.expr(func, scope)
        args = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.walk_expr(arg.value, scope)
                args.append(_UNKNOWN)
            else:
                args.append(self.expr(arg, scope))
        kwargs = {}
        for kw in node.keywords:
            value = self.expr(kw.value, scope)
            if kw.arg is not None:
                kwargs[kw.arg] = value
        line, col = self.pos(node)
        calls = scope.data["calls"]
        calls.append(Call(f, args, kwargs, line, col, scope.withs[-1] if scope.withs else -1,
                          scope.guards[-1] if scope.guards else -1))
        if self._deferring:
            scope.data["deferred"].append(len(calls) - 1)
        if is_notable_call(callee_leaf(f), kwargs):
            scope.data["notable"].append(len(calls) - 1)
        return len(calls) - 1

    # statements ----------------------------------------------------------------
    def _fact(self, target: list, value: list, op: Optional[str], node: ast.AST, scope: _Scope) -> Assign:
        line, col = self.pos(node)
        return Assign(target, value, op, line, col, scope.withs[-1] if scope.withs else -1,
                      scope.guards[-1] if scope.guards else -1)

    def _assign(self, target: ast.AST, value: list, op: Optional[str], node: ast.AST, scope: _Scope) -> None:
        if type(target) is ast.Name:
            scope.none_tests.pop(target.id, None)
        if isinstance(target, (ast.Tuple, ast.List)):
            known = value != _UNKNOWN and op is None
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    known = False  # the elements after a starred one are counted from the end
                    self._assign(element.value, _UNKNOWN, op, node, scope)
                    continue
                if not known:
                    part = _UNKNOWN
                elif value[0] == "t" and len(value[1]) == len(target.elts):
                    part = value[1][index]  # `a, b = x, y`
                else:
                    part = ["u", value, index]
                self._assign(element, part, op, node, scope)
            return
        target_expr = self.expr(target, scope)
        if target_expr[0] == "n" and "." not in target_expr[1] and value[0] == "k" and op is None:
            scope.data["locals"].append(target_expr[1])  # `x = 0` only shadows names
            return
        scope.data["assigns"].append(self._fact(target_expr, value, op, node, scope))

    def _guard(self, test: ast.AST, scope: _Scope, orelse: bool, facts: tuple[list, list]) -> int:
        """A guard record for ``test``'s branch (``orelse``: its else-branch); ``facts``: ``_test_facts(test)``,
        found once for both branches."""
        names, missing = facts
        guards = scope.data["guards"]
        guards.append(Guard(names, scope.guards[-1] if scope.guards else -1, orelse, test.lineno, missing,
                            none_clauses(test, not orelse, scope.tests_read_here())))
        return len(guards) - 1

    def _test_facts(self, test: ast.AST) -> tuple[list, list]:
        """The names a branch's test reads, and those it finds missing or stale (``missing_names``)."""
        names: set[str] = set()
        stack = [test]
        while stack:
            sub = stack.pop()
            push_children(sub, stack)
            if isinstance(sub, (ast.Name, ast.Attribute)):
                dotted = _dotted(sub)
                if dotted:
                    names.add(dotted)
            elif (isinstance(sub, ast.Constant) and isinstance(sub.value, str) and len(sub.value) < 80
                  and _plain_constant(sub.value) is not None):
                names.add(f"'{sub.value}'")
        return sorted(names), missing_names(test)

    def _declared(self, stmt: ast.AST) -> None:
        """A ``global`` or ``nonlocal`` (in a function or a class body): a name each enclosing function's own may
        be bound through."""
        for data in self._open_functions:
            for name in stmt.names:
                self._bound_otherwise_in(data, name)

    def _bound_otherwise(self, scope: _Scope, name: str) -> None:
        scope.none_tests.pop(name, None)
        self._bound_otherwise_in(scope.data, name)

    @staticmethod
    def _bound_otherwise_in(data: dict, name: str) -> None:
        """``name`` is bound in the function otherwise than by an assignment its records show (see
        ``other_binds``)."""
        if name not in data["other_binds"]:
            data["other_binds"].append(name)

    def _assertion(self, test: ast.AST, holds: bool, line: int, scope: _Scope) -> None:
        """An assertion record: after ``line``, ``test`` ``holds`` (or fails), if it tells of None."""
        clauses = none_clauses(test, holds, scope.tests_read_here())
        if clauses:
            scope.data["asserts"].append(Assertion(scope.guards[-1] if scope.guards else -1,
                                                   scope.withs[-1] if scope.withs else -1, line, clauses))

    def body(self, statements: Iterable[ast.stmt], scope: _Scope, record: Optional[With] = None) -> None:
        """Walk a block; ``record`` (a with-statement) learns which of its statements are bare calls or withs."""
        pushed = 0
        calls = scope.data["calls"]
        stmt = None
        for stmt in statements:
            before = len(scope.data["withs"])
            calls_before = len(calls)
            self.statement(stmt, scope)
            if record is not None:
                value = stmt.value if isinstance(stmt, ast.Expr) else None
                if isinstance(value, ast.Await):
                    value = value.value
                if isinstance(value, ast.Call) and len(calls) > calls_before:
                    record.bare_calls.append(len(calls) - 1)
                elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                    record.inner_withs.append(before)
            # `stack.enter_context(ctx)`: ctx is active until the end of this block
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "enter_context"
                    and len(stmt.value.args) == 1):
                call = scope.data["calls"][-1] if scope.data["calls"] else None
                line, col = self.pos(stmt.value.args[0])
                withs = scope.data["withs"]
                withs.append(With(line, col, [Item(call.args[0] if call else _UNKNOWN, line, col, False)],
                                  scope.withs[-1] if scope.withs else -1, True, stmt.end_lineno, 0, [], []))
                scope.withs.append(len(withs) - 1)
                pushed += 1
        if pushed:
            last = stmt.end_lineno if stmt is not None else 0
            withs = scope.data["withs"]
            for index in scope.withs[-pushed:]:
                withs[index] = withs[index]._replace(end_line=last)
            del scope.withs[-pushed:]

    def block(self, statements: list[ast.stmt], scope: _Scope) -> None:
        """A body that may run without what comes before or after it (see ``blocks``)."""
        if statements:
            scope.data["blocks"].append([statements[0].lineno, statements[-1].end_lineno])
            scope.blocks += 1
            try:
                self.body(statements, scope)
            finally:
                scope.blocks -= 1

    def statement(self, stmt: ast.stmt, scope: _Scope) -> None:
        kind = type(stmt)
        if kind is ast.Expr:
            self.expr(stmt.value, scope)
        elif kind is ast.Assign:
            value = self.expr(stmt.value, scope)
            for target in stmt.targets:
                self._assign(target, value, None, stmt, scope)
            if len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name and not scope.guards \
                    and not scope.blocks and not scope.withs:
                aliases = scope.tests_read_here()
                read = (none_clauses(stmt.value, True, aliases), none_clauses(stmt.value, False, aliases))
                if read[0] or read[1]:
                    scope.none_tests[stmt.targets[0].id] = read
        elif kind is ast.AnnAssign:
            value = self.expr(stmt.value, scope) if stmt.value is not None else None
            if isinstance(stmt.target, (ast.Name, ast.Attribute)):
                annotation = _dotted(stmt.annotation) or _string_annotation(stmt.annotation)
                target = _dotted(stmt.target)
                if annotation and target:
                    scope.data["ann"][target] = annotation
            if value is not None:
                self._assign(stmt.target, value, None, stmt, scope)
        elif kind is ast.AugAssign:
            if type(stmt.target) is ast.Name:
                scope.none_tests.pop(stmt.target.id, None)
            value = self.expr(stmt.value, scope)
            scope.data["assigns"].append(self._fact(self.expr(stmt.target, scope), value,
                                                    type(stmt.op).__name__, stmt, scope))
        elif kind is ast.Return:
            self._return(stmt.value, stmt, scope, False)
        elif kind is ast.If:
            self.walk_expr(stmt.test, scope)
            facts = self._test_facts(stmt.test)
            scope.guards.append(self._guard(stmt.test, scope, False, facts))
            self.body(stmt.body, scope)
            scope.guards.pop()
            if stmt.orelse:
                scope.guards.append(self._guard(stmt.test, scope, True, facts))
                self.body(stmt.orelse, scope)
                scope.guards.pop()
            elif type(stmt.body[-1]) in _LEAVING:  # `if x is None: raise ...`: what follows runs where it failed
                self._assertion(stmt.test, False, stmt.end_lineno, scope)
        elif kind is ast.With or kind is ast.AsyncWith:
            items = []
            for item in stmt.items:
                value = self.expr(item.context_expr, scope)
                line, col = self.pos(item.context_expr)
                items.append(Item(value, line, col, item.optional_vars is not None))
                if item.optional_vars is not None and not isinstance(item.optional_vars, ast.Name):
                    for sub in ast.walk(item.optional_vars):  # `with ctx as (a, b)`: bound, not recorded
                        if type(sub) is ast.Name:
                            self._bound_otherwise(scope, sub.id)
                if isinstance(item.optional_vars, ast.Name):
                    scope.none_tests.pop(item.optional_vars.id, None)
                    scope.data["assigns"].append(self._fact(["n", item.optional_vars.id], ["?"], "with",
                                                            item.optional_vars, scope))
            line, col = self.pos(stmt)
            withs = scope.data["withs"]
            record = With(line, col, items, scope.withs[-1] if scope.withs else -1, False, stmt.end_lineno,
                          len(stmt.body), [], [])
            withs.append(record)
            scope.withs.append(len(withs) - 1)
            self.body(stmt.body, scope, record)
            scope.withs.pop()
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            self._bound_otherwise(scope, stmt.name)
            self.function(stmt, scope, None)
        elif kind is ast.ClassDef:
            self._bound_otherwise(scope, stmt.name)
            self.klass(stmt, scope)
        elif kind is ast.Import or kind is ast.ImportFrom:
            self._import(stmt, scope)
        elif kind is ast.Global or kind is ast.Nonlocal:
            scope.data["globals"].extend(stmt.names)
            self._declared(stmt)
        elif kind is ast.Delete:
            for target in stmt.targets:
                if type(target) is ast.Name:
                    self._bound_otherwise(scope, target.id)
                else:
                    self.walk_expr(target, scope)
        elif kind in (ast.For, ast.AsyncFor):
            iterable = self.expr(stmt.iter, scope)
            self._assign(stmt.target, ["s", iterable] if isinstance(stmt.target, (ast.Name, ast.Tuple, ast.List))
                         else _UNKNOWN, None, stmt, scope)
            self.block(stmt.body, scope)
            self.block(stmt.orelse, scope)
        elif kind is ast.While:
            # the test runs again before each round, as the body does
            scope.data["blocks"].append([stmt.test.lineno, stmt.test.end_lineno])
            self.walk_expr(stmt.test, scope)
            self.block(stmt.body, scope)
            self.block(stmt.orelse, scope)
        elif kind is ast.Try or kind is getattr(ast, "TryStar", None):
            self.block(stmt.body, scope)
            for handler in stmt.handlers:
                if handler.name:
                    self._bound_otherwise(scope, handler.name)
                self.block(handler.body, scope)
            self.block(stmt.orelse, scope)
            self.block(stmt.finalbody, scope)
        elif kind is getattr(ast, "Match", None):
            self.walk_expr(stmt.subject, scope)
            for case in stmt.cases:
                for sub in ast.walk(case.pattern):  # captures: `case {"k": name}`, `case [*rest]`, `**rest`
                    for captured in (getattr(sub, "name", None), getattr(sub, "rest", None)):
                        if isinstance(captured, str):
                            self._bound_otherwise(scope, captured)
                self.block(case.body, scope)
        elif kind is ast.Assert:
            self.walk_expr(stmt.test, scope)
            if stmt.msg is not None:
                self.walk_expr(stmt.msg, scope)
            self._assertion(stmt.test, True, stmt.end_lineno, scope)
        else:  # raise, del, pass, ...
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.walk_expr(child, scope)

    def _return(self, value: Optional[ast.AST], node: ast.AST, scope: _Scope, is_yield: bool) -> None:
        line, col = self.pos(node)
        scope.data["rets"].append(Return(self.expr(value, scope) if value is not None else ["k", None],
                                         line, col, scope.withs[-1] if scope.withs else -1, is_yield))

    # definitions ---------------------------------------------------------------
    def function(self, node: ast.AST, outer: _Scope, cls: Optional[str]) -> None:
        parent = None if outer.qual == MODULE_SCOPE or cls is not None else outer.qual
        prefix = cls or parent
        qual = f"{prefix}.{node.name}" if prefix else node.name
        if qual in self.functions:  # a redefinition (property setters, overloads): keep both, the last wins calls
            qual = f"{qual}@{node.lineno}"
        line, col = self.pos(node)
        data = new_function(node.name, qual, line, col, cls, parent)
        scope = _Scope(data, qual, node)
        for dec in node.decorator_list:
            dline, dcol = self.pos(dec)
            data["dec"].append(Decorator(self.expr(dec, scope), dline, dcol))
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        for arg in [*positional, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
                    *([args.kwarg] if args.kwarg else [])]:
            data["params"].append(arg.arg)
            annotation = arg.annotation
            if annotation is not None:
                dotted = _dotted(annotation) or _string_annotation(annotation)
                if dotted:
                    data["ann"][arg.arg] = dotted
        for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            data["defaults"][arg.arg] = self.expr(default, outer)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is not None:
                data["defaults"][arg.arg] = self.expr(default, outer)
        if node.returns is not None and (returned := _return_annotation(node.returns)) is not None:
            data["ret"] = returned  # a class's dotted name, or a list of them for `tuple[A, B]`
        self.functions[qual] = data
        if parent is not None:
            outer.data["nested"].append(qual)
        self._open_functions.append(data)
        try:
            self.body(node.body, scope)
        finally:
            self._open_functions.pop()

    def klass(self, node: ast.ClassDef, outer: _Scope) -> None:
        prefix = None if outer.qual == MODULE_SCOPE else outer.qual
        qual = f"{prefix}.{node.name}" if prefix else node.name
        line, col = self.pos(node)
        bases = [b for b in (_dotted(base) for base in node.bases) if b]
        methods: list[str] = []
        self.classes[qual] = {"name": node.name, "qual": qual, "line": line, "bases": bases, "methods": methods,
                              "scope": outer.qual}
        # what may make `Cls()` give back an object that exists: a metaclass, a decorator, a base that is no name
        # (`with_metaclass(M, B)`), `__new__` bound in the body otherwise than by a def
        makers = [_dotted(keyword.value) or "?" for keyword in node.keywords if keyword.arg == "metaclass"]
        makers += [_dotted(dec.func if isinstance(dec, ast.Call) else dec) or "?" for dec in node.decorator_list]
        makers += ["?" for base in node.bases if not _dotted(base)]
        aliases: dict[str, str] = {}  # `refresh = load` in the body: a method under another name
        for stmt in node.body:
            targets = stmt.targets if type(stmt) is ast.Assign else [stmt.target] \
                if type(stmt) is ast.AnnAssign and stmt.value is not None else []
            for target in targets:
                if type(target) is ast.Name:
                    if target.id == "__new__":
                        makers.append("__new__")
                    value = _dotted(stmt.value)
                    if value:
                        aliases[target.id] = value
        if makers:
            self.classes[qual]["makers"] = makers
        if aliases:
            self.classes[qual]["aliases"] = aliases
        if any((_dotted(dec.func if isinstance(dec, ast.Call) else dec) or "").rpartition(".")[2] == "dataclass"
               for dec in node.decorator_list):
            # a record: the names its body declares are the fields each instance is built with
            self.classes[qual]["record_fields"] = [
                stmt.target.id for stmt in node.body if isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name) and not _is_class_var(stmt.annotation)]
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(stmt, outer, qual)
                methods.append(stmt.name)
            elif isinstance(stmt, ast.ClassDef):
                self.klass(stmt, outer)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                annotation = _dotted(stmt.annotation) or _string_annotation(stmt.annotation)
                if annotation:
                    self.classes[qual].setdefault("fields", {})[stmt.target.id] = annotation
            elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
                self._declared(stmt)
            else:  # class attributes are not module names: only the calls they make count
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.expr):
                        self.walk_expr(child, outer)


# statements after which the rest of a block does not run
_LEAVING = frozenset({ast.Raise, ast.Return, ast.Continue, ast.Break})
_MODELLED = frozenset({ast.Call, ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom})
_END_DEFERRED = object()  # ``walk_expr``'s marker: the lazy part walked before it is done
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del})
_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})


def _plain_constant(value):
    """``value`` if JSON gives it back as it is, else None (as for bytes, ``...`` and complex numbers).
    Summaries travel and are cached as JSON: an int over 4300 digits cannot be written, and an escaped
    surrogate pair comes back as one character, so the summary read would differ from the one made."""
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return value if -_INT_LIMIT < value < _INT_LIMIT else None
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a surrogate, written as an escape in the source
                return None
        return value
    return None


_INT_LIMIT = 1 << 64


def _registry_names(node: ast.AST) -> Optional[list[str]]:
    """The dotted names a list, set or dict display (with constant keys) holds, when it holds names alone
    (``{"nvfp4": NVFP4Method, "fp8": FP8Method}``); None for anything else."""
    kind = type(node)
    if kind is ast.Dict:
        if not all(isinstance(key, ast.Constant) for key in node.keys):
            return None  # `**other`, or a key that computes
        values = node.values
    elif kind is ast.List or kind is ast.Set:
        values = node.elts
    else:
        return None
    names = [_dotted(value) for value in values]
    return names if names and all(names) else None


def _is_class_var(annotation: ast.AST) -> bool:
    """``ClassVar[...]`` (``typing.ClassVar``): a class attribute, no field of a record's instances."""
    node = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (dotted_name(node) or "").rpartition(".")[2] == "ClassVar"


def _dotted(node: ast.AST) -> Optional[str]:
    name = dotted_name(node)
    if name is not None:
        return name
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Subscript):  # Optional[X] -> X
        inner = node.slice
        return _dotted(inner) if isinstance(inner, (ast.Name, ast.Attribute)) else None
    return None


def _return_annotation(node: ast.AST):
    """``A`` (dotted), ``Optional[A]``, ``"A"``; ``tuple[A, B]`` as ``[A, B]`` (None for what is not a name)."""
    if isinstance(node, ast.Subscript) and _dotted(node.value) in ("tuple", "Tuple", "typing.Tuple") \
            and isinstance(node.slice, ast.Tuple):
        return [_dotted(e) or _string_annotation(e) for e in node.slice.elts]
    return _dotted(node) or _string_annotation(node)


def _string_annotation(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip().strip('"\'')
        if text.replace(".", "").replace("_", "").isalnum():
            return text
    return None


def summarize(text: str, path: str, module: str, is_package: bool = False) -> dict:
    """The summary of one module's source text; raises SyntaxError, ValueError or RecursionError."""
    if len(text) >= 2 * CHUNK_CHARS and "\r" not in text:
        try:
            return _summarize(_chunked_statements(text, path), text, path, module, is_package)
        except _ChunkMisfit:
            pass  # a split fell inside a string or brackets: parse the file whole
    return _summarize(parse_quietly(text, path).body, text, path, module, is_package)


def _summarize(statements: Iterable[ast.stmt], text: str, path: str, module: str, is_package: bool) -> dict:
    worker = _Summarizer(text, module, bool(is_package))
    top = new_function(MODULE_SCOPE, MODULE_SCOPE, 1, 0, None, None)
    worker.functions[MODULE_SCOPE] = top
    worker.body(statements, _Scope(top, MODULE_SCOPE))
    for fn in worker.functions.values():
        fn["taken"] = values_taken(fn)
    return {"schema": SCHEMA, "path": path, "module": module, "package": bool(is_package),
            "functions": worker.functions, "classes": worker.classes, "star": worker.star_imports}


def parse_quietly(text: str, path: str) -> ast.Module:
    """``ast.parse``, without the warnings the user's own code raises (invalid escapes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user's own invalid escapes are not our business
        return ast.parse(text, filename=path)


# A big module is parsed a chunk of top-level statements at a time: its whole syntax tree takes
# about 100 bytes of memory per byte of source, the summary a fifth of that.
CHUNK_CHARS = 1 << 18
_TOP_LEVEL_START = re.compile(r"^(?:def |class |async def |@)", re.MULTILINE)


class _ChunkMisfit(Exception):
    """A chunk does not parse alone."""


def _chunked_statements(text: str, path: str) -> Iterator[ast.stmt]:
    """The top-level statements of ``text``, parsed in chunks of about ``CHUNK_CHARS``.

    Chunks start at a line that begins with ``def``, ``class``, ``async def`` or ``@`` in column 0.
    Where such a line is not really a new statement (it is inside a string or brackets, or after a
    backslash or a decorator), the chunk before it ends unfinished and does not parse: then
    ``_ChunkMisfit`` is raised, and the caller parses the whole file instead. Each chunk is parsed
    behind as many newlines as lines precede it, so positions are those of the whole file.
    """
    starts = [0]
    for match in _TOP_LEVEL_START.finditer(text):
        if match.start() - starts[-1] >= CHUNK_CHARS:
            starts.append(match.start())
    starts.append(len(text))
    line = 0
    for begin, end in zip(starts, starts[1:]):
        try:
            tree = parse_quietly("\n" * line + text[begin:end], path)
        except (SyntaxError, RecursionError) as exc:  # the whole parse has a few frames more to spare
            raise _ChunkMisfit() from exc
        line += text.count("\n", begin, end)
        yield from tree.body
        del tree  # one chunk's syntax tree alive at a time
