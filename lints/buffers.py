"""The one detector of lazily allocated reusable buffers that are mutated in place.

A buffer is *lazily allocated* when a torch factory (``torch.empty``,
``x.new_zeros``...) is stored under a guard that checks that same buffer
(``is None``, a shape/size/numel comparison, ``hasattr``/``getattr(..., None)``,
a dict-cache miss) or is returned by an ``@functools.cache``/``lru_cache``
getter. Whatever grad mode is active at that first call decides forever whether
the buffer is an inference tensor, so an in-place update made later, in another
mode, is where the crash shows.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional

import libcst as cst

from . import names
from .index import AssignFact, CallSite, FunctionInfo, ModuleIndex, ReturnFact


@dataclasses.dataclass(frozen=True)
class BufferKey:
    kind: str  # "attr" | "global" | "cached"
    owner: str  # class name for "attr", else ""
    name: str

    def __str__(self) -> str:
        if self.kind == "attr":
            return f"self.{self.name}"
        if self.kind == "cached":
            return f"{self.name}()"
        return self.name


@dataclasses.dataclass(eq=False)
class Mutation:
    line: int
    col: int
    how: str
    function: FunctionInfo


@dataclasses.dataclass(eq=False)
class Allocation:
    key: BufferKey
    fact: AssignFact | ReturnFact
    function: FunctionInfo
    line: int
    col: int
    guard: Optional[cst.If]  # the `if` whose body allocates (None for cached getters)
    why_lazy: str


@dataclasses.dataclass(eq=False)
class LazyBuffer:
    key: BufferKey
    allocations: list[Allocation]
    mutations: list[Mutation]


_SELF_NAMES = ("self", "cls")


def _is_factory(call: CallSite) -> bool:
    return bool(call.qualified & names.TORCH_FACTORIES) or (
        call.callee in names.TENSOR_METHOD_FACTORIES and isinstance(call.node.func, cst.Attribute)
    )


def _factory_in(value: Optional[cst.BaseExpression], factories: dict[int, CallSite]) -> Optional[CallSite]:
    """The factory call that produces ``value``: ``torch.empty(...)``, ``x or torch.empty(...)``."""
    while value is not None:
        if isinstance(value, cst.Call):
            return factories.get(id(value))
        if isinstance(value, cst.BooleanOperation):
            value = value.right
        elif isinstance(value, cst.IfExp):
            return _factory_in(value.body, factories) or _factory_in(value.orelse, factories)
        else:
            return None
    return None


def _enclosing_class(fn: Optional[FunctionInfo]) -> Optional[str]:
    while fn is not None:
        if fn.cls is not None:
            return fn.cls.name
        fn = fn.parent
    return None


class _Resolver:
    """Maps an expression to the buffer it denotes, inside a given function."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.module_names = {
            t.value for a in index.top.assigns for t in a.targets if isinstance(t, cst.Name)
        }
        self.accessors: dict[FunctionInfo, BufferKey] = {}
        self.cached_getters: dict[str, FunctionInfo] = {}
        self.aliases: dict[FunctionInfo, dict[str, BufferKey]] = {}

    def base(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """Strip indexing and view methods: ``self.buf[:n].view(-1)`` -> ``self.buf``."""
        while True:
            if isinstance(expr, cst.Subscript):
                expr = expr.value
            elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
                  and expr.func.attr.value in names.VIEW_METHODS):
                expr = expr.func.value
            else:
                return expr

    def key(self, expr: cst.BaseExpression, fn: FunctionInfo) -> Optional[BufferKey]:
        expr = self.base(expr)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value in _SELF_NAMES:
            owner = _enclosing_class(fn)
            return BufferKey("attr", owner, expr.attr.value) if owner else None
        if isinstance(expr, cst.Name):
            scope: Optional[FunctionInfo] = fn
            while scope is not None:
                local = self.aliases.get(scope, {}).get(expr.value)
                if local is not None:
                    return local
                scope = scope.parent
            if expr.value in self.module_names:
                return BufferKey("global", "", expr.value)
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value in self.cached_getters:
                return BufferKey("cached", "", func.value)
            if isinstance(func, cst.Name) and func.value in self.index.top.nested:
                return self.accessors.get(self.index.top.nested[func.value])
            if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and func.value.value in _SELF_NAMES):
                owner_cls = _enclosing_class(fn)
                cls = self.index.classes.get(owner_cls) if owner_cls else None
                method = cls.methods.get(func.attr.value) if cls else None
                if method is not None:
                    return self.accessors.get(method)
        return None


