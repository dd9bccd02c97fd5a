"""Apply the fix plans that GM1xx findings carry, keeping everything else byte for byte.

Used by ``python -m lints.codemod`` and by the libcst codemod commands in
``codemods/``; the findings come from the same engine the linter runs.
"""
from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import re
from typing import Callable, Collection, Iterable, Optional, Sequence, Union

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, GatherUnusedImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from .model import Finding, Fix
from .summary import parse_quietly

STYLES = ("remove", "no_grad")
_INFERENCE_MODE_MODULES = ("torch", "torch.autograd", "torch.autograd.grad_mode")


@dataclasses.dataclass(eq=False)
class FixPlan:
    """A ``Fix`` bound to the libcst nodes it rewrites."""

    action: str
    node: cst.CSTNode
    safe: bool
    items: tuple[cst.WithItem, ...] = ()
    fix: Optional[Fix] = None


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


# Why ``plans_for`` refuses a fix (said by the codemod: the linter, from summaries, calls it fixable).
REFUSED_WHY = ("its fix writes `torch.no_grad()` or `contextlib.nullcontext()`, and this module uses that name "
               "for something else")


def plans_for(module: cst.Module, findings: Iterable[Finding], unsafe_fixes: bool,
              unbound: Optional[list[Fix]] = None, style: str = "remove",
              refused: Optional[list[Finding]] = None, nodes: Optional[_Nodes] = None,
              uses_name_otherwise: Optional[Callable[[str], bool]] = None) -> list[FixPlan]:
    """Distinct plans of the fixable findings (several GM104 calls share one block); a position that does
    not name the expected node is never guessed: it goes to ``unbound``. A finding whose fix would write
    ``contextlib.nullcontext()`` or ``torch.no_grad()`` where the module uses the name ``contextlib`` or
    ``torch`` for anything but that module is not fixed: it goes to ``refused``. ``uses_name_otherwise``
    answers that for the whole file where ``module`` is a piece of it (``fix_in_pieces``)."""
    findings = list(findings)
    fixes: dict[tuple, Fix] = {}
    for finding in findings:
        for fix in finding.fixes:
            if fix.safe or unsafe_fixes:
                fixes.setdefault(_key(fix), fix)
    if not fixes:
        return []
    nodes = nodes if nodes is not None else node_positions(module)
    plans = []
    for fix in fixes.values():
        plan = _bind(fix, nodes)
        if plan is not None:
            plan.fix = fix
            plans.append(plan)
        elif unbound is not None:
            unbound.append(fix)
    clashing: set[tuple] = set()
    for name, writes in (("contextlib", _writes_null_context), ("torch", _writes_torch_no_grad)):
        keys = {_key(plan.fix) for plan in plans if writes(plan, style)}
        if keys:
            if name not in nodes.name_used_otherwise:  # once per module, not per finding
                nodes.name_used_otherwise[name] = (uses_name_otherwise or functools.partial(
                    _uses_name_otherwise, module))(name)
            if nodes.name_used_otherwise[name]:
                clashing |= keys
    if clashing:
        kept = [f for f in findings if not any(_key(fix) in clashing for fix in f.fixes)]
        if refused is not None:
            refused.extend(f for f in findings if f not in kept)
        wanted = {_key(fix) for f in kept for fix in f.fixes}
        plans = [plan for plan in plans if _key(plan.fix) in wanted]
    return plans


def _key(fix: Fix) -> tuple:
    return fix.action, fix.at, fix.items


def _writes_null_context(plan: FixPlan, style: str) -> bool:
    """Whether ``FixTransformer._register`` rewrites ``plan`` to ``contextlib.nullcontext``."""
    if style != "remove":
        return False
    return plan.action == "null_context" or (
        plan.action in ("unwrap_with", "drop_with_item") and any(item.asname is not None for item in plan.items))


