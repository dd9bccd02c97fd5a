"""How long the instances of a project class live, from where the project puts each one it builds.

Each construction site's value is followed (into locals, and out of returns into every call that may run the
function) to where it goes:

- **one call** (``ONE_CALL``): used and dropped in the statement, handed to a field of an object the call
  built or of one its callers hand in from their own locals and parameters (``batch.spec_info =
  DraftInput(...)``), or to the constructor of such a holder;
- **kept** (``KEPT``): built once into a place that outlives calls: a module global or a module-level binding,
  a class attribute, ``self`` in a constructor, a field or container that a test finds empty first
  (``if self._ws is None: self._ws = Workspace()``), what a ``functools.cache`` function returns, a local of
  a function no code calls (``main()``: it lives for the whole run);
- **escapes** (``ESCAPES``): returned to code outside the project (a library's factory no code here calls);
- **not known** (``UNKNOWN``) otherwise: held by a local alone (its function may run once for the whole run,
  or each step), ``self.x = ...`` in another method (set up once, or every step), a container filled each
  call, a function that takes it and may keep it, a display, a cycle, depth. What a method called on it
  returns is followed as if it were the object (``Holder().configure(4)`` may return ``self``).

``per_call``: every site is one call, so a lazy buffer of the holder is made again with the next holder.
``maybe_kept``: some site keeps one or lets it escape. ``buffer_allocations`` takes a field that a record (a
``@dataclass``) declares as made with each record where some record goes to a place of one call and none is
kept or escapes. A class no site of the project builds is not known: users may build and keep it.
"""
from __future__ import annotations

from typing import Callable, Optional

from . import names
from .callgraph import CallGraph
from .project import Project
from .provenance import CONSTRUCTORS
from .regions import Regions
from .summary_records import MODULE_SCOPE, method_call, missing_first, objects_in
from .symbols import CLASS, EXTERNAL, FUNC

ONE_CALL, KEPT, ESCAPES, UNKNOWN = "one call", "kept", "escapes", "unknown"
# builtins a value may be given to without being kept (they add nothing to where it goes)
_PASSIVE_BUILTINS = frozenset(("len", "isinstance", "id", "type", "repr", "str", "bool", "print", "hasattr",
                               "callable", "hash"))
_MAX_DEPTH = 4


def _joined(fates: list[str]) -> str:
    for fate in (KEPT, ESCAPES, UNKNOWN):
        if fate in fates:
            return fate
    return ONE_CALL


