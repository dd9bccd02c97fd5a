"""Methods that run once per object: every project call of the method runs on an object its caller has just
built.

``_build()`` does ``method = make_method(name)``, then ``method.load_scales(model)``, and returns it. When every
call of ``load_scales`` is of that kind, each object runs it once: a buffer it allocates lazily and updates in
that run is never written by a later run, under another grad mode, of the same object.

A call counts when it is spelt ``obj.method(...)`` on a plain local of the caller (not ``self``, a parameter or
a global), not in a lambda or a comprehension, and is the caller's only call of that method on that local; and
every binding of the local
- is a new object (below);
- comes before the call, in its if-branch or one around it;
- sits in the same loop and try bodies as the call (a loop around the call alone would run the method again on
  one object; a try around the binding alone may skip it).

A new object is made by:
- ``Cls(...)`` of a project class whose project bases and itself have no ``__new__``, metaclass or decorator
  (``@dataclass`` aside) that may give back one that exists;
- ``REGISTRY[key](...)``, ``REGISTRY.get(key)(...)``, or a local bound to such an item, where the project binds
  the registry only to displays of such classes (``{"fp8": FP8Method}``) and stores nothing into it;
- a call of an undecorated project function whose every return is a new object.

The calls that may run the method are the call graph's, those of every method it overrides (a call resolved to
the base runs the override), and every call spelt ``x.method(...)`` that the graph resolves to nothing. A
method with no call, one that may run unnamed (``unnamed_calls``), a constructor, a decorated method and a
generator do not run once per object.
"""
from __future__ import annotations

from typing import Optional

from .callgraph import CallGraph
from .project import Project
from .provenance import CONSTRUCTORS
from .summary_records import MODULE_SCOPE, enclosing_guards, method_call
from .symbols import CLASS, FUNC, GLOBAL, LOCAL, fid_of
from .unnamed_calls import UnnamedCalls

# what a class's metaclass or decorator may be without making `Cls()` give back an object that exists
_PLAIN_MAKERS = frozenset({"dataclass", "ABCMeta", "total_ordering", "final", "unique"})
# methods that store into a container
_STORES = frozenset({"update", "setdefault", "__setitem__"})
_MAX_DEPTH = 4


