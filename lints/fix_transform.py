"""The libcst transform that rewrites what the plans name: a ``with`` block unwrapped or an item dropped, a
call replaced by ``torch.no_grad()`` or ``contextlib.nullcontext()``, the callable form unwrapped, a
decorator replaced or added (imports to add are scheduled on the codemod context). Part of the fixes
(``lints.fixer``)."""
from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from .fix_nodes import _Nodes
from .fix_plans import FixPlan
from .fix_with_blocks import _drop_last_items, _unwrapped


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