def _guard_for(fact: AssignFact, target_texts: set[str], module: cst.Module) -> Optional[tuple[cst.If, str]]:
    """The innermost enclosing ``if`` (not its else) whose test looks at the buffer."""
    for guard in reversed(fact.frame.guards):
        if guard.in_orelse:
            continue
        test = module.code_for_node(guard.node.test)
        for text in target_texts:
            if re.search(rf"(?<![\w.]){re.escape(text)}(?!\w)", test):
                return guard.node, " ".join(test.split())
    return None


def find_lazy_buffers(index: ModuleIndex) -> list[LazyBuffer]:
    module = index.module
    resolver = _Resolver(index)
    factories = {id(c.node): c for fn in index.functions for c in fn.calls if _is_factory(c)}
    if not factories:
        return []

    # Cached getters first: `@functools.cache def workspace(): return torch.empty(...)`.
    allocations: list[Allocation] = []
    for fn in index.functions:
        if fn.node is not None and fn.parent is None and fn.cls is None and fn.decorated_with(names.CACHE_DECORATORS):
            for ret in fn.returns:
                if isinstance(ret.node, cst.Return) and _factory_in(ret.value, factories):
                    resolver.cached_getters[fn.name] = fn
                    allocations.append(Allocation(BufferKey("cached", "", fn.name), ret, fn, ret.line, ret.col,
                                                  None, f"returned by cached getter `{fn.name}()`"))

    # Locals that hold a buffer, then methods that return one (accessors); two
    # rounds so that accessors built on aliases and aliases of accessors resolve.
    for _ in range(2):
        for fn in index.functions:
            local: dict[str, BufferKey] = resolver.aliases.setdefault(fn, {})
            for fact in fn.assigns:
                if isinstance(fact.node, cst.AugAssign) or fact.value is None:
                    continue
                # `buf = self._probs = torch.empty(...)`: the local names the stored buffer.
                key = resolver.key(fact.value, fn) or next(
                    (k for t in fact.targets if not isinstance(t, cst.Name) and (k := resolver.key(t, fn))), None)
                for target in fact.targets:
                    if isinstance(target, cst.Name) and key is not None and target.value not in resolver.module_names:
                        local.setdefault(target.value, key)
            for ret in fn.returns:
                if isinstance(ret.node, cst.Return) and ret.value is not None and fn.node is not None:
                    key = resolver.key(ret.value, fn)
                    if key is not None:
                        resolver.accessors.setdefault(fn, key)

    for fn in index.functions:
        for fact in fn.assigns:
            if isinstance(fact.node, cst.AugAssign) or _factory_in(fact.value, factories) is None:
                continue
            stored: list[BufferKey] = []
            texts: set[str] = set()
            for target in fact.targets:
                texts.add(module.code_for_node(resolver.base(target)))
                key = resolver.key(target, fn)
                if isinstance(target, cst.Name) and key is None:
                    key = _stored_local(fn, target.value, resolver)
                if key is not None:
                    stored.append(key)
                    texts.add(module.code_for_node(resolver.base(target)))
            guard = _guard_for(fact, texts, module) if stored else None
            if guard is None:
                continue
            for key in dict.fromkeys(stored):
                allocations.append(Allocation(key, fact, fn, fact.line, fact.col, guard[0],
                                              f"allocated under `if {guard[1]}`"))

    if not allocations:
        return []
    by_key: dict[BufferKey, LazyBuffer] = {}
    for alloc in allocations:
        by_key.setdefault(alloc.key, LazyBuffer(alloc.key, [], [])).allocations.append(alloc)
    for mutation_key, mutation in _mutations(index, resolver):
        buffer = by_key.get(mutation_key)
        if buffer is None:
            continue
        if any(_inside_guard(mutation[1], a) for a in buffer.allocations):
            continue  # initialisation right after allocation runs in the allocation's own mode
        buffer.mutations.append(mutation[0])
    return [b for b in by_key.values() if b.mutations]