class HolderLifetimes:
    def __init__(self, project: Project, graph: CallGraph, regions: Regions,
                 cached_getter: Callable[[str], bool]) -> None:
        """``cached_getter``: whether a function is a ``functools.cache`` getter (the buffers' own test)."""
        self.project = project
        self.graph = graph
        self.regions = regions
        self.cached_getter = cached_getter
        # per class, as found from the class itself (depth 0): what a deeper, cut-short search finds is not kept
        self._fates: dict[str, str] = {}
        self._site_fates: dict[str, list[str]] = {}
        self._in_progress: set[str] = set()
        self._cls_sites: Optional[dict[str, list[tuple[str, int]]]] = None
        self._callers: dict[str, list[tuple[str, int, str]]] = {}
        self._use_index: dict[str, dict[tuple, list[tuple[str, object, int]]]] = {}

    def per_call(self, cid: str) -> bool:
        """Whether every instance of class ``cid`` (or of a subclass) the project builds lives for one call."""
        return self._fate_of_class(cid, 0) == ONE_CALL

    def maybe_kept(self, cid: str) -> bool:
        """Whether the project keeps some instance of class ``cid`` (or of a subclass) beyond a call, or hands
        one to code outside it (a library's factory with no caller here), which may."""
        return self._fate_of_class(cid, 0) in (KEPT, ESCAPES)

    def some_made_per_call(self, cid: str) -> bool:
        """Whether some instance of class ``cid`` (or of a subclass) goes to a place of one call."""
        self._fate_of_class(cid, 0)
        return ONE_CALL in self._site_fates.get(cid, ())

    def _fate_of_class(self, cid: str, depth: int) -> str:
        known = self._fates.get(cid)
        if known is not None:
            return known
        if depth > _MAX_DEPTH or cid in self._in_progress:
            return UNKNOWN  # a cycle adds nothing known
        self._in_progress.add(cid)
        try:
            sites = [site for klass in (cid, *self.project.subclasses(cid)) for site in self._construction_sites(klass)]
            # where each instance goes (a site with none: used and dropped in its statement)
            places = [fate for fid, index in sites
                      for fate in self._destinations(fid, ["c", index], depth, frozenset()) or [ONE_CALL]]
        finally:
            self._in_progress.discard(cid)
        fate = _joined(places) if sites else UNKNOWN
        if depth == 0:
            self._fates[cid] = fate
            self._site_fates[cid] = places
        return fate

    def _construction_sites(self, cid: str) -> list[tuple[str, int]]:
        """``Cls(...)``, ``mod.Cls(...)``, and ``cls(...)`` in a classmethod of the class itself."""
        project = self.project
        out = []
        for fid, index in self.project.calls_named(project.classes[cid][1]["name"]):
            symbol = project.resolve(fid, project.function(fid)["calls"][index].func[1])
            if symbol is not None and symbol.kind == CLASS and symbol.target == cid:
                out.append((fid, index))
        if self._cls_sites is None:
            self._cls_sites = {}
            for fid, index in self.project.calls_named("cls"):
                if project.function(fid)["params"][:1] == ["cls"] and project.function(fid)["calls"][index].func \
                        == ["n", "cls"]:
                    owner = project.class_of(fid)
                    if owner is not None:
                        self._cls_sites.setdefault(owner, []).append((fid, index))
        return out + self._cls_sites.get(cid, [])

    def _callers_of(self, fid: str) -> list[tuple[str, int, str]]:
        """(caller, call, how) for each call that may run ``fid``: the call graph's; for a method it knows no
        call of, the calls spelt ``x.name(...)`` that resolve to nothing (``self.algo.build()`` on a field of a
        mixin)."""
        known = self._callers.get(fid)
        if known is not None:
            return known
        out = [(e.caller, e.call, e.how) for e in self.graph.callers().get(fid, ())]
        self._callers[fid] = out
        fn = self.project.function(fid)
        if fn["cls"] and not out:
            for caller, index in self.project.calls_named(fn["name"]):
                func = self.project.function(caller)["calls"][index].func
                if "." in func[1] and not self.graph.call_targets(caller, index, loose=True):
                    out.append((caller, index, "by-name"))
        return out

    def _fate(self, fid: str, expr: list, depth: int, seen: frozenset) -> str:
        """Where the object ``expr`` evaluates to in ``fid`` goes (see the module's docstring)."""
        fates = self._destinations(fid, expr, depth, seen)
        if expr[0] == "n" and not fates:
            return UNKNOWN  # held by the local alone: for as long as the call runs, once or each step
        return _joined(fates)  # none: a value used and dropped in its statement

    def _destinations(self, fid: str, expr: list, depth: int, seen: frozenset) -> list[str]:
        """The fate of each place the object ``expr`` evaluates to in ``fid`` goes to."""
        if (fid, repr(expr)) in seen or depth > _MAX_DEPTH:
            return [UNKNOWN]
        seen = seen | {(fid, repr(expr))}
        project = self.project
        fn = project.function(fid)
        if fn["qual"] == MODULE_SCOPE:
            return [KEPT]
        if expr[0] == "n" and not self._callers_of(fid):
            return [KEPT]  # a local of a function no code calls (`main()`, a test) lives for the whole run
        fates: list[str] = []
        key = (expr[0], expr[1])
        uses = self._uses(fid)
        for how, record, index in uses.get(key, ()):
            if how == "held":
                fates.append(UNKNOWN)  # in a display, a lambda, one side of `or`: where it goes is not followed
            elif how == "stored":
                fates.append(self._store_fate(fid, fn, record, depth, seen))
                if fates[-1] == KEPT:
                    return fates
            elif how == "returned":
                fates.extend(self._returned_fates(fid, fn, depth, seen))
            elif how == "given":
                given = [arg for arg in (*record.args, *record.kwargs.values()) if key in objects_in(arg)]
                fate = self._given_fate(fid, record, given, expr, depth)
                if fate is not None:
                    fates.append(fate)
            else:  # "method": what a method called on it returns may be it (`Holder().configure(4)`: `self`)
                fates.extend(self._destinations(fid, ["c", index], depth, seen))
        return fates

    def _returned_fates(self, fid: str, fn: dict, depth: int, seen: frozenset) -> list[str]:
        """Where what ``fid`` returns goes: into every call that may run it (by name too)."""
        edges = self._callers_of(fid)
        if fn["dec"] and self.cached_getter(fid):
            return [KEPT]  # `functools.cache` keeps what it returns
        if not edges:
            return [ESCAPES]  # returned to code outside the project
        if any(call < 0 or how in ("argument", "nested") for _c, call, how in edges):
            return [UNKNOWN]  # one that takes the function as a value may call it anywhere
        return [self._fate(caller, ["c", call], depth + 1, seen) for caller, call, _how in edges]

    def _uses(self, fid: str) -> dict[tuple, list[tuple[str, object, int]]]:
        """Where each call's value and each local name of ``fid`` is used, by ``(tag, index or name)``: stored
        (an assignment of it), returned, given to a call, held inside another value, or called a method on."""
        found = self._use_index.get(fid)
        if found is not None:
            return found
        found = {}
        fn = self.project.function(fid)

        def note(value: list, how: str, record) -> None:
            for key in objects_in(value):  # the value itself, or what it holds
                found.setdefault(key, []).append((how if value[0] in "cn" else "held", record, -1))

        for fact in fn["assigns"]:
            note(fact.value, "stored", fact)
        for ret in fn["rets"]:
            note(ret.value, "held" if ret.is_yield else "returned", ret)
        for index, call in enumerate(fn["calls"]):
            for key in {key for arg in (*call.args, *call.kwargs.values()) for key in objects_in(arg)}:
                found.setdefault(key, []).append(("given", call, index))
            func = call.func
            if func[0] == "a" and func[1][0] in "cn":
                found.setdefault((func[1][0], func[1][1]), []).append(("method", call, index))
            elif func[0] == "n" and "." in func[1]:
                head = func[1].rpartition(".")[0]
                if "." not in head:
                    found.setdefault(("n", head), []).append(("method", call, index))
        self._use_index[fid] = found
        return found

    def _store_fate(self, fid: str, fn: dict, fact, depth: int, seen: frozenset) -> str:
        target = fact.target
        if fact.op is not None:
            return UNKNOWN
        if target[0] == "s":  # into a container of `self` or of the module, once (a test finds it missing first)
            base = target[1]
            while base[0] == "s":
                base = base[1]
            text = base[1] if base[0] == "n" else ""
            head = text.partition(".")[0]
            if head in ("self", "cls") or head in fn["globals"] or self._module_name(fid, head):
                return KEPT if missing_first(fn, fact.guard, {text}) is not None else UNKNOWN
            return UNKNOWN
        if target[0] != "n":
            return UNKNOWN  # an unpacking
        name = target[1]
        head, dot, _rest = name.partition(".")
        if name in fn["globals"] or head == "cls":
            return KEPT
        if head == "self":
            if fn["name"] in CONSTRUCTORS or missing_first(fn, fact.guard, {name}) is not None:
                return KEPT  # built with its owner, or made once for it
            return UNKNOWN  # set by another method: once at set-up, or anew each step
        if not dot:
            return self._fate(fid, ["n", name], depth, seen)
        if head in fn["params"]:
            return ONE_CALL if self.handed_from_calls(fid, head) else UNKNOWN
        if self._built_here(fid, head):
            return ONE_CALL  # a field of an object this call built
        return KEPT if self._module_name(fid, head) else UNKNOWN  # a class's or a module object's field

    def handed_from_calls(self, fid: str, param: str) -> bool:
        """Whether every call of ``fid`` passes for ``param`` a name of its own call (a local or a parameter of
        the caller) or a constant, never ``self``, a field, a global or something not known; and some call
        passes a name."""
        named = False
        for caller, index, how in self._callers_of(fid):
            if index < 0 or how in ("argument", "nested"):
                return False
            call = self.project.function(caller)["calls"][index]
            arg = self.regions.argument_for(fid, param, call)
            if arg is not None and arg[0] == "k":
                continue  # `forward(batch=None)`: no object to keep
            caller_fn = self.project.function(caller)
            if arg is None or arg[0] != "n" or "." in arg[1] or arg[1] in ("self", "cls") \
                    or arg[1] in caller_fn["globals"] or not (arg[1] in caller_fn["params"]
                                                              or arg[1] in self.project.local_values(caller)):
                return False
            named = True
        return named

    def _built_here(self, fid: str, name: str) -> bool:
        """Whether the local ``name`` is bound in ``fid`` only to objects the call builds (``Cls(...)``)."""
        values = self.project.local_values(fid).get(name, [])
        fn = self.project.function(fid)
        if not values or name in fn["params"]:
            return False
        for value in values:
            if value[0] != "c" or fn["calls"][value[1]].func[0] != "n":
                return False
            symbol = self.project.resolve(fid, fn["calls"][value[1]].func[1])
            if symbol is None or symbol.kind != CLASS:
                return False
        return True

    def _given_fate(self, fid: str, call, given: list, expr: list, depth: int) -> Optional[str]:
        """Where an object given to a call goes; None for a builtin that only looks at it."""
        if any(arg != expr for arg in given) or call.func[0] != "n":
            return UNKNOWN
        receiver, method = method_call(call.func)
        if receiver is not None and method in names.CONTAINER_INSERTS and receiver[0] == "n":
            head = receiver[1].partition(".")[0]
            fn = self.project.function(fid)
            if (head in ("self", "cls") or head in fn["globals"] or self._module_name(fid, head)) \
                    and missing_first(fn, call.guard, {receiver[1]}) is not None:
                return KEPT  # `if not self._pool: self._pool.append(ws)`: made once
        symbol = self.project.resolve(fid, call.func[1])
        if symbol is not None and symbol.kind == EXTERNAL and symbol.target in _PASSIVE_BUILTINS:
            return None
        if symbol is not None and symbol.kind == CLASS and self._fate_of_class(symbol.target, depth + 1) == ONE_CALL:
            return ONE_CALL  # given to the constructor of a holder made for one call
        return UNKNOWN

    def _module_name(self, fid: str, name: str) -> bool:
        """Whether ``name`` in ``fid`` is a module-level name of the project (a global, a class, a module)."""
        if not name or name in self.project.function(fid)["params"] or name in self.project.local_values(fid):
            return False
        symbol = self.project.resolve(fid, name)
        return symbol is not None and symbol.kind != FUNC
