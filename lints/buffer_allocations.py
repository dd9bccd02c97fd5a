"""Where a new tensor is kept: a lazily allocated buffer (stored under a check of the place it goes to:
``if self._buf is None``, a size test, ``hasattr``, a dict-cache miss, into a field, a module global, a dict
or list, or returned by a ``functools.cache`` getter), or an eager one (built in a constructor, registered,
or a kept tensor rebound to a copy of itself). The grad mode of the call that allocates it decides for good
whether it is an inference tensor. ``buffer_flow`` follows the buffers from here, ``buffers`` finds where
they are updated in place.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from . import names
from .callgraph import CallGraph
from .holder_lifetimes import HolderLifetimes
from .project import Project
from .provenance import CONSTRUCTORS, COPYING_METHODS, Provenance
from .regions import Regions
from .summary_records import MODULE_SCOPE, callee_leaf, method_call, missing_first
from .symbols import CLASS, EXTERNAL, FIELD, GLOBAL


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
    # a lazy field made again with each holder (one made per call, or a per-call record), or of an object the
    # caller hands in: GM201 says nothing of it (GM202 still pairs it where grad modes differ)
    per_holder: bool = False


class BufferAllocations:
    """The kept allocations of a project (``allocations``), and what they need to know of functions."""

    def __init__(self, project: Project, graph: CallGraph, regions: Regions, holders: bool = True) -> None:
        """``holders``: tag the lazy fields made with each holder (``Allocation.per_holder``); only the rule
        that reads the tag needs them, and finding holders' lifetimes costs a pass over every call."""
        self.holders = holders
        self.project = project
        self.graph = graph
        self.regions = regions
        self._decorator_targets: dict[str, list[str]] = {}
        self._registered_names: dict[str, set[str]] = {}  # module class -> its `register_buffer` names
        # lazy buffers are allocated from nothing; a kept tensor rebound to a copy of itself is one too (eager)
        self.provenance = Provenance(project, graph, regions, copies=False)
        self._copies = Provenance(project, graph, regions, copies=True)
        self.lifetimes = HolderLifetimes(project, graph, regions, self._cached_getter)
        self.allocations = self._find_allocations()

    # allocations -------------------------------------------------------------------
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
            if self._closure_local(fid, target[1]):
                return None  # `nonlocal dec` in a closure: a local of the enclosing call, gone with it
            return BufferKey("global", symbol.target, symbol.name), dict_store
        return None

    def _closure_local(self, fid: str, name: str) -> bool:
        """Whether ``name``, which ``fid`` declares ``global`` or ``nonlocal`` (the summary keeps both alike), is
        bound by a function ``fid`` is nested in and not at module scope: the closure's ``nonlocal``, a local of
        one call of the enclosing function, not a place kept across calls."""
        project = self.project
        outers = list(project.scope_chain(fid))[1:]
        if not outers or project.function(outers[-1])["qual"] != MODULE_SCOPE:
            return False
        module = outers.pop()
        if name in project.local_values(module):
            return False  # the module binds it too: `global` may mean that one
        for outer in outers:
            fn = project.function(outer)
            if name in fn["globals"]:
                continue  # rebound there too: bound further out
            return name in fn["params"] or name in project.local_values(outer)
        return False

    def _find_allocations(self) -> list[Allocation]:
        """Every store of a new tensor (see ``provenance``) into a kept place: a field, a module global, an
        item of a dict or list kept in one, or the return of a cached getter. Lazy where a guard checks the
        place first (``if self._buf is None``); eager in a constructor or a plain store (``self.h = h.to(d)``)."""
        project = self.project
        found: list[Allocation] = []
        for fid, (summary, fn) in project.functions.items():
            if fn["dec"] and self._cached_getter(fid):  # most functions have no decorator: no call
                for ret in fn["rets"]:
                    if not ret.is_yield and self.provenance.fresh(fid, ret.value):
                        found.append(Allocation(BufferKey("getter", fid, fn["qual"]), fid, ret.line, ret.col,
                                                ret.with_index, -1, f"returned by cached getter `{fn['qual']}()`",
                                                False))
                        break
                continue
            local_allocs: dict[str, list] = {}
            siblings: list[tuple[list, str]] = []  # stores under a guard that checks another place
            lazy_guards: dict[int, str] = {}  # guard -> the place it checks, for the lazy stores under it
            # locals stored somewhere as they are (`self._c[k] = buf`): the only ones whose provenance matters
            stored_locals = {fact.value[1] for fact in fn["assigns"] if fact.op is None
                             and fact.value[0] == "n" and "." not in fact.value[1]
                             and (fact.target[0] == "s" or "." in fact.target[1])}
            for fact in fn["assigns"]:
                target = fact.target
                if fact.op is not None or target[0] not in "ns":
                    continue
                if target[0] == "n" and "." not in target[1] and target[1] not in fn["globals"] \
                        and fn["qual"] != MODULE_SCOPE:
                    if target[1] in stored_locals and self.provenance.fresh(fid, fact.value):
                        local_allocs.setdefault(target[1], []).append(fact)
                    continue
                value = fact.value
                if value[0] == "n" and "." not in value[1]:
                    continue  # a local: `_stored_locals` follows it to where it was allocated
                dict_store = target[0] == "s"
                named = target[1] if dict_store else target
                if named[0] != "n":
                    continue
                text = named[1]
                lazy = missing_first(fn, fact.guard, {text}) is not None
                copy = not lazy and not dict_store and self._copy_of_itself(fid, value, text)
                eager = not lazy and not dict_store and fn["name"] in CONSTRUCTORS
                if not (lazy or eager or copy):
                    if fact.guard >= 0 and not dict_store:
                        siblings.append((fact, text))
                    continue  # before resolving the target: most stores are none of these
                stored = self._store_key(fid, target)
                if stored is None:
                    continue
                key, dict_store = stored
                if not (self._copies.fresh(fid, value) if copy else self.provenance.fresh(fid, value)):
                    continue  # the costly question last
                if lazy:
                    if self._allocated_per_call(fid, fn, text):
                        continue
                    found.append(Allocation(key, fid, fact.line, fact.col, fact.with_index, fact.guard,
                                            f"allocated under a check of `{text}`", dict_store,
                                            per_holder=self._per_holder(fid, text, key)))
                    lazy_guards.setdefault(fact.guard, text)
                else:
                    # eager: built with the object, or rebound to a copy of itself (`self.k = self.k.to(dtype)`);
                    # not any store of a new tensor (a per-batch field set by each event loop), which would pair
                    # the allocations of one loop with the updates of another that never runs beside it
                    found.append(Allocation(key, fid, fact.line, fact.col, fact.with_index, fact.guard,
                                            self._eager_why(fid, fn, text), dict_store, lazy=False))
            # `if not hasattr(self, "_cu_q"): self._cu_q = ...; self._cu_k = ...`: built once, with the place checked
            for fact, text in siblings:
                checked = lazy_guards.get(fact.guard)
                if checked is None or checked == text:
                    continue
                stored = self._store_key(fid, fact.target)
                if stored is not None and self.provenance.fresh(fid, fact.value):
                    found.append(Allocation(stored[0], fid, fact.line, fact.col, fact.with_index, fact.guard,
                                            f"allocated with `{checked}`, under its check", False,
                                            per_holder=self._per_holder(fid, text, stored[0])))
            found.extend(self._appended(fid, fn))
            if local_allocs:
                found.extend(self._stored_locals(fid, fn, local_allocs))
        return found

    def _per_holder(self, fid: str, text: str, key: BufferKey) -> bool:
        """Whether a lazy store into ``text`` (``self._buf``, ``metadata.tile_buf``) makes a field again with
        each holder (``_made_with_holder``), or fills a field of an object every caller hands in from its own
        call (a batch, a per-step record: whether it outlives the call is the caller's, not known here)."""
        if key.kind != "attr" or not self.holders:
            return False
        head = text.partition(".")[0]
        if head == "self":
            return key.owner in self.project.classes and self._made_with_holder(key)
        return head != "cls" and head in self.project.function(fid)["params"] \
            and self.lifetimes.handed_from_calls(fid, head)

    def _made_with_holder(self, key: BufferKey) -> bool:
        """Whether a lazy field is made again with each holder: the holder lives for one call, or it is a field
        a record (a ``@dataclass``) declares, some record goes to a place of one call, and none is known to be
        kept or to leave the project."""
        owner = key.owner
        if self.lifetimes.per_call(owner):
            return True
        declared = any(key.name in self.project.classes[klass][1].get("record_fields", ())
                       for klass in self.project.mro(owner))
        return declared and not self.lifetimes.maybe_kept(owner) and self.lifetimes.some_made_per_call(owner)

    def _allocated_per_call(self, fid: str, fn: dict, text: str) -> bool:
        """Whether the object holding a lazy buffer was built earlier in this very function (``metadata =
        Metadata()``, then ``if metadata.seq_lens is None``): the check finds it missing on every call."""
        head, _, rest = text.partition(".")
        if not rest or head in ("self", "cls") or head in fn["params"]:
            return False
        values = self.project.local_values(fid).get(head, [])
        return bool(values) and all(v[0] == "c" and (symbol := self._callee(fid, v)) is not None
                                    and symbol.kind == CLASS for v in values)

    def _callee(self, fid: str, value: list):
        func = self.project.function(fid)["calls"][value[1]].func
        return self.project.resolve(fid, func[1]) if func[0] == "n" else None

    def _copy_of_itself(self, fid: str, value: list, text: str) -> bool:
        if value[0] != "c":
            return False
        receiver, method = method_call(self.project.function(fid)["calls"][value[1]].func)
        return receiver == ["n", text] and method in COPYING_METHODS

    def _eager_why(self, fid: str, fn: dict, text: str) -> str:
        if fn["name"] in CONSTRUCTORS and fn["cls"]:
            return f"`{text}` allocated when `{fn['cls']}` is built"
        return f"`{text}` bound to a new tensor"

    def _appended(self, fid: str, fn: dict) -> list[Allocation]:
        """``BUFFERS.append(torch.empty(...))``, ``self._pool.setdefault(k, torch.empty(...))`` into a kept
        list or dict (lazy under a check of that container)."""
        out = []
        calls = fn["calls"]
        for index in fn["notable"]:  # container inserts and `register_buffer` among them
            call = calls[index]
            leaf = callee_leaf(call.func)
            if leaf == names.REGISTER_BUFFER:
                out.extend(self._registered(fid, fn, call))
                continue
            if leaf not in names.CONTAINER_INSERTS:
                continue
            receiver, method = method_call(call.func)
            if receiver is None or method not in names.CONTAINER_INSERTS or receiver[0] != "n" or not call.args:
                continue
            value = call.args[-1]
            text = receiver[1]
            # a list grown on every call holds each call's tensors: not one kept buffer
            if missing_first(fn, call.guard, {text}) is None:
                continue
            stored = self._store_key(fid, receiver)
            if stored is None or not self.provenance.fresh(fid, value):
                continue
            key, _ = stored
            out.append(Allocation(key, fid, call.line, call.col, call.with_index, call.guard,
                                  f"allocated under a check of `{text}`", True,
                                  per_holder=self._per_holder(fid, text, key)))
        return out

    def _registered(self, fid: str, fn: dict, call: list) -> list[Allocation]:
        """``self.register_buffer("cos", torch.zeros(n))``: the module's field ``cos``, built with it."""
        args = call.args
        owner = self.project.class_of(fid)
        if (owner is None or call.func != ["n", "self.register_buffer"] or len(args) < 2 or args[0][0] != "k"
                or not isinstance(args[0][1], str) or not self.provenance.fresh(fid, args[1])):
            return []
        self._registered_names.setdefault(owner, set()).add(args[0][1])
        return [Allocation(BufferKey("attr", owner, args[0][1]), fid, call.line, call.col, call.with_index,
                           call.guard, f"registered buffer `{args[0][1]}` of `{fn['cls']}`", False, lazy=False)]

    def _stored_locals(self, fid: str, fn: dict, local_allocs: dict[str, list]) -> list[Allocation]:
        """``buf = torch.empty(...)`` then ``self._cache[k] = buf`` / ``self._buf = buf`` (lazy under a guard)."""
        out = []
        for fact in fn["assigns"]:
            value = fact.value
            if fact.op is not None or value[0] != "n" or value[1] not in local_allocs:
                continue
            stored = self._store_key(fid, fact.target)
            if stored is None:
                continue
            key, dict_store = stored
            target = fact.target[1] if dict_store else fact.target
            text = target[1]
            # a check of the local counts where the local was read from the store (`buf = self._c.get(k)`):
            # `if epoch is None: epoch = torch.zeros(1)` on a parameter is a default, not a lazy buffer
            checked = {text, value[1]} if self._read_from(fid, value[1], text) else {text}
            for alloc in local_allocs[value[1]]:
                if missing_first(fn, alloc.guard, checked) is not None:
                    out.append(Allocation(key, fid, alloc.line, alloc.col, alloc.with_index, alloc.guard,
                                          f"allocated under a check of `{text}`", dict_store,
                                          per_holder=self._per_holder(fid, text, key)))
                    break
            else:
                if fn["name"] in CONSTRUCTORS and not dict_store:
                    alloc = local_allocs[value[1]][0]
                    out.append(Allocation(key, fid, alloc.line, alloc.col, alloc.with_index, alloc.guard,
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
                receiver, _method = method_call(self.project.function(fid)["calls"][value[1]].func)
                if receiver is None:
                    break
                value = receiver
            if value[0] == "n" and (value[1] == stored or value[1].startswith(stored + ".")):
                return True
        return False

    def _decorators(self, fid: str) -> list[str]:
        """What each decorator of ``fid`` names outside the project (``@f`` and ``@f(...)`` alike); asked for
        every function by the allocations (cached getters), the flow (properties) and the updates (kernels)."""
        found = self._decorator_targets.get(fid)
        if found is not None:
            return found
        fn = self.project.function(fid)
        out = []
        for dec in fn["dec"]:
            expr = dec.expr
            if expr[0] == "c":
                expr = fn["calls"][expr[1]].func
            if expr[0] == "n":
                symbol = self.project.resolve(fid, expr[1])
                if symbol is not None and symbol.kind == EXTERNAL:
                    out.append(symbol.target)
        self._decorator_targets[fid] = out
        return out

    def _is_property(self, fid: str) -> bool:
        """A method read as an attribute (``@property``, ``@functools.cached_property``)."""
        return any(target in ("property", "functools.cached_property") for target in self._decorators(fid))

    def _cached_getter(self, fid: str) -> bool:
        return any(target in names.CACHE_DECORATORS for target in self._decorators(fid))
