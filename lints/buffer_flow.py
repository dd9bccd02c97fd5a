"""Where kept buffers flow: the buffers an expression may denote, through views and slices, returns,
fields of returned objects (``Workspace(topk_idx=self._topk_idx)``), tuples, comprehensions, ``zip`` loops,
locals, and a module's ``named_buffers()``.
"""
from __future__ import annotations

from . import names
from .buffer_allocations import BufferAllocations, BufferKey
from .callgraph import CallGraph
from .project import Project
from .regions import Regions
from .summary_records import callee_leaf, method_call
from .symbols import EXTERNAL, FIELD, FUNC, GLOBAL, LOCAL

# An nn.Module's methods that hand out its registered buffers themselves (not copies).
MODULE_BUFFER_VIEWS = frozenset({"named_buffers", "buffers", "state_dict"})
# Builtins whose result holds the items of their argument: a buffer in it stays that buffer.
SAME_ITEMS = frozenset({"dict", "list", "tuple", "sorted", "reversed", "iter"})


class BufferFlow(BufferAllocations):
    def __init__(self, project: Project, graph: CallGraph, regions: Regions, holders: bool = True) -> None:
        super().__init__(project, graph, regions, holders)
        self._values: dict[tuple[str, str], frozenset[BufferKey]] = {}
        self._returns: dict[str, frozenset[BufferKey]] = {}
        self._fields: dict[tuple[str, str], frozenset[BufferKey]] = {}
        # kept places that hold objects, not only tensors: an update of a field of one updates the buffer
        self._object_names = frozenset(a.key.name for a in self.allocations)

    # flow ------------------------------------------------------------------------------
    def keys_of(self, fid: str, expr: list, depth: int = 0) -> frozenset[BufferKey]:
        """Buffers an expression may denote (views and slices of them included)."""
        if depth > 8:
            return frozenset()
        tag = expr[0]
        if tag == "s":
            return self.keys_of(fid, expr[1], depth + 1)
        if tag == "b" or tag == "i":
            operands = expr[1] if tag == "b" else expr[1:]
            return frozenset().union(*(self.keys_of(fid, v, depth + 1) for v in operands))
        if tag == "a":
            return self._field_keys(fid, expr[1], expr[2], depth + 1)
        if tag == "t":
            return frozenset().union(*(self.keys_of(fid, v, depth + 1) for v in expr[1]))
        if tag == "m":
            return self.keys_of(fid, expr[1], depth + 1)
        if tag == "u":
            return self._element_keys(fid, expr[1], expr[2], depth + 1)
        if tag == "c":
            call = self.project.function(fid)["calls"][expr[1]]
            func = call.func
            receiver, method = method_call(func)
            if func[0] == "a" and method in names.VIEW_METHODS:
                return self.keys_of(fid, receiver, depth + 1)
            if receiver is not None and method in MODULE_BUFFER_VIEWS:
                return self._registered_keys(fid, receiver)
            if func[0] == "n" and func[1] in SAME_ITEMS and call.args:  # `dict(m.named_buffers())`
                symbol = self.project.resolve(fid, func[1])
                if symbol is not None and symbol.kind == EXTERNAL:
                    return self.keys_of(fid, call.args[0], depth + 1)
            targets = self.graph.call_targets(fid, expr[1], loose=True)
            if not targets and func[0] == "n" and receiver is not None and \
                    method in names.VIEW_METHODS | {"get", "setdefault"}:  # a view, or a lookup in a dict cache
                return self.keys_of(fid, receiver, depth + 1)
            out: set[BufferKey] = set()
            for target in targets:
                out |= self.returned(target, depth + 1)
            return frozenset(out)
        if tag != "n":
            return frozenset()
        cache_key = (fid, expr[1])
        if cache_key in self._values:
            return self._values[cache_key]
        self._values[cache_key] = frozenset()
        result = self._name_keys(fid, expr[1], depth)
        self._values[cache_key] = result
        return result

    def _element_keys(self, fid: str, value: list, index: int, depth: int) -> frozenset[BufferKey]:
        """Buffers in element ``index`` of ``value`` unpacked: of a tuple display, of the tuples a function
        returns, of the ``index``-th iterable zipped (``for out, src in zip(self._ws, srcs)``)."""
        if depth > 8:
            return frozenset()
        if value[0] == "t":
            return self.keys_of(fid, value[1][index], depth + 1) if index < len(value[1]) else frozenset()
        if value[0] == "m":
            return self.keys_of(fid, value[1], depth + 1)
        if value[0] == "s" and value[1][0] == "c":
            call = self.project.function(fid)["calls"][value[1][1]]
            receiver, method = method_call(call.func)
            if index == 1 and receiver is not None and method in MODULE_BUFFER_VIEWS:
                return self._registered_keys(fid, receiver)  # `for name, buf in model.named_buffers():`
            if callee_leaf(call.func) == "zip" and index < len(call.args):
                return self.keys_of(fid, ["s", call.args[index]], depth + 1)
            if callee_leaf(call.func) == "enumerate" and index == 1 and call.args:
                return self.keys_of(fid, ["s", call.args[0]], depth + 1)
            return frozenset()
        if value[0] == "c":
            out: set[BufferKey] = set()
            for target in self.graph.call_targets(fid, value[1], loose=True):
                for ret in self.project.function(target)["rets"]:
                    if not ret.is_yield:
                        out |= self._element_keys(target, ret.value, index, depth + 1)
            return frozenset(out)
        if value[0] == "n":
            return self._local_elements(fid, value, index, depth)
        return frozenset()

    def _registered_keys(self, fid: str, module: list) -> frozenset[BufferKey]:
        """The registered buffers of the module ``module`` evaluates to, as its ``named_buffers()``,
        ``buffers()`` or ``state_dict()`` hands them out (its own class's and its bases')."""
        cls = self.project.class_of_value(fid, module)
        if cls is None:
            return frozenset()
        return frozenset(BufferKey("attr", owner, name) for owner in self.project.mro(cls)
                         for name in self._registered_names.get(owner, ()))

    def _local_elements(self, fid: str, value: list, index: int, depth: int) -> frozenset[BufferKey]:
        symbol = self.project.resolve(fid, value[1])
        if symbol is None or symbol.kind != LOCAL or "." in symbol.name:
            return frozenset()
        return frozenset().union(*(self._element_keys(symbol.owner, v, index, depth + 1)
                                   for v in self.project.local_values(symbol.owner).get(symbol.name, [])))

    def _name_keys(self, fid: str, dotted: str, depth: int) -> frozenset[BufferKey]:
        symbol = self.project.resolve(fid, dotted)
        if symbol is None:
            return frozenset()
        if symbol.kind == FIELD:
            head, _, rest = symbol.name.partition(".")
            key = BufferKey("attr", symbol.target, head)
            # `self._ws.topk_idx`: a tensor held by a kept object is that object's buffer
            return frozenset({key}) if not rest or key.name in self._object_names else frozenset()
        if symbol.kind == GLOBAL:
            head, _, rest = symbol.name.partition(".")
            key = BufferKey("global", symbol.target, head)
            return frozenset({key}) if not rest or key.name in self._object_names else frozenset()
        if symbol.kind == FUNC and self._is_property(symbol.target):  # `self.workspace`: what its getter returns
            return self.returned(symbol.target, depth + 1)
        if symbol.kind == LOCAL:
            head, _, rest = symbol.name.partition(".")
            out: set[BufferKey] = set()
            for value in self.project.local_values(symbol.owner).get(head, []):
                if rest:
                    out |= self._field_keys(symbol.owner, value, rest, depth + 1)
                else:
                    out |= self.keys_of(symbol.owner, value, depth + 1)
            return frozenset(out)
        return frozenset()

    def returned(self, fid: str, depth: int = 0) -> frozenset[BufferKey]:
        if fid in self._returns:
            return self._returns[fid]
        self._returns[fid] = frozenset()
        fn = self.project.function(fid)
        out: set[BufferKey] = set()
        if self._cached_getter(fid):
            out.add(BufferKey("getter", fid, fn["qual"]))
        for ret in fn["rets"]:
            if not ret.is_yield:
                out |= self.keys_of(fid, ret.value, depth + 1)
        self._returns[fid] = frozenset(out)
        return self._returns[fid]

    def _field_keys(self, fid: str, value: list, field: str, depth: int) -> frozenset[BufferKey]:
        """Buffers in ``value.field`` where ``value`` is an object built with ``field=buffer``."""
        if depth > 8:
            return frozenset()
        head, _, rest = field.partition(".")
        if rest:
            return frozenset()
        if value[0] == "c":
            call = self.project.function(fid)["calls"][value[1]]
            if head in call.kwargs:  # Workspace(topk_idx=self._topk_idx) built right here
                return self.keys_of(fid, call.kwargs[head], depth + 1)
            out: set[BufferKey] = set()
            for target in self.graph.call_targets(fid, value[1], loose=True):
                key = (target, head)
                if key not in self._fields:
                    self._fields[key] = frozenset()
                    found: set[BufferKey] = set()
                    for ret in self.project.function(target)["rets"]:
                        if not ret.is_yield:
                            found |= self._field_keys(target, ret.value, head, depth + 1)
                    self._fields[key] = frozenset(found)
                out |= self._fields[key]
            return frozenset(out)
        if value[0] == "n":
            symbol = self.project.resolve(fid, value[1])
            if symbol is not None and symbol.kind == LOCAL and "." not in symbol.name:
                out = set()
                for inner in self.project.local_values(symbol.owner).get(symbol.name, []):
                    out |= self._field_keys(symbol.owner, inner, head, depth + 1)
                return frozenset(out)
        # a kept object itself (`ws = self._ensure_workspace()`): its fields are its buffer
        return frozenset(key for key in self.keys_of(fid, value, depth + 1) if key.name in self._object_names)