def _writes_torch_no_grad(plan: FixPlan, style: str) -> bool:
    """Whether ``FixTransformer._register`` writes ``torch.no_grad`` for ``plan``: ``_no_grad_for`` on a
    reference that is a bare name (``inference_mode()``, ``@im``), where ``t.inference_mode`` gives ``t.no_grad``."""
    if plan.action == "add_inference_decorator":
        return True  # writes `torch.inference_mode()`: the name must be the module
    if plan.action == "decorator_no_grad":
        refs = [plan.node.decorator]
    elif style != "no_grad":
        return False
    elif plan.action in ("unwrap_with", "drop_with_item"):
        refs = [item.item for item in plan.items]
    elif plan.action == "unwrap_callable":
        refs = [plan.node.func]
    else:
        refs = [plan.node]
    return any(not isinstance(ref.func if isinstance(ref, cst.Call) else ref, cst.Attribute) for ref in refs)


class _NameUses(cst.CSTVisitor):
    """Whether ``name`` is used anywhere other than in ``import name``, ``from name import ...`` and
    ``name.attr``: bound (assigned, a parameter, a def, ``import x as name``...) or read bare."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found = False

    def visit_Import(self, node: cst.Import) -> bool:
        self.found |= any(alias.asname is not None and _bound_name(alias) == self.name
                          and _dotted(alias.name) != self.name for alias in node.names)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            self.found |= any(_bound_name(alias) == self.name for alias in node.names)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # `f(name=...)` names a parameter of f, no variable here
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if not (isinstance(node.value, cst.Name) and node.value.value == self.name):
            node.value.visit(self)
        return False  # `.attr` names no variable

    def visit_Name(self, node: cst.Name) -> None:
        self.found |= node.value == self.name


def _bound_name(alias: cst.ImportAlias) -> Optional[str]:
    if alias.asname is not None:
        return alias.asname.name.value if isinstance(alias.asname.name, cst.Name) else None
    return _dotted(alias.name)


def _uses_name_otherwise(module: cst.Module, name: str) -> bool:
    uses = _NameUses(name)
    module.visit(uses)
    return uses.found


def _bind(fix: Fix, nodes: _Nodes) -> Optional[FixPlan]:
    if fix.action in ("unwrap_with", "drop_with_item"):
        node = nodes.withs.get(fix.at)
        items = tuple(nodes.items.get(at) for at in fix.items)
        if node is None or not items or any(i is None or not any(i is x for x in node.items) for i in items):
            return None
        return FixPlan(fix.action, node, fix.safe, items)
    if fix.action == "null_context":
        found = [c for c in nodes.calls.get(fix.at, []) if not isinstance(c.func, cst.Call)]
        return FixPlan(fix.action, found[-1], fix.safe) if found else None
    if fix.action == "unwrap_callable":
        # `torch.inference_mode()(model)(y)`: three calls start here; the fix's is the one whose callee is
        # the switch itself (`torch.inference_mode()(model)`), not the call of its result (`...(y)`)
        found = [c for c in nodes.calls.get(fix.at, []) if _calls_a_switch(c) and len(c.args) == 1
                 and c.args[0].keyword is None and not c.args[0].star]
        return FixPlan(fix.action, found[0], fix.safe) if len(found) == 1 else None
    if fix.action == "decorator_no_grad":
        node = nodes.decorators.get(fix.at)
        return FixPlan(fix.action, node, fix.safe) if node is not None else None
    if fix.action == "add_inference_decorator":
        node = nodes.functions.get(fix.at)
        return FixPlan(fix.action, node, fix.safe) if node is not None else None
    return None


def _calls_a_switch(call: cst.Call) -> bool:
    """Whether ``call`` is ``switch(...)(fn)`` as the summaries read the callable form: its callee is a call
    of a dotted name (``getattr(torch, "inference_mode")`` being the name ``torch.inference_mode``)."""
    switch = call.func
    return isinstance(switch, cst.Call) and not _is_getattr_name(switch) and (
        _dotted(switch.func) is not None or _is_getattr_name(switch.func))


def _is_getattr_name(expr: cst.BaseExpression) -> bool:
    """``getattr(a.b, "name")``, which ``lints.summary`` reads as the dotted name ``a.b.name``."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "getattr"
            and len(expr.args) == 2 and all(a.keyword is None and not a.star for a in expr.args)):
        return False
    name = expr.args[1].value
    return (_dotted(expr.args[0].value) is not None and isinstance(name, (cst.SimpleString, cst.ConcatenatedString))
            and isinstance(name.evaluated_value, str) and name.evaluated_value.isidentifier())