class OncePerObject:
    def __init__(self, project: Project, graph: CallGraph) -> None:
        self.project = project
        self.graph = graph
        self.unnamed = UnnamedCalls(project)
        self._once: dict[str, bool] = {}
        self._returns_new: dict[str, bool] = {}
        self._stored: Optional[set[tuple[str, str]]] = None

    def runs_once(self, fid: str) -> bool:
        """Whether every project call of method ``fid`` runs it on an object its caller has just built."""
        found = self._once.get(fid)
        if found is None:
            found = self._once[fid] = self._runs_once(fid)
        return found

    def _runs_once(self, fid: str) -> bool:
        project = self.project
        fn = project.function(fid)
        if fn["cls"] is None or fn["name"] in CONSTRUCTORS or fn["dec"] or any(r.is_yield for r in fn["rets"]):
            return False
        family = {fid, *project.overridden(fid)}
        calls: set[tuple[str, int]] = set()
        for target in family:
            for edge in self.graph.callers().get(target, ()):
                if edge.call < 0 or edge.how in ("argument", "nested"):
                    return False  # taken as a value: it may run anywhere
                calls.add((edge.caller, edge.call))
        for caller, index in project.calls_named(fn["name"]):
            if (caller, index) in calls or "." not in project.function(caller)["calls"][index].func[1]:
                continue
            targets = self.graph.call_targets(caller, index, loose=True)
            if not targets or family.intersection(targets):
                calls.add((caller, index))  # `x.load(...)` on a receiver the graph does not know
        for caller, index in project.calls_named(fn["name"], on_values=True):
            targets = self.graph.call_targets(caller, index, loose=True)
            if not targets or family.intersection(targets):
                return False  # `make().load(...)`: on an object no local holds
        return bool(calls) and all(self._on_new_object(caller, index) for caller, index in calls) \
            and not self.unnamed.may_run_unnamed(fid)

    def _on_new_object(self, fid: str, index: int) -> bool:
        fn = self.project.function(fid)
        if index in fn["deferred"]:
            return False
        call = fn["calls"][index]
        receiver, _method = method_call(call.func)
        if receiver is None or receiver[0] != "n" or "." in receiver[1]:
            return False
        name = receiver[1]
        if name in ("self", "cls") or name in fn["params"] or name in fn["globals"] or name in fn["locals"]:
            return False
        if sum(1 for other in fn["calls"] if other.func == call.func) != 1:
            return False
        bindings = [fact for fact in fn["assigns"] if fact.target == ["n", name]]
        if not bindings:
            return False
        around = {-1, *enclosing_guards(fn, call.guard)}
        blocks_of_call = {block for block in map(tuple, fn["blocks"]) if block[0] <= call.line <= block[1]}
        for fact in bindings:
            blocks = {block for block in map(tuple, fn["blocks"]) if block[0] <= fact.line <= block[1]}
            if fact.op is not None or fact.line >= call.line or fact.guard not in around \
                    or blocks != blocks_of_call or not self._new_object(fid, fact.value, 0):
                return False
        return True

    def _new_object(self, fid: str, value: list, depth: int) -> bool:
        """Whether ``value`` in ``fid`` is an object made there (see the module's docstring)."""
        if depth > _MAX_DEPTH or value[0] != "c":
            return False
        project = self.project
        func = project.function(fid)["calls"][value[1]].func
        if func[0] != "n":
            return self._class_reference(fid, func)  # `REGISTRY[key](...)`, `REGISTRY.get(key)(...)`
        symbol = project.resolve(fid, func[1])
        if symbol is None:
            return False
        if symbol.kind == FUNC:
            return self._function_returns_new(symbol.target, depth + 1)
        if symbol.kind == LOCAL and "." not in symbol.name:  # `method_cls = REGISTRY[key]; method_cls(...)`
            values = project.local_values(symbol.owner).get(symbol.name)
            return bool(values) and all(self._class_reference(symbol.owner, v) for v in values)
        return self._class_reference(fid, func)

    def _class_reference(self, fid: str, value: list) -> bool:
        """Whether ``value`` in ``fid`` is a class that builds anew: named, or an item of a registry of such."""
        if value[0] == "s":
            return self._registry(fid, value[1])
        if value[0] == "c":
            func = self.project.function(fid)["calls"][value[1]].func
            return func[0] == "n" and func[1].endswith(".get") and self._registry(fid, ["n", func[1][:-4]])
        if value[0] == "n":
            symbol = self.project.resolve(fid, value[1])
            return symbol is not None and symbol.kind == CLASS and self._builds_anew(symbol.target)
        return False

    def _function_returns_new(self, fid: str, depth: int) -> bool:
        found = self._returns_new.get(fid)
        if found is None:
            self._returns_new[fid] = False  # guards recursion
            fn = self.project.function(fid)
            rets = fn["rets"]
            found = not fn["dec"] and bool(rets) and not any(r.is_yield for r in rets) \
                and all(self._new_object(fid, r.value, depth) for r in rets)
            self._returns_new[fid] = found
        return found

    def _builds_anew(self, cid: str) -> bool:
        """Whether ``Cls(...)`` always makes a new object: no ``__new__``, metaclass or decorator that may not."""
        project = self.project
        for klass in project.mro(cid):
            cls = project.classes[klass][1]
            if "__new__" in cls["methods"] or any(maker.rpartition(".")[2] not in _PLAIN_MAKERS
                                                   for maker in cls.get("makers", ())):
                return False
        return True

    def _registry(self, fid: str, expr: list) -> bool:
        """Whether ``expr`` in ``fid`` is a module's registry of classes that build anew, never stored into."""
        if expr[0] != "n":
            return False
        symbol = self.project.resolve(fid, expr[1])
        if symbol is None or symbol.kind != GLOBAL:
            return False
        module, name = symbol.target, symbol.name
        values = self.project.local_values(fid_of(module, MODULE_SCOPE)).get(name)
        if not values or (module, name) in self._stores_into():
            return False
        scope = fid_of(module, MODULE_SCOPE)
        return all(value[0] == "r" and all(self._class_reference(scope, ["n", item]) for item in value[1])
                   for value in values)

    def _stores_into(self) -> set[tuple[str, str]]:
        """(module, name) of each module global the project stores into (``R[k] = v``, ``R.update(...)``) or
        declares ``global`` in a function: one pass over every store, the first time."""
        if self._stored is None:
            project = self.project
            stored: set[tuple[str, str]] = set()
            for fid, (summary, fn) in project.functions.items():
                for name in fn["globals"]:
                    stored.add((summary["module"], name))
                containers = []
                for fact in fn["assigns"]:
                    target = fact.target
                    if target[0] == "s":
                        while target[0] == "s":
                            target = target[1]
                        containers.append(target)
                for call in fn["calls"]:
                    receiver, method = method_call(call.func)
                    if receiver is not None and method in _STORES:
                        containers.append(receiver)
                for container in containers:
                    if container[0] == "n":
                        symbol = project.resolve(fid, container[1])
                        if symbol is not None and symbol.kind == GLOBAL:
                            stored.add((symbol.target, symbol.name))
            self._stored = stored
        return self._stored
