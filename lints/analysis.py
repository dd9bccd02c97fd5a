"""Per-module facts derived once from the index and shared by every rule."""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Union

import libcst as cst

from . import names
from .buffers import LazyBuffer, find_lazy_buffers
from .config import Config
from .index import CallSite, FunctionInfo, GradModeRef, ModuleIndex
from .paths import PathReason, classify_paths, name_is_warm_path, reachable_from, resolve_call


@dataclasses.dataclass(eq=False)
class ModeRegion:
    """Code that runs with a grad mode switched on: a ``with`` body or a decorated function."""

    mode: str
    owner: Union[cst.With, FunctionInfo, cst.Call]  # With / decorated function / enter_context call
    function: FunctionInfo
    line: int
    via: str  # how the mode is entered, for messages
    direct_ref: Optional[GradModeRef]  # set when torch's switch is written right there
    calls: list[CallSite]

    def encloses(self, fn: FunctionInfo, frame_withs: tuple) -> bool:
        if isinstance(self.owner, FunctionInfo):
            return fn is self.owner
        if isinstance(self.owner, cst.With):
            return fn is self.function and self.owner in frame_withs
        return False


@dataclasses.dataclass(eq=False)
class ModuleAnalysis:
    index: ModuleIndex
    config: Config

    @functools.cached_property
    def warm_paths(self) -> dict[FunctionInfo, PathReason]:
        return classify_paths(self.index, self.config)

    def warm_reason(self, fn: FunctionInfo) -> Optional[PathReason]:
        return self.warm_paths.get(fn)

    def call_targets_warm(self, call: CallSite) -> Optional[str]:
        """Why ``call`` runs a warmup/autotune/capture path, if it does."""
        for target in resolve_call(self.index, call):
            reason = self.warm_paths.get(target)
            if reason is not None:
                return f"`{target.qualname}()` is a warmup/capture path ({reason})"
        if call.callee and not call.qualified and (pattern := name_is_warm_path(call.callee, self.config)):
            return f"`{call.callee}()` matches `{pattern}`"
        for target in reachable_from(self.index, [call]):
            reason = self.warm_paths.get(target)
            if reason is not None:
                return f"`{call.callee}()` runs warmup/capture path `{target.qualname}()` ({reason})"
        return None

    @functools.cached_property
    def lazy_buffers(self) -> list[LazyBuffer]:
        return find_lazy_buffers(self.index)

    @functools.cached_property
    def _mode_factories(self) -> dict[FunctionInfo, tuple[str, str]]:
        """Functions whose call yields a grad-mode context: returned, or a contextmanager yielding inside one."""
        found: dict[FunctionInfo, tuple[str, str]] = {}
        for _ in range(3):  # factories built on factories, a few levels deep
            for fn in self.index.functions:
                if fn.node is None or fn in found:
                    continue
                for ret in fn.returns:
                    mode = self._mode_of_expr(ret.value, fn, found) if isinstance(ret.node, cst.Return) else None
                    if mode is None and isinstance(ret.node, cst.Yield) and fn.decorated_with(
                            names.CONTEXTMANAGER_DECORATORS):
                        mode = next((self._mode_of_with(w, fn, found) for w in reversed(ret.frame.withs)
                                     if self._mode_of_with(w, fn, found)), None)
                    if mode is not None:
                        found[fn] = (mode[0], f"`{fn.qualname}()` (enters {mode[0]} at line {ret.line})")
                        break
        return found

    def _refs_in(self, expr: cst.CSTNode, fn: FunctionInfo) -> list[GradModeRef]:
        """Enabled grad-mode references inside ``expr`` (by node identity)."""
        inner = set()
        stack = [expr]
        while stack:
            node = stack.pop()
            inner.add(id(node))
            stack.extend(node.children)
        scope: Optional[FunctionInfo] = fn
        refs = []
        while scope is not None:
            refs.extend(r for r in scope.grad_refs if r.enabled and id(r.expr) in inner)
            scope = scope.parent
        return refs

    def _mode_of_expr(self, expr: Optional[cst.BaseExpression], fn: FunctionInfo,
                      factories: dict[FunctionInfo, tuple[str, str]],
                      seen_names: frozenset[str] = frozenset()) -> Optional[tuple[str, str]]:
        if expr is None:
            return None
        refs = self._refs_in(expr, fn)
        if refs:
            return refs[0].mode, f"`{self.index.module.code_for_node(refs[0].expr)}`"
        # `run_ctx or ctx_factory()`: look at each operand (iteratively: chains can be long).
        operands: list[cst.BaseExpression] = []
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.BooleanOperation):
                stack.extend((node.right, node.left))
            else:
                operands.append(node)
        for operand in operands:
            if isinstance(operand, cst.Name) and operand.value not in seen_names:
                # `ctx = run_ctx or torch.inference_mode()` ... `with ctx:` (`x = x or y` must not loop)
                for fact in fn.assigns:
                    if fact.value is not None and any(isinstance(t, cst.Name) and t.value == operand.value
                                                      for t in fact.targets):
                        mode = self._mode_of_expr(fact.value, fn, factories, seen_names | {operand.value})
                        if mode is not None:
                            return mode[0], f"`{operand.value}` (set at line {fact.line})"
            elif isinstance(operand, cst.Call):
                call = self.index.call_sites.get(operand)
                for target in resolve_call(self.index, call) if call is not None else ():
                    if target in factories:
                        return factories[target]
        return None

    def _mode_of_with(self, with_node: cst.With, fn: FunctionInfo,
                      factories: dict[FunctionInfo, tuple[str, str]]) -> Optional[tuple[str, str]]:
        for item in with_node.items:
            mode = self._mode_of_expr(item.item, fn, factories)
            if mode is not None:
                return mode
        return None

    @functools.cached_property
    def regions(self) -> list[ModeRegion]:
        """Every place of the module where a grad mode is switched on."""
        regions: list[ModeRegion] = []
        factories = self._mode_factories
        for with_node, (fn, _frame, line, _col) in self.index.with_statements.items():
            mode = self._mode_of_with(with_node, fn, factories)
            if mode is None:
                continue
            direct = next((r for r in fn.grad_refs if r.owner is with_node and r.role == "with" and r.enabled), None)
            calls = [c for c in fn.calls if with_node in c.frame.withs]
            regions.append(ModeRegion(mode[0], with_node, fn, line, mode[1], direct, calls))
        for fn in self.index.functions:
            for ref in fn.grad_refs:
                if not ref.enabled:
                    continue
                if ref.role == "decorator":
                    regions.append(ModeRegion(ref.mode, fn, fn, ref.line, f"`@{self._code(ref.expr)}`", ref,
                                              list(fn.calls)))
                elif ref.role == "enter_context":
                    # Active from the enter_context call to the end of the enclosing with-body.
                    calls = [c for c in fn.calls if c.line > ref.line and c.frame.withs[:len(ref.frame.withs)]
                             == ref.frame.withs]
                    regions.append(ModeRegion(ref.mode, ref.owner, fn, ref.line,
                                              f"`{self._code(ref.owner)}`", ref, calls))
        regions.sort(key=lambda r: r.line)
        return regions

    def _code(self, node: cst.CSTNode) -> str:
        return " ".join(self.index.module.code_for_node(node).split())