class FixTransformer(cst.CSTTransformer):
    def __init__(self, plans: Sequence[FixPlan], style: str, context: CodemodContext,
                 nodes: Optional[_Nodes] = None) -> None:
        super().__init__()
        self.style = style
        self.context = context
        self.unwrap: set[cst.With] = set()
        self.drop_item: dict[cst.With, set[int]] = {}
        self.replace: dict[cst.CSTNode, cst.BaseExpression] = {}
        self.decorate: set[cst.FunctionDef] = set()
        self._to_splice: dict[int, cst.With] = {}
        for plan in plans:
            self._register(plan)
        # With ``nodes`` (of this module): only the statements the plans rewrite, and the blocks holding
        # them, are visited; every other subtree is kept as it is, the same object (one fix in a big
        # file costs its statement, not a walk of the file).
        self._rewritten: Optional[set[int]] = None
        self._holding: set[int] = set()
        self._inside = 0
        blocks = [nodes.block_of.get(id(plan.node)) for plan in plans] if nodes is not None else [None]
        if all(block is not None for block in blocks):
            self._rewritten = {id(block) for block in blocks}
            for block in blocks:
                parent = nodes.block_parent.get(id(block))
                while parent is not None and id(parent) not in self._holding:
                    self._holding.add(id(parent))
                    parent = nodes.block_parent.get(id(parent))

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._rewritten is not None and not isinstance(node, cst.Module):
            if id(node) in self._rewritten:
                self._inside += 1
            elif not self._inside and id(node) not in self._holding:
                return False
        return super().on_visit(node)

    # planning -------------------------------------------------------------
    def _no_grad_for(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """``torch.no_grad()`` spelt like the inference_mode reference it replaces."""
        ref = expr.func if isinstance(expr, cst.Call) else expr
        if isinstance(ref, cst.Attribute):
            return cst.Call(func=ref.with_changes(attr=cst.Name("no_grad")))
        AddImportsVisitor.add_needed_import(self.context, "torch")
        return cst.Call(func=cst.Attribute(value=cst.Name("torch"), attr=cst.Name("no_grad")))

    def _null_context_for(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        AddImportsVisitor.add_needed_import(self.context, "contextlib")
        factory = cst.Attribute(value=cst.Name("contextlib"), attr=cst.Name("nullcontext"))
        return cst.Call(func=factory) if isinstance(expr, cst.Call) else factory

    def _register(self, plan: FixPlan) -> None:
        if plan.action in ("unwrap_with", "drop_with_item"):
            assert isinstance(plan.node, cst.With) and plan.items
            if self.style == "no_grad":
                for item in plan.items:
                    self.replace[item.item] = self._no_grad_for(item.item)
                return
            # `as name` must stay bound: inference_mode's __enter__ returns None, so does nullcontext's
            bound = [item for item in plan.items if item.asname is not None]
            for item in bound:
                self.replace[item.item] = self._null_context_for(item.item)
            if plan.action == "unwrap_with" and not bound:
                self.unwrap.add(plan.node)
            else:
                removed = [item for item in plan.items if item.asname is None]
                drops = self.drop_item.setdefault(plan.node, set())
                drops.update(i for i, item in enumerate(plan.node.items) if any(item is p for p in removed))
        elif plan.action == "null_context":
            assert isinstance(plan.node, cst.BaseExpression)
            self.replace[plan.node] = (self._no_grad_for(plan.node) if self.style == "no_grad"
                                       else self._null_context_for(plan.node))
        elif plan.action == "unwrap_callable":
            assert isinstance(plan.node, cst.Call) and isinstance(plan.node.func, cst.Call)
            if self.style == "no_grad":  # torch.no_grad()(fn): the decorator form of no_grad
                self.replace[plan.node.func] = self._no_grad_for(plan.node.func)
            else:  # plain fn: the caller's grad mode decides
                self.replace[plan.node] = plan.node.args[0].value
        elif plan.action == "decorator_no_grad":
            assert isinstance(plan.node, cst.Decorator)
            self.replace[plan.node.decorator] = self._no_grad_for(plan.node.decorator)
        elif plan.action == "add_inference_decorator":
            assert isinstance(plan.node, cst.FunctionDef)
            AddImportsVisitor.add_needed_import(self.context, "torch")
            self.decorate.add(plan.node)
        else:  # pragma: no cover - a new action without a fixer is a programming error
            raise ValueError(f"unknown fix action {plan.action}")

    # rewriting ------------------------------------------------------------
    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        if self._rewritten is not None and id(original_node) in self._rewritten:
            self._inside -= 1
        updated = super().on_leave(original_node, updated_node)
        replacement = self.replace.get(original_node)
        if replacement is not None and isinstance(updated, cst.BaseExpression):
            return replacement.with_changes(lpar=updated.lpar, rpar=updated.rpar) if hasattr(
                updated, "lpar") else replacement
        return updated

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef):
        if original_node not in self.decorate:
            return updated_node
        switch = cst.Call(func=cst.Attribute(value=cst.Name("torch"), attr=cst.Name("inference_mode")))
        return updated_node.with_changes(decorators=[*updated_node.decorators, cst.Decorator(decorator=switch)])

    def leave_With(self, original_node: cst.With, updated_node: cst.With):
        drops = self.drop_item.get(original_node)
        if drops and len(drops) < len(updated_node.items):
            items = [item for i, item in enumerate(updated_node.items) if i not in drops]
            last = len(updated_node.items) - 1
            if last in drops:
                return _drop_last_items(updated_node, items, updated_node.items[last].comma)
            return updated_node.with_changes(items=items)
        if original_node in self.unwrap or drops:
            self._to_splice[id(updated_node)] = updated_node
        return updated_node

    def _splice(self, body: Sequence[cst.BaseStatement]) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
        out: list[cst.BaseStatement] = []
        pending: list[cst.EmptyLine] = []  # comments that ended a removed block
        for stmt in body:
            if id(stmt) in self._to_splice and self._to_splice[id(stmt)] is stmt:
                inner, footer = _unwrapped(stmt)
                inner[0] = inner[0].with_changes(leading_lines=[*pending, *inner[0].leading_lines])
                out.extend(inner)
                pending = footer
            else:
                if pending:
                    stmt = stmt.with_changes(leading_lines=[*pending, *stmt.leading_lines])
                    pending = []
                out.append(stmt)
        return out, pending

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        if not any(id(s) in self._to_splice for s in updated_node.body):
            return updated_node
        body, pending = self._splice(updated_node.body)
        return updated_node.with_changes(body=body, footer=[*pending, *updated_node.footer])

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module):
        if not any(id(s) in self._to_splice for s in updated_node.body):
            return updated_node
        body, pending = self._splice(updated_node.body)
        return updated_node.with_changes(body=body, footer=[*pending, *updated_node.footer])


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


