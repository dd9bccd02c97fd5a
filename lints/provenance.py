"""Which values are new tensors: the provenance half of the buffer facts.

A value is *fresh* when evaluating it makes a new tensor, or a new object whose fields hold one:

* a torch factory (``torch.empty``, ``x.new_zeros``, ``torch.cat``, ...), a copying method
  (``.to()``, ``.cuda()``, ``.clone()``, ``.contiguous()``, ``.pin_memory()``) or a known library
  allocator (``symm_mem.empty``);
* a call to a function whose return summary says fresh (``return torch.full(...)``, a kernel object's
  ``prepare_workspace()``, overrides in subclasses included), to a function that hands back the fresh
  argument it was given (``pin_memory(torch.empty(...))``), to a lambda or a factory passed as an
  argument (``acquire_workspace(key, lambda: Workspace(n))``);
* a constructor given a fresh argument (``Workspace(topk_idx=torch.empty(...))``) or whose
  ``__init__`` stores a fresh value into a field of the new object.

Each answer carries a short witness (what allocates and where) for the finding's notes. Every
question is memoised per function, so the project pays once for each function it follows.
"""
from __future__ import annotations

from typing import Optional

from . import names
from .callgraph import CallGraph
from .project import Project
from .regions import Regions
from .summary_records import callee_leaf, method_call
from .symbols import CLASS, EXTERNAL, FUNC, LOCAL, PARAM

# Methods that give a new tensor (a copy) of their receiver.
COPYING_METHODS = frozenset({"clone", "to", "cuda", "cpu", "contiguous", "pin_memory", "float", "half", "bfloat16",
                             "double"})
# Allocators of libraries that give a torch tensor (symmetric memory for multi-GPU kernels).
LIBRARY_ALLOCATORS = frozenset({"torch.distributed._symmetric_memory.empty", "symm_mem.empty"})
CONSTRUCTORS = ("__init__", "__post_init__")
_MAX_DEPTH = 12
_MAX_CALLERS = 16


