"""Lazily allocated reusable buffers, where they flow, and where they are updated in place.

A buffer is *lazily allocated* when a torch factory (``torch.empty``, ``x.new_zeros``, ...) is
stored under a guard that checks that same buffer (``is None``, a size test, ``hasattr``, a
dict-cache miss) into an attribute, a module global or a dict cache, or is returned by a
``functools.cache`` getter. The grad mode of that first call decides for good whether it is an
inference tensor. The buffer then flows: returned by a getter, handed out as a field of a
returned object (``Workspace(topk_idx=self._topk_idx)``), or passed as an argument; an in-place
torch update anywhere it flows to (``.fill_()``, ``+=``, ``buf[a:b] = x``, ``out=buf``) is where
the crash shows. Kernels that write through pointers (Triton, CUDA, JIT) never raise, so their
arguments are not updates.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from . import names
from .callgraph import CallGraph
from .project import CLASS, EXTERNAL, FIELD, FUNC, GLOBAL, LOCAL, Project
from .provenance import CONSTRUCTORS, COPYING_METHODS, Provenance
from .regions import ENABLE_GRAD, INFERENCE_OFF, NO_GRAD, Regions
from .summary import (A_COL, A_GUARD, A_LINE, A_OP, A_TARGET, A_VALUE, A_WITH, C_ARGS, C_COL, C_FUNC, C_GUARD,
                      C_KWARGS, C_LINE, C_WITH, D_EXPR, G_NAMES, G_ORELSE, G_PARENT, G_PRESENT, MODULE_SCOPE, R_COL,
                      R_LINE, R_VALUE, R_WITH, R_YIELD, I_EXPR, W_ITEMS, callee_leaf, enclosing_withs, method_call)


class BufferKey(NamedTuple):
    kind: str  # "attr" | "global" | "getter"
    owner: str  # class id, module name, or getter fid
    name: str

    def text(self) -> str:
        if self.kind == "attr":  # `Class.attr`: the buffer may be reached through another object
            return f"{self.owner.rsplit(':', 1)[-1]}.{self.name}"
        if self.kind == "getter":
            return f"{self.name}()"
        return self.name


class Allocation(NamedTuple):
    key: BufferKey
    fid: str
    line: int
    col: int
    with_index: int
    guard: int  # the if-branch that makes it lazy (-1 for cached getters)
    why_lazy: str
    dict_cache: bool  # stored into a container (a dict cache, a pool list)
    lazy: bool = True  # under a check of what it is stored into; else eager (a constructor, a plain store)


class Mutation(NamedTuple):
    fid: str
    line: int
    col: int
    with_index: int
    guard: int
    how: str
    # where the buffer is handed to the function that updates it (a parameter of it, or of what it calls):
    # the grad mode there is the update's
    entry_fid: str = ""
    entry_with: int = -1
    entry_line: int = 0
    # made through the module's `named_buffers()` (`dict(model.named_buffers())[name][...] = t`): the buffers
    # a parameter stands for are the registered ones of the module passed for it
    of_module_buffers: bool = False


_CONTAINER_INSERTS = frozenset({"append", "setdefault", "insert", "add"})
# An nn.Module's methods that hand out its registered buffers themselves (not copies).
_MODULE_BUFFER_VIEWS = frozenset({"named_buffers", "buffers", "state_dict"})
# Builtins whose result holds the items of their argument: a buffer in it stays that buffer.
_SAME_ITEMS = frozenset({"dict", "list", "tuple", "sorted", "reversed", "iter"})

class Buffers:
    def __init__(self, project: Project, graph: CallGraph, regions: Regions) -> None:
        self.project = project
        self.graph = graph
        self.regions = regions
        self._values: dict[tuple[str, str], frozenset[BufferKey]] = {}
        self._returns: dict[str, frozenset[BufferKey]] = {}
        self._fields: dict[tuple[str, str], frozenset[BufferKey]] = {}
        self._registered_names: dict[str, set[str]] = {}  # module class -> its `register_buffer` names
        # lazy buffers are allocated from nothing; a kept tensor rebound to a copy of itself is one too (eager)
        self.provenance = Provenance(project, graph, regions, copies=False)
        self._copies = Provenance(project, graph, regions, copies=True)
        self.allocations = self._find_allocations()
        # kept places that hold objects, not only tensors: an update of a field of one updates the buffer
        self._object_names = frozenset(a.key.name for a in self.allocations)

    # allocations -------------------------------------------------------------------
    def _guarded(self, fn: dict, guard: int, texts: set[str]) -> Optional[str]:
        guards = fn["guards"]
        while guard >= 0:
            record = guards[guard]
            if not record[G_ORELSE]:
                for name in record[G_NAMES]:
                    for text in texts:
                        # not a test that finds it there (`if self._pool is not None: self._pool.append(...)`)
                        if text in record[G_PRESENT]:
                            continue
                        if name == text or name.startswith(text + ".") or name == f"'{text.rsplit('.', 1)[-1]}'":
                            return text
            guard = record[G_PARENT]
        return None

    def _store_key(self, fid: str, target: list) -> Optional[tuple[BufferKey, bool]]:
        """The buffer a store target names: ``self.x``, a global, or a dict cache ``self._c[k]``."""
        dict_store = target[0] == "s"
        if dict_store:
            target = target[1]
        if target[0] != "n":
            return None
        symbol = self.project.resolve(fid, target[1])
        if symbol is None:
            return None
        if symbol.kind == FIELD and "." not in symbol.name:
            return BufferKey("attr", symbol.target, symbol.name), dict_store
        if symbol.kind == GLOBAL and "." not in symbol.name:
            return BufferKey("global", symbol.target, symbol.name), dict_store
        return None

    def _find_allocations(self) -> list[Allocation]:
        """Every store of a new tensor (see ``provenance``) into a kept place: a field, a module global, an
        item of a dict or list kept in one, or the return of a cached getter. Lazy where a guard checks the
        place first (``if self._buf is None``); eager in a constructor or a plain store (``self.h = h.to(d)``)."""
        project = self.project
        found: list[Allocation] = []
        for fid, (summary, fn) in project.functions.items():
            if self._cached_getter(fid):
                for ret in fn["rets"]:
                    if not ret[R_YIELD] and self.provenance.fresh(fid, ret[R_VALUE]):
                        found.append(Allocation(BufferKey("getter", fid, fn["qual"]), fid, ret[R_LINE], ret[R_COL],
                                                ret[R_WITH], -1, f"returned by cached getter `{fn['qual']}()`", False))
                        break
                continue
            local_allocs: dict[str, list] = {}
            siblings: list[tuple[list, str]] = []  # stores under a guard that checks another place
            lazy_guards: dict[int, str] = {}  # guard -> the place it checks, for the lazy stores under it
            # locals stored somewhere as they are (`self._c[k] = buf`): the only ones whose provenance matters
            stored_locals = {fact[A_VALUE][1] for fact in fn["assigns"] if fact[A_OP] is None
                             and fact[A_VALUE][0] == "n" and "." not in fact[A_VALUE][1]
                             and (fact[A_TARGET][0] == "s" or "." in fact[A_TARGET][1])}
            for fact in fn["assigns"]:
                target = fact[A_TARGET]
                if fact[A_OP] is not None or target[0] not in "ns":
                    continue
                if target[0] == "n" and "." not in target[1] and target[1] not in fn["globals"] \
                        and fn["qual"] != MODULE_SCOPE:
                    if target[1] in stored_locals and self.provenance.fresh(fid, fact[A_VALUE]):
                        local_allocs.setdefault(target[1], []).append(fact)
                    continue
                value = fact[A_VALUE]
                if value[0] == "n" and "." not in value[1]:
                    continue  # a local: `_stored_locals` follows it to where it was allocated
                dict_store = target[0] == "s"
                named = target[1] if dict_store else target
                if named[0] != "n":
                    continue
                text = named[1]
                lazy = self._guarded(fn, fact[A_GUARD], {text}) is not None
                copy = not lazy and not dict_store and self._copy_of_itself(fid, value, text)
                eager = not lazy and not dict_store and fn["name"] in CONSTRUCTORS
                if not (lazy or eager or copy):
                    if fact[A_GUARD] >= 0 and not dict_store:
                        siblings.append((fact, text))
                    continue  # before resolving the target: most stores are none of these
                stored = self._store_key(fid, target)
                if stored is None:
                    continue
                key, dict_store = stored
                if not (self._copies.fresh(fid, value) if copy else self.provenance.fresh(fid, value)):
                    continue  # the costly question last
                if lazy:
                    found.append(Allocation(key, fid, fact[A_LINE], fact[A_COL], fact[A_WITH], fact[A_GUARD],
                                            f"allocated under a check of `{text}`", dict_store))
                    lazy_guards.setdefault(fact[A_GUARD], text)
                else:
                    # eager: built with the object, or rebound to a copy of itself (`self.k = self.k.to(dtype)`);
                    # not any store of a new tensor (a per-batch field set by each event loop), which would pair
                    # the allocations of one loop with the updates of another that never runs beside it
                    found.append(Allocation(key, fid, fact[A_LINE], fact[A_COL], fact[A_WITH], fact[A_GUARD],
                                            self._eager_why(fid, fn, text), dict_store, lazy=False))
            # `if not hasattr(self, "_cu_q"): self._cu_q = ...; self._cu_k = ...`: built once, with the place checked
            for fact, text in siblings:
                checked = lazy_guards.get(fact[A_GUARD])
                if checked is None or checked == text:
                    continue
                stored = self._store_key(fid, fact[A_TARGET])
                if stored is not None and self.provenance.fresh(fid, fact[A_VALUE]):
                    found.append(Allocation(stored[0], fid, fact[A_LINE], fact[A_COL], fact[A_WITH], fact[A_GUARD],
                                            f"allocated with `{checked}`, under its check", False))
            found.extend(self._appended(fid, fn))
            if local_allocs:
                found.extend(self._stored_locals(fid, fn, local_allocs))
        return found

    def _copy_of_itself(self, fid: str, value: list, text: str) -> bool:
        if value[0] != "c":
            return False
        receiver, method = method_call(self.project.function(fid)["calls"][value[1]][C_FUNC])
        return receiver == ["n", text] and method in COPYING_METHODS

    def _eager_why(self, fid: str, fn: dict, text: str) -> str:
        if fn["name"] in CONSTRUCTORS and fn["cls"]:
            return f"`{text}` allocated when `{fn['cls']}` is built"
        return f"`{text}` bound to a new tensor"

    def _appended(self, fid: str, fn: dict) -> list[Allocation]:
        """``BUFFERS.append(torch.empty(...))``, ``self._pool.setdefault(k, torch.empty(...))`` into a kept
        list or dict (lazy under a check of that container)."""
        out = []
        for call in fn["calls"]:
            leaf = callee_leaf(call[C_FUNC])
            if leaf == "register_buffer":
                out.extend(self._registered(fid, fn, call))
                continue
            if leaf not in _CONTAINER_INSERTS:
                continue
            receiver, method = method_call(call[C_FUNC])
            if receiver is None or method not in _CONTAINER_INSERTS or receiver[0] != "n" or not call[C_ARGS]:
                continue
            value = call[C_ARGS][-1]
            text = receiver[1]
            # a list grown on every call holds each call's tensors: not one kept buffer
            if self._guarded(fn, call[C_GUARD], {text}) is None:
                continue
            stored = self._store_key(fid, receiver)
            if stored is None or not self.provenance.fresh(fid, value):
                continue
            key, _ = stored
            out.append(Allocation(key, fid, call[C_LINE], call[C_COL], call[C_WITH], call[C_GUARD],
                                  f"allocated under a check of `{text}`", True))
        return out

    def _registered(self, fid: str, fn: dict, call: list) -> list[Allocation]:
        """``self.register_buffer("cos", torch.zeros(n))``: the module's field ``cos``, built with it."""
        args = call[C_ARGS]
        owner = self.project.class_of(fid)
        if (owner is None or call[C_FUNC] != ["n", "self.register_buffer"] or len(args) < 2 or args[0][0] != "k"
                or not isinstance(args[0][1], str) or not self.provenance.fresh(fid, args[1])):
            return []
        self._registered_names.setdefault(owner, set()).add(args[0][1])
        return [Allocation(BufferKey("attr", owner, args[0][1]), fid, call[C_LINE], call[C_COL], call[C_WITH],
                           call[C_GUARD], f"registered buffer `{args[0][1]}` of `{fn['cls']}`", False, lazy=False)]

    def _stored_locals(self, fid: str, fn: dict, local_allocs: dict[str, list]) -> list[Allocation]:
        """``buf = torch.empty(...)`` then ``self._cache[k] = buf`` / ``self._buf = buf`` (lazy under a guard)."""
        out = []
        for fact in fn["assigns"]:
            value = fact[A_VALUE]
            if fact[A_OP] is not None or value[0] != "n" or value[1] not in local_allocs:
                continue
            stored = self._store_key(fid, fact[A_TARGET])
            if stored is None:
                continue
            key, dict_store = stored
            target = fact[A_TARGET][1] if dict_store else fact[A_TARGET]
            text = target[1]
            # a check of the local counts where the local was read from the store (`buf = self._c.get(k)`):
            # `if epoch is None: epoch = torch.zeros(1)` on a parameter is a default, not a lazy buffer
            checked = {text, value[1]} if self._read_from(fid, value[1], text) else {text}
            for alloc in local_allocs[value[1]]:
                if self._guarded(fn, alloc[A_GUARD], checked) is not None:
                    out.append(Allocation(key, fid, alloc[A_LINE], alloc[A_COL], alloc[A_WITH], alloc[A_GUARD],
                                          f"allocated under a check of `{text}`", dict_store))
                    break
            else:
                if fn["name"] in CONSTRUCTORS and not dict_store:
                    alloc = local_allocs[value[1]][0]
                    out.append(Allocation(key, fid, alloc[A_LINE], alloc[A_COL], alloc[A_WITH], alloc[A_GUARD],
                                          self._eager_why(fid, fn, text), dict_store, lazy=False))
        return out

    def _read_from(self, fid: str, local: str, stored: str) -> bool:
        """Whether ``local`` is also bound to what ``stored`` holds (``buf = self._cache.get(k)``, ``buf =
        _POOL[k]``, ``buf = self._buf``)."""
        for value in self.project.local_values(fid).get(local, []):
            while value[0] in "sc":
                if value[0] == "s":
                    value = value[1]
                    continue
                receiver, _method = method_call(self.project.function(fid)["calls"][value[1]][C_FUNC])
                if receiver is None:
                    break
                value = receiver
            if value[0] == "n" and (value[1] == stored or value[1].startswith(stored + ".")):
                return True
        return False

    def _decorators(self, fid: str) -> list[str]:
        """What each decorator of ``fid`` names outside the project (``@f`` and ``@f(...)`` alike)."""
        fn = self.project.function(fid)
        out = []
        for dec in fn["dec"]:
            expr = dec[D_EXPR]
            if expr[0] == "c":
                expr = fn["calls"][expr[1]][C_FUNC]
            if expr[0] == "n":
                symbol = self.project.resolve(fid, expr[1])
                if symbol is not None and symbol.kind == EXTERNAL:
                    out.append(symbol.target)
        return out

    def _is_property(self, fid: str) -> bool:
        """A method read as an attribute (``@property``, ``@functools.cached_property``)."""
        return any(target in ("property", "functools.cached_property") for target in self._decorators(fid))

    def _cached_getter(self, fid: str) -> bool:
        return any(target in names.CACHE_DECORATORS for target in self._decorators(fid))

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
            func = call[C_FUNC]
            receiver, method = method_call(func)
            if func[0] == "a" and method in names.VIEW_METHODS:
                return self.keys_of(fid, receiver, depth + 1)
            if receiver is not None and method in _MODULE_BUFFER_VIEWS:
                return self._registered_keys(fid, receiver)
            if func[0] == "n" and func[1] in _SAME_ITEMS and call[C_ARGS]:  # `dict(m.named_buffers())`
                symbol = self.project.resolve(fid, func[1])
                if symbol is not None and symbol.kind == EXTERNAL:
                    return self.keys_of(fid, call[C_ARGS][0], depth + 1)
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
            receiver, method = method_call(call[C_FUNC])
            if index == 1 and receiver is not None and method in _MODULE_BUFFER_VIEWS:
                return self._registered_keys(fid, receiver)  # `for name, buf in model.named_buffers():`
            if callee_leaf(call[C_FUNC]) == "zip" and index < len(call[C_ARGS]):
                return self.keys_of(fid, ["s", call[C_ARGS][index]], depth + 1)
            if callee_leaf(call[C_FUNC]) == "enumerate" and index == 1 and call[C_ARGS]:
                return self.keys_of(fid, ["s", call[C_ARGS][0]], depth + 1)
            return frozenset()
        if value[0] == "c":
            out: set[BufferKey] = set()
            for target in self.graph.call_targets(fid, value[1], loose=True):
                for ret in self.project.function(target)["rets"]:
                    if not ret[R_YIELD]:
                        out |= self._element_keys(target, ret[R_VALUE], index, depth + 1)
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
            if not ret[R_YIELD]:
                out |= self.keys_of(fid, ret[R_VALUE], depth + 1)
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
            if head in call[C_KWARGS]:  # Workspace(topk_idx=self._topk_idx) built right here
                return self.keys_of(fid, call[C_KWARGS][head], depth + 1)
            out: set[BufferKey] = set()
            for target in self.graph.call_targets(fid, value[1], loose=True):
                key = (target, head)
                if key not in self._fields:
                    self._fields[key] = frozenset()
                    found: set[BufferKey] = set()
                    for ret in self.project.function(target)["rets"]:
                        if not ret[R_YIELD]:
                            found |= self._field_keys(target, ret[R_VALUE], head, depth + 1)
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

    # mutations -----------------------------------------------------------------------
    def _sites(self, fid: str):
        """(receiver expression, mutation) for each in-place update in ``fid``."""
        fn = self.project.function(fid)
        for index, call in enumerate(fn["calls"]):
            func = call[C_FUNC]
            receiver, method = method_call(func)
            if receiver is not None and names.is_inplace_method(method):
                yield receiver, Mutation(fid, call[C_LINE], call[C_COL], call[C_WITH], call[C_GUARD],
                                         f"`.{method}()`"), False
            if func[0] == "n" and names.is_inplace_method(method) and call[C_ARGS] and receiver is not None:
                function = self.project.resolve(fid, func[1])  # the function form: `torch.clamp_(b, 0, 1)`
                if (function is not None and function.kind == EXTERNAL
                        and function.target.rpartition(".")[0] in names.INPLACE_FUNCTION_MODULES):
                    yield call[C_ARGS][0], Mutation(fid, call[C_LINE], call[C_COL], call[C_WITH], call[C_GUARD],
                                                    f"`{func[1]}()`"), False
            out = call[C_KWARGS].get("out")
            if out is not None and func[0] == "n" and func[1].split(".", 1)[0] in ("torch", "th"):
                yield out, Mutation(fid, call[C_LINE], call[C_COL], call[C_WITH], call[C_GUARD],
                                    "`out=` argument"), False
        for fact in fn["assigns"]:
            op = fact[A_OP]
            target = fact[A_TARGET]
            if op is not None and op != "with":
                yield target, Mutation(fid, fact[A_LINE], fact[A_COL], fact[A_WITH], fact[A_GUARD],
                                       f"augmented assignment ({_OPERATORS.get(op, op)})"), False
            elif op is None and target[0] == "s":
                yield target, Mutation(fid, fact[A_LINE], fact[A_COL], fact[A_WITH], fact[A_GUARD],
                                       "slice/index assignment"), True

    def _is_container(self, fid: str, expr: list, depth: int = 0) -> bool:
        """Whether ``expr`` is a dict cache itself (``self._cache``, a global, a local bound only to one of
        them), not a tensor taken out of one (``out = pool.get(n)``; ``out[:] = x`` writes that tensor)."""
        if expr[0] != "n" or depth > 4:
            return False
        symbol = self.project.resolve(fid, expr[1])
        if symbol is None:
            return False
        if symbol.kind in (FIELD, GLOBAL):
            return "." not in symbol.name
        if symbol.kind == LOCAL and "." not in symbol.name:
            values = self.project.local_values(symbol.owner).get(symbol.name, [])
            return bool(values) and all(self._is_container(symbol.owner, v, depth + 1) for v in values)
        return False

    def _replaced_before(self, fid: str, fn: dict, name: str, mutation: Mutation) -> Optional[tuple[int, int]]:
        """Where ``name = <a new tensor>`` last comes before ``mutation`` and runs whenever it does:
        ``out = out.clone()``, ``self.h = torch.roll(self.h, 1)``, ``out = out + x``. What ``name`` held
        before is not what the mutation updates. None if there is none. A rebinding to anything else may
        be an alternative (try/except, a loop) and is not taken as one. ``name`` may be an attribute
        (``self.h``): a call between the two could rebind it, which is not followed."""
        chain = set()
        guard = mutation.guard
        while guard >= 0:
            chain.add(guard)
            guard = fn["guards"][guard][G_PARENT]
        found = None
        for fact in fn["assigns"]:
            where = (fact[A_LINE], fact[A_COL])
            # a statement of its own in the very block of the update (a copy in a loop, a `try`, a handler,
            # a match case, another with-body or a walrus may not run, or run under another mode): indented
            # as the update is, nothing between them indented less
            if (fact[A_TARGET] == ["n", name] and fact[A_OP] is None and where < (mutation.line, mutation.col)
                    and fact[A_COL] == mutation.col and (fact[A_GUARD] < 0 or fact[A_GUARD] in chain)
                    and all(first <= mutation.line <= last for first, last in fn["blocks"]
                            if first <= fact[A_LINE] <= last)
                    and self._fresh_tensor(fid, fact[A_VALUE])
                    and self._mode_kept(fid, fn, fact[A_WITH], mutation.with_index)
                    and not _dedented_between(fn, fact[A_LINE], mutation.line, mutation.col)):
                found = max(found or where, where)
        # bound again after the copy (`out, k = get_buf(), 0`, a loop, a with), itself or what it is an
        # attribute of (`st.h = st.h.clone(); st = other`): not known
        prefixes = [["n", name.rsplit(".", depth)[0]] for depth in range(name.count(".") + 1)]
        if found is not None and any(f[A_TARGET] in prefixes and (f[A_LINE], f[A_COL]) > found
                                     for f in fn["assigns"]):
            return None
        return found

    def _mode_kept(self, fid: str, fn: dict, copy_with: int, update_with: int) -> bool:
        """Whether the copy is no inference tensor the update cannot write: each with around the copy but
        not the update is known to keep inference mode off (``torch.no_grad()``, another context of
        torch's; not a lock, which may be anything), and none around the update but not the copy leaves it."""
        around_copy, around_update = list(enclosing_withs(fn, copy_with)), list(enclosing_withs(fn, update_with))
        for index in around_copy:
            if index not in around_update and not all(
                    all(m.mode in (NO_GRAD, ENABLE_GRAD, INFERENCE_OFF) for m in modes) if modes
                    else self._torch_context(fid, fn, item[I_EXPR])
                    for modes, item in zip(self.regions.with_modes(fid, index), fn["withs"][index][W_ITEMS])):
                return False
        return not any(m.mode == INFERENCE_OFF for index in around_update if index not in around_copy
                       for modes in self.regions.with_modes(fid, index) for m in modes)

    def _torch_context(self, fid: str, fn: dict, expr: list) -> bool:
        """A context of torch's that is no grad-mode switch (``torch.autocast(...)``, ``torch.cuda.stream(s)``,
        ``torch.profiler.record_function(...)``): it cannot enter inference mode."""
        if expr[0] != "c":
            return False
        func = fn["calls"][expr[1]][C_FUNC]
        symbol = self.project.resolve(fid, func[1]) if func[0] == "n" else None
        return (symbol is not None and symbol.kind == EXTERNAL and symbol.target.startswith("torch.")
                and symbol.target not in names.GRAD_MODE_CLASSES and symbol.target != names.C_INFERENCE_MODE)

    def _fresh_tensor(self, fid: str, value: list) -> bool:
        """Whether ``value`` is always a new object that holds no buffer: an operator's result (the
        summary's ``["f"]``), a copy (``b.clone()``, ``torch.roll(b, 1)``, ``torch.cat(...)``) or a
        factory's tensor; not ``b.detach()``, ``b.reshape(...)``, ``b.to(...)`` (they may share ``b``),
        nor a method of ours of a copy's name that hands out a buffer (``ring.roll(4)``)."""
        if value == ["f"]:
            return True
        if value[0] != "c":
            return False
        func = self.project.function(fid)["calls"][value[1]][C_FUNC]
        if func[0] == "n":
            symbol = self.project.resolve(fid, func[1])
            if symbol is not None and symbol.kind == EXTERNAL and symbol.target in names.FRESH_TENSOR_FUNCTIONS:
                return True
            if symbol is None or symbol.kind in (FUNC, CLASS, EXTERNAL):
                return False  # a function of the project, or another library's: not known to copy
        receiver, method = method_call(func)
        # a method of ours of that name (`ring.roll()`) counts only where none of them hands out a buffer
        return receiver is not None and method in names.FRESH_TENSOR_METHODS and not any(
            self.returned(target) for target in self.project.methods_named(method))

    def _is_kernel(self, fid: str) -> bool:
        return any(names.is_kernel_decorator(target) for target in self._decorators(fid))

    def mutations(self) -> dict[BufferKey, list[Mutation]]:
        """Every in-place update of a buffer that has a lazy allocation, by buffer."""
        wanted_names = {a.key.name.rsplit(".", 1)[-1] for a in self.allocations}
        dict_caches = {a.key for a in self.allocations if a.dict_cache}
        out: dict[BufferKey, list[Mutation]] = {}
        param_writers: dict[str, list[tuple[str, Mutation]]] = {}
        for fid in self.project.functions:
            if self._is_kernel(fid):
                continue
            fn = self.project.function(fid)
            params = set(fn["params"])
            for receiver, mutation, is_store in self._sites(fid):
                base = receiver
                depth = 0
                through_buffers = False
                while base[0] == "s" or (base[0] == "c" and depth < 4):
                    if base[0] == "c":
                        call = fn["calls"][base[1]]
                        viewed, method = method_call(call[C_FUNC])
                        if viewed is not None and method in _MODULE_BUFFER_VIEWS:
                            base, through_buffers = viewed, True
                        elif call[C_FUNC][0] == "n" and call[C_FUNC][1] in _SAME_ITEMS and call[C_ARGS]:
                            base = call[C_ARGS][0]
                        elif viewed is None or method not in names.VIEW_METHODS:
                            break
                        else:
                            base = viewed
                    else:
                        base = base[1]
                    depth += 1
                text = base[1] if base[0] == "n" else (base[2] if base[0] == "a" else "")
                leaf = text.rsplit(".", 1)[-1]
                head = text.split(".", 1)[0]
                replaced = self._replaced_before(fid, fn, text, mutation) if base[0] == "n" else None
                if head in params and head not in ("self", "cls") and replaced is None:
                    # `out.fill_()`, `ws.idx[:n] = x`, `dict(model.named_buffers())[k][:] = x`
                    param_writers.setdefault(fid, []).append(
                        (head, mutation._replace(of_module_buffers=True) if through_buffers else mutation))
                # the receiver must mention a buffer's name, or be a local/call that may hold one
                if base[0] == "n" and "." in text and head in ("self", "cls") and \
                        wanted_names.isdisjoint(text.split(".")[1:]):
                    continue
                if replaced is not None:  # `out = out.clone()` or `out = out + x`, then `out.fill_()`
                    keys = frozenset().union(*(self.keys_of(fid, fact[A_VALUE]) for fact in fn["assigns"]
                                               if fact[A_TARGET] == ["n", text] and fact[A_OP] is None
                                               and (fact[A_LINE], fact[A_COL]) > replaced))
                else:
                    keys = self.keys_of(fid, receiver)
                # a field of a kept object (`ws.count += 1`, `self._ws.table[k] = v`) may be an int or a dict: only
                # a torch method (`ws.topk_idx[n:].fill_(-1)`) or `out=` says that it is a tensor
                field_write = is_store or mutation.how.startswith("augmented")
                for key in keys:
                    if field_write and "." in text and key.name.rsplit(".", 1)[-1] != leaf:
                        continue
                    if is_store and key in dict_caches and receiver[0] == "s" and self._is_container(fid, receiver[1]):
                        continue  # `self._cache[k] = buf` inserts into the cache, it writes no tensor
                    out.setdefault(key, []).append(mutation)
        self._mutations_through_params(out, self._writers_up_the_calls(param_writers))
        return out

    def _writers_up_the_calls(self, writers: dict[str, list[tuple[str, Mutation]]]
                              ) -> dict[str, list[tuple[str, Mutation]]]:
        """Each function's parameters that it, or a function it hands them to, updates in place
        (``def stage(t, ws): fused(ws.topk_idx)`` and ``def fused(out): out[n:].fill_(-1)``), joined over the
        call graph from the updating functions up to their callers, once per (function, parameter, update)."""
        callers = self.graph.callers()
        seen = {(fid, param, m) for fid, found in writers.items() for param, m in found}
        queue = list(writers)
        while queue:
            callee = queue.pop()
            # a call of a base class's method may run this override (`kernel.stage_inputs(...)`)
            edges = [e for fid in (callee, *self._overridden(callee)) for e in callers.get(fid, ())]
            for edge in edges:
                if edge.call < 0 or edge.how == "argument" or self._is_kernel(edge.caller):
                    continue
                fn = self.project.function(edge.caller)
                params = set(fn["params"]) - {"self", "cls"}
                call = fn["calls"][edge.call]
                for param, mutation in list(writers[callee]):
                    arg = self.regions.argument_for(edge.callee, param, call) if param in \
                        self.project.function(edge.callee)["params"] else self.regions.argument_for(callee, param, call)
                    head = _base_name(fn, arg).split(".", 1)[0] if arg is not None else ""
                    if head in params and (edge.caller, head, mutation) not in seen:
                        seen.add((edge.caller, head, mutation))
                        if edge.caller not in writers:
                            writers[edge.caller] = []
                        writers[edge.caller].append((head, mutation))
                        queue.append(edge.caller)
        return writers

    def _overridden(self, fid: str) -> list[str]:
        """The methods of base classes that method ``fid`` overrides."""
        cls = self.project.class_of(fid) if self.project.function(fid)["cls"] is not None else None
        if cls is None:
            return []
        name = self.project.function(fid)["name"]
        return [m for base in self.project.mro(cls)[1:] if (m := self.project.method(base, name)) is not None
                and self.project.class_of(m) == base]

    def _mutations_through_params(self, out: dict[BufferKey, list[Mutation]],
                                  writers: dict[str, list[tuple[str, Mutation]]]) -> None:
        """``def scatter(out): out.copy_(x)`` called with a buffer (or with an object holding one): an update
        of that buffer, in the grad mode of the call that hands it over."""
        if not writers:
            return
        leaves = {self.project.function(fid)["name"] for fid in writers}
        for fid, (_summary, fn) in self.project.functions.items():
            for index, call in enumerate(fn["calls"]):
                func = call[C_FUNC]
                if func[0] != "n" or callee_leaf(func) not in leaves:
                    continue
                for target in {t for base in self.graph.call_targets(fid, index)
                               for t in (base, *self.provenance.overrides(base))}:
                    for param, mutation in writers.get(target, []):
                        arg = self.regions.argument_for(target, param, call)
                        if arg is None:
                            continue
                        keys = self._registered_keys(fid, arg) if mutation.of_module_buffers else self.keys_of(fid, arg)
                        for key in keys:
                            how = mutation.how if mutation.entry_fid else \
                                f"{mutation.how} on parameter `{param}` of {self.project.label(target)}"
                            out.setdefault(key, []).append(mutation._replace(
                                how=f"{how}, passed at {self.project.where(fid, call[C_LINE])}",
                                entry_fid=fid, entry_with=call[C_WITH], entry_line=call[C_LINE]))

    def matches(self, alloc_key: BufferKey, key: BufferKey) -> bool:
        if alloc_key == key:
            return True
        if alloc_key.kind == key.kind == "attr" and alloc_key.name == key.name \
                and alloc_key.owner in self.project.classes and key.owner in self.project.classes:
            return alloc_key.owner in self.project.mro(key.owner) or key.owner in self.project.mro(alloc_key.owner)
        return False


def _base_name(fn: dict, expr: list) -> str:
    """The dotted name an argument is a view, slice or field of (``ws.topk_idx[:n].view(-1)``), or ""."""
    for _ in range(6):
        if expr[0] == "s":
            expr = expr[1]
        elif expr[0] == "c":
            receiver, method = method_call(fn["calls"][expr[1]][C_FUNC])
            if receiver is None or method not in names.VIEW_METHODS:
                return ""
            expr = receiver
        else:
            break
    return expr[1] if expr[0] == "n" else ""


def _dedented_between(fn: dict, first: int, last: int, col: int) -> bool:
    """Whether a call or assignment on a line between ``first`` and ``last`` starts left of ``col``."""
    return any(first < call[C_LINE] < last and call[C_COL] < col for call in fn["calls"]) or any(
        first < fact[A_LINE] < last and fact[A_COL] < col for fact in fn["assigns"])


_OPERATORS = {"Add": "+=", "Sub": "-=", "Mult": "*=", "Div": "/=", "FloorDiv": "//=", "Mod": "%=", "Pow": "**=",
              "BitAnd": "&=", "BitOr": "|=", "BitXor": "^=", "LShift": "<<=", "RShift": ">>=", "MatMult": "@="}