def _stored_local(fn: FunctionInfo, local: str, resolver: _Resolver) -> Optional[BufferKey]:
    """``buf = torch.empty(...); self._cache[k] = buf`` stores the local in a buffer."""
    for fact in fn.assigns:
        if isinstance(fact.value, cst.Name) and fact.value.value == local:
            for target in fact.targets:
                key = resolver.key(target, fn)
                if key is not None:
                    return key
    if fn.decorated_with(names.CACHE_DECORATORS):
        for ret in fn.returns:
            if isinstance(ret.value, cst.Name) and ret.value.value == local and fn.name in resolver.cached_getters:
                return BufferKey("cached", "", fn.name)
    return None


def _inside_guard(fact, allocation: Allocation) -> bool:
    return allocation.guard is not None and fact.function is allocation.function and any(
        g.node is allocation.guard and not g.in_orelse for g in fact.frame.guards
    )


def _mutations(index: ModuleIndex, resolver: _Resolver) -> Iterable[tuple[BufferKey, tuple[Mutation, object]]]:
    for fn in index.functions:
        for call in fn.calls:
            func = call.node.func
            if isinstance(func, cst.Attribute) and call.callee and names.is_inplace_method(call.callee):
                key = resolver.key(func.value, fn)
                if key is not None:
                    yield key, (Mutation(call.line, call.col, f"`.{call.callee}()`", fn), call)
            for arg in call.node.args:
                is_out = arg.keyword is not None and arg.keyword.value == "out"
                is_op_arg = any(q.startswith("torch.ops.") for q in call.qualified)
                if is_out or is_op_arg:
                    key = resolver.key(arg.value, fn)
                    if key is not None:
                        how = "`out=` argument" if is_out else f"argument of `{names.dotted(func)}`"
                        yield key, (Mutation(call.line, call.col, how, fn), call)
        for fact in fn.assigns:
            if isinstance(fact.node, cst.AugAssign):
                key = resolver.key(fact.targets[0], fn)
                how = f"`{_op_text(fact.node)}`"
            else:
                subscripts = [t for t in fact.targets if isinstance(t, cst.Subscript)]
                key = resolver.key(subscripts[0], fn) if subscripts else None
                how = "slice/index assignment"
                if key is not None and key.kind in ("attr", "global") and _is_dict_store(subscripts[0], index):
                    key = None  # `self._cache[k] = ...` stores into the cache, it does not write a tensor
            if key is not None:
                yield key, (Mutation(fact.line, fact.col, how, fn), fact)


def _op_text(node: cst.AugAssign) -> str:
    return cst.Module([]).code_for_node(node.operator).strip()


def _is_dict_store(target: cst.Subscript, index: ModuleIndex) -> bool:
    """A store straight into ``self.x[k]`` where ``self.x`` is a dict cache."""
    return isinstance(target.value, (cst.Attribute, cst.Name)) and any(
        isinstance(fact.value, (cst.Dict, cst.DictComp))
        or (isinstance(fact.value, cst.Call) and names.dotted(fact.value.func) in ("dict", "collections.OrderedDict",
                                                                                   "OrderedDict", "defaultdict"))
        for fn in index.functions for fact in fn.assigns
        for t in fact.targets
        if index.module.code_for_node(t) == index.module.code_for_node(target.value)
    )