def inference_mode_imports(module: cst.Module) -> list[tuple[cst.ImportAlias, str, Optional[str]]]:
    """``from torch import inference_mode [as x]`` statements at any depth of the module's top level."""
    found = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar) and small.module:
                source = _dotted(small.module)
                if source in _INFERENCE_MODE_MODULES:
                    for alias in small.names:
                        if isinstance(alias.name, cst.Name) and alias.name.value == "inference_mode":
                            asname = alias.asname.name.value if alias.asname and isinstance(
                                alias.asname.name, cst.Name) else None
                            found.append((alias, source, asname))
    return found


def apply_fixes(module: cst.Module, plans: Sequence[FixPlan], style: str = "remove",
                context: Optional[CodemodContext] = None, update_imports: bool = True,
                imported_elsewhere: Optional[Collection[str]] = None, nodes: Optional[_Nodes] = None) -> cst.Module:
    """``module`` with ``plans`` applied (the module must be the one the plans were made on).

    Import changes are scheduled on ``context``; with ``update_imports`` they are
    made here too (a libcst CodemodCommand makes them itself afterwards). An inference_mode
    import is removed only where the fix left it unused, and never one that other modules may
    import from this one: ``imported_elsewhere`` names those (None: not known, so none is removed),
    and a module with ``__all__`` keeps them all.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}")
    if not plans:
        return module
    context = context or CodemodContext()
    fixed = module.visit(FixTransformer(plans, style, context, nodes))
    if imported_elsewhere is not None:
        candidates = [(alias, source, asname) for alias, source, asname in inference_mode_imports(module)
                      if (asname or "inference_mode") not in imported_elsewhere]
        if candidates and not _uses_name_otherwise(module, "__all__"):
            unused_before = _unused_imports(module)  # the fix did not make those unused: not its business
            for alias, source, asname in candidates:
                if alias not in unused_before:
                    RemoveImportsVisitor.remove_unused_import(context, source, "inference_mode", asname)
    if not update_imports:
        return fixed
    # each visitor copies the module and (for removal) computes scopes: skip them when nothing is scheduled
    if context.scratch.get(AddImportsVisitor.CONTEXT_KEY):
        fixed = AddImportsVisitor(context).transform_module(fixed)
    if context.scratch.get(RemoveImportsVisitor.CONTEXT_KEY):
        fixed = RemoveImportsVisitor(context).transform_module(fixed)
    return fixed


def fix_source(module: cst.Module, findings: Iterable[Finding], style: str, unsafe_fixes: bool,
               context: Optional[CodemodContext] = None, unbound: Optional[list[Fix]] = None,
               refused: Optional[list[Finding]] = None, imported_elsewhere: Optional[Collection[str]] = None,
               nodes: Optional[_Nodes] = None) -> Union[cst.Module, None]:
    """Fixed module, or None when no finding had an applicable fix (see ``plans_for``, ``apply_fixes``)."""
    findings = list(findings)
    if nodes is None and any(fix.safe or unsafe_fixes for f in findings for fix in f.fixes):
        nodes = node_positions(module)  # here, not in plans_for: apply_fixes needs the same ones
    plans = plans_for(module, findings, unsafe_fixes, unbound, style, refused, nodes)
    return apply_fixes(module, plans, style, context, imported_elsewhere=imported_elsewhere, nodes=nodes) \
        if plans else None


def _unused_imports(module: cst.Module) -> set[cst.ImportAlias]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    wrapper.resolve_many(GatherUnusedImportsVisitor.get_inherited_dependencies())
    gather = GatherUnusedImportsVisitor(CodemodContext(wrapper=wrapper))
    module.visit(gather)
    return {alias for alias, _ in gather.unused_imports}


def _dotted(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = _dotted(expr.value)
        return f"{head}.{expr.attr.value}" if head else None
    return None


# Big modules, a piece at a time ------------------------------------------------------------------------

# About this much source per piece; pieces are cut where a top-level `def`, `class` or decorator starts.
PIECE_CHARS = 1 << 16
# A module at least this big is fixed a piece at a time (``fix_in_pieces``): libcst's tree of a whole module
# takes about 500 bytes of memory per byte of source (3.5 GB for a 5 MB module, where the linter's peak was
# 0.4 GB), and collecting the garbage among that many live nodes made the fix superlinear.
PIECES_MIN_CHARS = 2 * PIECE_CHARS
_PIECE_START = re.compile(r"^(?:def |class |async def |@)", re.MULTILINE)


class PiecesMisfit(Exception):
    """The module cannot be fixed a piece at a time (libcst cannot parse a piece, or print it back as it
    is): fix it whole."""


@dataclasses.dataclass
class _Piece:
    first_line: int  # the file's line it starts on (1-based)
    text: str

    def module(self, to_rewrite: bool = False) -> cst.Module:
        """The piece's tree; ``to_rewrite``: one that prints the piece back as it is (the rest of the
        file is left as it is, byte for byte), else ``PiecesMisfit``."""
        try:
            module = cst.parse_module(self.text)
        except (cst.ParserSyntaxError, RecursionError) as exc:
            raise PiecesMisfit(f"line {self.first_line}: {exc}") from None
        if to_rewrite:
            self.check_exact(module)
        return module

    def check_exact(self, module: cst.Module) -> None:
        if module.code != self.text:
            raise PiecesMisfit(f"line {self.first_line}: libcst does not print the piece back as it is")

    def moved(self, fix: Fix, towards_file: bool) -> Fix:
        """``fix`` with its lines counted in the file (``towards_file``) or in this piece."""
        shift = (self.first_line - 1) * (1 if towards_file else -1)
        return dataclasses.replace(fix, at=(fix.at[0] + shift, fix.at[1]),
                                   items=tuple((line + shift, col) for line, col in fix.items))


def statement_pieces(text: str, path: str = "<unknown>", size: Optional[int] = None) -> list[_Piece]:
    """``text`` cut into pieces of whole top-level statements, of about ``size`` characters or more.

    A cut is made at a line starting with ``def``, ``class``, ``async def`` or ``@``, where the text
    before it parses (with CPython's parser, which costs a twentieth of libcst's): a line that looks
    like a start inside a string or brackets leaves the piece before it unfinished, so no cut is made
    there. The first piece reaches past the leading imports, where ``AddImportsVisitor`` adds one.
    Raises ``PiecesMisfit`` where the text does not parse at all.
    """
    size = PIECE_CHARS if size is None else size
    pieces: list[_Piece] = []
    begin, line, tried = 0, 1, 0
    for match in _PIECE_START.finditer(text):
        end = match.start()
        if end - begin < size or end - tried < size:  # tried: a misfit there; try again a piece further on
            continue
        tried = end
        try:
            tree = parse_quietly(text[begin:end], path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not pieces and not _past_the_imports(tree):
            continue
        del tree
        pieces.append(_Piece(line, text[begin:end]))
        line += text.count("\n", begin, end)
        begin = end
    try:
        parse_quietly(text[begin:], path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise PiecesMisfit(f"does not parse from line {line}: {exc}") from None
    pieces.append(_Piece(line, text[begin:]))
    return pieces


def _past_the_imports(tree: ast.Module) -> bool:
    """Whether ``tree`` holds a statement after its leading imports (and docstring)."""
    body = tree.body
    first = body[0] if body else None
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
        first.value.value, str)
    strict = isinstance(first, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == "__strict__" for target in first.targets)
    return any(not isinstance(stmt, (ast.Import, ast.ImportFrom)) for stmt in body[1 if docstring or strict else 0:])


def _word(name: str) -> re.Pattern:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def fix_in_pieces(text: str, findings: Sequence[Finding], style: str, unsafe_fixes: bool,
                  unbound: list[Fix], refused: list[Finding], imported_elsewhere: Optional[Collection[str]] = None,
                  path: str = "<unknown>", piece_chars: Optional[int] = None) -> tuple[str, Optional[str]]:
    """``fix_source`` on ``text`` (with ``apply_fixes``' import changes), one piece of top-level statements
    (``statement_pieces``) at a time, so that one piece's libcst tree is alive at a time (with the
    first piece's and those of the pieces that import ``inference_mode``, where imports may change).

    Returns (the fixed text, or ``text`` where nothing changed; why a fixed piece does not parse, or None).
    ``unbound`` gets the fixes whose position names no node (counted in the file), ``refused`` the
    findings ``plans_for`` refuses. Raises ``PiecesMisfit`` where the pieces cannot stand for the module.

    The pieces give what the whole module gives: a fix rewrites one statement, the comments an unwrapped
    block leaves are printed where they were, whichever piece holds them, and the names ``plans_for`` and
    the import changes ask about are looked up in every piece. One difference: an ``inference_mode``
    import is kept where another piece still spells the name, where the whole module's scopes could have
    shown that name to be another one (keeping an import changes nothing).
    """
    pieces = statement_pieces(text, path, piece_chars)
    firsts = [piece.first_line for piece in pieces]
    # piece -> the findings whose first applicable fix is there: (the finding moved into the piece, as given)
    to_fix_in: dict[int, list[tuple[Finding, Finding]]] = {}
    for finding in findings:
        applicable = [fix for fix in finding.fixes if fix.safe or unsafe_fixes]
        if applicable:
            index = max(bisect.bisect_right(firsts, applicable[0].at[0]) - 1, 0)
            piece = pieces[index]
            moved = dataclasses.replace(
                finding, fixes=tuple(piece.moved(fix, towards_file=False) for fix in finding.fixes))
            to_fix_in.setdefault(index, []).append((moved, finding))
    if not to_fix_in:
        return text, None

    name_uses: dict[str, bool] = {}

    def uses_name_otherwise(name: str) -> bool:
        """``_uses_name_otherwise`` of the whole module (the name spelt in a piece: that piece looked at)."""
        if name not in name_uses:
            word = _word(name)
            name_uses[name] = any(_uses_name_otherwise(piece.module(), name)
                                  for piece in pieces if word.search(piece.text))
        return name_uses[name]

    # `from torch import inference_mode` statements that the fix may leave unused (as ``apply_fixes`` does)
    candidates: list[tuple[int, str, Optional[str]]] = []  # (piece, module imported from, as-name)
    kept: dict[int, cst.Module] = {}  # the pieces whose trees the import changes need: as parsed
    if imported_elsewhere is not None:
        for index, piece in enumerate(pieces):
            if "inference_mode" in piece.text and "import" in piece.text:
                module = piece.module(to_rewrite=True)
                found = [(index, source, asname) for _alias, source, asname in inference_mode_imports(module)
                         if (asname or "inference_mode") not in imported_elsewhere]
                if found:
                    candidates.extend(found)
                    kept[index] = module
        if candidates and uses_name_otherwise("__all__"):
            candidates = []
            kept = {}
    names = {asname or "inference_mode" for _piece, _source, asname in candidates}
    spelt_before: dict[str, set[int]] = {name: set() for name in names}  # name -> pieces using it otherwise
    spelt_after: dict[str, set[int]] = {name: set() for name in names}

    context = CodemodContext()  # the imports every piece's fix needs, added to the first piece
    texts = [piece.text for piece in pieces]
    fixed_kept: dict[int, cst.Module] = {}  # the first piece's fixed tree, and those of ``kept``
    planned = False
    for index, piece in enumerate(pieces):
        spelt = [name for name in names if _word(name).search(piece.text)]
        if index not in to_fix_in and not spelt and index not in kept:
            continue
        module = kept.get(index) or piece.module()
        fixed = module
        if index in to_fix_in:
            local_unbound: list[Fix] = []
            local_refused: list[Finding] = []
            moved_here = [moved for moved, _given in to_fix_in[index]]
            nodes = node_positions(module, {line for f in moved_here for fix in f.fixes
                                            for line, _col in (fix.at, *fix.items)})
            plans = plans_for(module, moved_here, unsafe_fixes, local_unbound, style, local_refused, nodes,
                              uses_name_otherwise)
            unbound.extend(piece.moved(fix, towards_file=True) for fix in local_unbound)
            refused_here = {id(f) for f in local_refused}
            refused.extend(given for moved, given in to_fix_in[index] if id(moved) in refused_here)
            if unbound:  # the file is refused whole
                return text, None
            if plans:
                planned = True
                if index not in kept:  # those were checked when parsed
                    piece.check_exact(module)
                fixed = module.visit(FixTransformer(plans, style, context, nodes))
                texts[index] = fixed.code
        for name in spelt:
            if _uses_name_otherwise(module, name):
                spelt_before[name].add(index)
            if _uses_name_otherwise(fixed, name):
                spelt_after[name].add(index)
        if index == 0 or index in kept:
            fixed_kept[index] = fixed
    if not planned:
        return text, None
    if context.scratch.get(AddImportsVisitor.CONTEXT_KEY):  # on the tree the fix made, as the whole way does
        head = fixed_kept[0] if 0 in fixed_kept else pieces[0].module()
        if texts[0] == pieces[0].text and 0 not in kept:
            pieces[0].check_exact(head)
        fixed_kept[0] = AddImportsVisitor(context).transform_module(head)
        texts[0] = fixed_kept[0].code
    for index in sorted(kept):
        removals = CodemodContext()
        unused_before = _unused_imports(kept[index])
        wanted = {(source, asname) for at, source, asname in candidates if at == index}
        for alias, source, asname in inference_mode_imports(kept[index]):
            if (source, asname) not in wanted:
                continue
            name = asname or "inference_mode"
            # used before the fix (in this piece's scopes, or spelt in another), and spelt in no other after it
            used_before = alias not in unused_before or bool(spelt_before[name] - {index})
            if used_before and not spelt_after[name] - {index}:
                RemoveImportsVisitor.remove_unused_import(removals, source, "inference_mode", asname)
        if removals.scratch.get(RemoveImportsVisitor.CONTEXT_KEY):
            texts[index] = RemoveImportsVisitor(removals).transform_module(fixed_kept[index]).code
    for piece, new in zip(pieces, texts):
        if new != piece.text:  # Python's parser says what runs (libcst's again cost a sixth of the time)
            try:
                parse_quietly(new, path)
            except (SyntaxError, ValueError, RecursionError) as exc:
                return text, f"line {piece.first_line}: {exc}"
    return "".join(texts), None