class Provenance:
    def __init__(self, project: Project, graph: CallGraph, regions: Regions, copies: bool = True) -> None:
        # without copies: only what allocates from nothing (factories, allocators), not a copy or a `cat` of a
        # tensor that exists (`if self.x is not None: self.x = self.x.to(dev)` re-binds, it is no lazy buffer)
        self.copies = copies
        self.project = project
        self.graph = graph
        self.regions = regions
        self._returns: dict[str, Optional[str]] = {}
        self._locals: dict[tuple[str, str], Optional[str]] = {}
        self._classes: dict[str, Optional[str]] = {}
        self._returned_params: dict[str, frozenset[str]] = {}
        self._overrides: dict[str, list[str]] = {}

    # values --------------------------------------------------------------------------
    def fresh(self, fid: str, expr: list, depth: int = 0) -> Optional[str]:
        """How ``expr`` (in ``fid``) makes a new tensor, or None."""
        if depth > _MAX_DEPTH:
            return None
        tag = expr[0]
        if tag == "c":
            return self._call(fid, expr[1], depth)
        if tag == "n":
            return self._name(fid, expr[1], depth)
        if tag == "b" or tag == "i":
            for operand in (expr[1] if tag == "b" else expr[1:]):
                found = self.fresh(fid, operand, depth + 1)
                if found:
                    return found
            return None
        if tag == "s":  # a view of a new tensor is one too
            return self.fresh(fid, expr[1], depth + 1)
        if tag == "t":
            return next((found for v in expr[1] if (found := self.fresh(fid, v, depth + 1))), None)
        if tag == "m":  # a comprehension of new tensors
            return self.fresh(fid, expr[1], depth + 1)
        if tag == "u":
            return self._element(fid, expr[1], expr[2], depth + 1)
        return None

    def _element(self, fid: str, value: list, index: int, depth: int) -> Optional[str]:
        if depth > _MAX_DEPTH:
            return None
        if value[0] == "t":
            return self.fresh(fid, value[1][index], depth + 1) if index < len(value[1]) else None
        if value[0] == "m":
            return self.fresh(fid, value[1], depth + 1)
        if value[0] == "c":
            for target in self._targets(fid, value[1]):
                for ret in self.project.function(target)["rets"]:
                    if not ret.is_yield and (found := self._element(target, ret.value, index, depth + 1)):
                        return found
        return None

    def _name(self, fid: str, dotted: str, depth: int) -> Optional[str]:
        if "." in dotted:
            return None
        symbol = self.project.resolve(fid, dotted)
        if symbol is None or symbol.kind != LOCAL or "." in symbol.name:
            return None
        key = (symbol.owner, symbol.name)
        if key in self._locals:
            return self._locals[key]
        self._locals[key] = None  # guards `x = f(x)` cycles
        found = None
        for value in self.project.local_values(symbol.owner).get(symbol.name, []):
            found = self.fresh(symbol.owner, value, depth + 1)
            if found:
                break
        self._locals[key] = found
        return found

    def _call(self, fid: str, index: int, depth: int) -> Optional[str]:
        project = self.project
        fn = project.function(fid)
        call = fn["calls"][index]
        func = call.func
        where = project.where(fid, call.line)
        receiver, method = method_call(func)
        leaf = callee_leaf(func)
        if func[0] == "a" and leaf in names.TENSOR_METHOD_FACTORIES:
            return f"`.{leaf}()` at {where}"
        symbol = project.resolve(fid, func[1]) if func[0] == "n" else None
        if symbol is not None and symbol.kind == EXTERNAL:
            target = symbol.target
            if target in (names.FRESH_TENSOR_FUNCTIONS if self.copies else names.TORCH_FACTORIES) or \
                    target in LIBRARY_ALLOCATORS or target.endswith(".symm_mem.empty"):
                return f"`{func[1]}()` at {where}"
            if leaf in names.TENSOR_METHOD_FACTORIES and "." in func[1]:
                return f"`{func[1]}()` at {where}"
            if self.copies and receiver is not None and leaf in COPYING_METHODS and not target.startswith("torch."):
                return f"`{func[1]}()` (a copy) at {where}"
            # a wrapper of another library's given a new tensor: `pin_memory(torch.empty(...))`
            if call.args and not target.startswith(("torch.", "builtins.")) and (
                    found := self.fresh(fid, call.args[0], depth + 1)):
                return found
            return None
        if receiver is not None and leaf in names.TENSOR_METHOD_FACTORIES and (
                symbol is None or symbol.kind not in (FUNC, CLASS)):
            return f"`{func[1]}()` at {where}"
        if receiver is not None and leaf in COPYING_METHODS:
            # `Model(cfg).cuda()` is the module itself: fresh only if the module is; `torch.empty(n).cuda()` too
            owner = project.class_of_value(fid, receiver)
            if owner is not None and project.method(owner, leaf) is None:
                return self.fresh(fid, receiver, depth + 1)
            if symbol is None or symbol.kind not in (FUNC, CLASS):
                if self.copies:
                    return f"`{_short(func)}()` (a copy) at {where}"
                return self.fresh(fid, receiver, depth + 1)
        if symbol is not None and symbol.kind == CLASS:
            return self._constructed(fid, call, symbol.target, depth)
        if symbol is not None and symbol.kind in (LOCAL, PARAM) and "." not in symbol.name:
            return self._called_value(fid, symbol, depth)
        for target in self._targets(fid, index):
            found = self.returns(target, depth + 1)
            if found:
                return found
            for param in self.returned_params(target):
                arg = self.regions.argument_for(target, param, call)
                if arg is not None and (found := self.fresh(fid, arg, depth + 1)):
                    return found
        return None

    def _targets(self, fid: str, index: int) -> list[str]:
        """The functions a call may run: its resolved targets and the overrides of a method in subclasses."""
        out = list(self.graph.call_targets(fid, index, loose=True))
        for target in list(out):
            out.extend(t for t in self.overrides(target) if t not in out)
        return out

    def overrides(self, fid: str) -> list[str]:
        """Methods of subclasses that override method ``fid`` (``self._allocate_workspace()`` in a base)."""
        if fid in self._overrides:
            return self._overrides[fid]
        project = self.project
        fn = project.function(fid)
        found: dict[str, None] = {}  # in the subclasses' order, each once (a big hierarchy has thousands)
        owner = project.class_of(fid) if fn["cls"] is not None else None
        if owner is not None and not fn["name"].startswith("__"):
            for sub in project.subclasses(owner):
                method = project.method(sub, fn["name"])
                if method is not None and method != fid:
                    found[method] = None
        listed = self._overrides[fid] = list(found)
        return listed

    def _called_value(self, fid: str, symbol, depth: int) -> Optional[str]:
        """``factory()`` where ``factory`` is a local or a parameter: what the callable it holds makes."""
        project = self.project
        if symbol.kind == LOCAL:
            candidates = [(symbol.owner, value) for value in project.local_values(symbol.owner).get(symbol.name, [])]
        else:
            candidates = []
            for edge in self.graph.callers().get(symbol.owner, [])[:_MAX_CALLERS]:
                if edge.call < 0:
                    continue
                call = project.function(edge.caller)["calls"][edge.call]
                arg = self.regions.argument_for(symbol.owner, symbol.name, call)
                if arg is not None:
                    candidates.append((edge.caller, arg))
        for owner, value in candidates:
            found = self._callable_makes(owner, value, depth + 1)
            if found:
                return found
        return None

    def _callable_makes(self, fid: str, value: list, depth: int) -> Optional[str]:
        if value[0] == "l":
            return self.fresh(fid, value[1], depth + 1)
        target = self.graph.function_ref(fid, value)
        if target is not None:
            return self.returns(target, depth + 1)
        if value[0] == "n":
            symbol = self.project.resolve(fid, value[1])
            if symbol is not None and symbol.kind == CLASS:
                return self.allocating_class(symbol.target, depth + 1)
        return None

    def _constructed(self, fid: str, call: list, cid: str, depth: int) -> Optional[str]:
        for arg in [*call.args, *call.kwargs.values()]:
            found = self.fresh(fid, arg, depth + 1)
            if found:
                return found
        return self.allocating_class(cid, depth + 1)

    # summaries -------------------------------------------------------------------------
    def returns(self, fid: str, depth: int = 0) -> Optional[str]:
        """How a call of ``fid`` returns a new tensor (or an object holding one), or None."""
        if fid in self._returns:
            return self._returns[fid]
        self._returns[fid] = None  # guards recursion
        found = None
        for ret in self.project.function(fid)["rets"]:
            if not ret.is_yield and (found := self.fresh(fid, ret.value, depth + 1)):
                break
        self._returns[fid] = found
        return found

    def returned_params(self, fid: str) -> frozenset[str]:
        """The parameters ``fid`` may hand back as they are (``return x``)."""
        if fid not in self._returned_params:
            fn = self.project.function(fid)
            params = set(fn["params"]) - {"self", "cls"}
            self._returned_params[fid] = frozenset(
                ret.value[1] for ret in fn["rets"]
                if not ret.is_yield and ret.value[0] == "n" and ret.value[1] in params)
        return self._returned_params[fid]

    def allocating_class(self, cid: str, depth: int = 0) -> Optional[str]:
        """How constructing ``cid`` allocates a tensor into a field of the new object, or None."""
        if cid in self._classes:
            return self._classes[cid]
        self._classes[cid] = None
        found = None
        for name in CONSTRUCTORS:
            init = self.project.method(cid, name)
            if init is not None and (found := self.field_allocation(init, depth)):
                break
        self._classes[cid] = found
        return found

    def field_allocation(self, fid: str, depth: int = 0) -> Optional[str]:
        """How ``fid`` stores a new tensor into a field of ``self``, or None."""
        for fact in self.project.function(fid)["assigns"]:
            target = fact.target
            if fact.op is None and target[0] == "n" and target[1].startswith("self.") \
                    and target[1].count(".") == 1 and (found := self.fresh(fid, fact.value, depth + 1)):
                return found
        return None


def _short(func: list) -> str:
    return func[1] if func[0] == "n" else f"….{func[2]}"
