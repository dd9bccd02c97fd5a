"""Fix plans: each ``Fix`` a finding carries bound to the libcst nodes at its position (never guessed), and
the fixes refused because the name they write (``torch``, ``contextlib``) is something else in the module.
Part of the fixes (``lints.fixer``)."""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterable, Optional

import libcst as cst

from .fix_names import _dotted, _uses_name_otherwise
from .fix_nodes import _Nodes, node_positions
from .model import Finding, Fix


@dataclasses.dataclass(eq=False)
class FixPlan:
    """A ``Fix`` bound to the libcst nodes it rewrites."""

    action: str
    node: cst.CSTNode
    safe: bool
    items: tuple[cst.WithItem, ...] = ()
    fix: Optional[Fix] = None


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
