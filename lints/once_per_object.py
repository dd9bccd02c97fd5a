"""Methods that run once per object: every project call of the method runs on an object its caller has just
built.

``_build()`` does ``method = make_method(name)``, then ``method.load_scales(model)``, and returns it. When every
call of ``load_scales`` is of that kind, each object runs it once: a buffer it allocates lazily and updates in
that run is never written by a later run, under another grad mode, of the same object (the rule also asks that
the field hold only tensors made for its object: ``field_made_here``).

A call counts when it is spelt ``obj.method(...)`` on a plain local of the caller (not ``self``, a parameter, a
global, or a name bound otherwise than by an assignment: a nested function's ``nonlocal``), not in a lambda, a
comprehension, and is the caller's only call of that method on that local; and every binding of
the local
- is a new object (below);
- comes before the call, in its if-branch or one around it;
- sits in the same loop bodies, while tests and try bodies as the call (a loop around the call alone would run
  the method again on one object; a try around the binding alone may skip it).

A new object is made by:
- ``Cls(...)`` of a project class whose project bases and itself have no ``__new__`` (a def or a binding in the
  body), metaclass, decorator (``@dataclass`` aside) or base that is no name (``with_metaclass(M, B)``), and whose
  name is not bound again (``Cls = functools.cache(Cls)``);
- ``REGISTRY[key](...)``, ``REGISTRY.get(key)(...)``, or a local bound to such an item, where the project binds
  the registry only to displays of such classes (``{"fp8": FP8Method}``) and never changes or hands it on (no
  store into it, no method but a read, no binding through its module, not passed on but to a builtin that reads);
- a call of an undecorated project function whose every return is a new object, and each override of it in a
  subclass too.

The calls that may run the method are the call graph's, those of every method it overrides (a call resolved to
the base runs the override), and every call spelt ``x.method(...)`` that the graph resolves to nothing. A
method with no call, one that may run unnamed (``unnamed_calls``), a constructor, a decorated method and a
generator do not run once per object.

Not seen, as type checkers do not see them: what code outside the project does (a library's base class that
hands back one instance); names computed at run time (``getattr(obj, name)`` on an object of a class not known,
``setattr`` with a computed name, ``__dict__``, ``vars()``, ``globals()``, ``sys.modules``); a registry inside a
display that also holds other values, in a lambda's default or in a starred argument (the summaries keep none of
those).
"""
from __future__ import annotations

from typing import Optional

from .callgraph import CallGraph
from .project import Project
from .provenance import CONSTRUCTORS, Provenance
from .regions import Regions
from . import names
from .summary_records import MODULE_SCOPE, callee_leaf, enclosing_guards, method_call, objects_in
from .symbols import CLASS, EXTERNAL, FUNC, GLOBAL, LOCAL, fid_of
from .unnamed_calls import UnnamedCalls

# what a class's metaclass or decorator may be without making `Cls()` give back an object that exists
_PLAIN_MAKERS = frozenset({"dataclass", "ABCMeta", "total_ordering", "final", "unique"})
# builtins that only read what they are given
_READING_BUILTINS = frozenset({"list", "tuple", "sorted", "len", "set", "frozenset", "str", "repr", "iter", "enumerate",
                               "print", "any", "all", "min", "max", "sum", "dict", "zip", "reversed", "format", "hash",
                               "id", "type", "isinstance", "bool"})
# methods of a container that only read it
_READS = frozenset({"get", "keys", "values", "items", "__getitem__", "__contains__", "copy", "index", "count"})
_MAX_DEPTH = 4


class OncePerObject:
    def __init__(self, project: Project, graph: CallGraph, regions: Regions) -> None:
        self.project = project
        self.graph = graph
        # allocations from nothing only: `self.k = k.to(dev)` may be the tensor it was given
        self.provenance = Provenance(project, graph, regions, copies=False)
        self._outside: Optional[set[str]] = None
        self.unnamed = UnnamedCalls(project)
        self._once: dict[str, bool] = {}
        self._returns_new: dict[str, bool] = {}
        self._changed_memo: dict[tuple[str, str], bool] = {}
        self._imported_by: Optional[dict[str, set[str]]] = None

    def runs_once(self, fid: str) -> bool:
        """Whether every project call of method ``fid`` runs it on an object its caller has just built."""
        found = self._once.get(fid)
        if found is None:
            found = self._once[fid] = self._runs_once(fid)
        return found

    def field_made_here(self, fid: str, field: str, line: int) -> bool:
        """Whether ``self.<field>`` of method ``fid``'s class only ever holds a tensor made for its object: every
        other binding of it in a method of the class, a base or a subclass is a new allocation from nothing or a
        constant (not ``self.k = k``, not ``cached(n)``: a run would update a tensor another object's run made), and
        no other code binds a field of that name (``obj.k = ...``, ``cls.k = ...``, ``setattr(obj, "k", ...)``, a
        function nested in a method). Not seen: ``__dict__``, ``vars()`` and ``setattr`` with a computed name."""
        project = self.project
        owner = project.class_of(fid)
        if owner is None or field in self._fields_bound_from_outside():
            return False
        target = ["n", f"self.{field}"]
        for klass in {*project.mro(owner), *project.subclasses(owner)}:
            for method_name in project.classes[klass][1]["methods"]:
                method = project.method(klass, method_name)
                if method is None:
                    continue
                for fact in project.function(method)["assigns"]:
                    if fact.target == target and not (method == fid and fact.line == line) \
                            and not self._always_allocates(method, fact.value):
                        return False
        return True

    def _always_allocates(self, fid: str, value: list) -> bool:
        """Whether ``value`` is a constant or always a tensor a torch factory makes from nothing, on every branch
        (``torch.ones(n)``; not ``k if k is not None else torch.ones(n)``, not a project function's result)."""
        tag = value[0]
        if tag == "k":
            return True
        if tag in "ib":
            return all(self._always_allocates(fid, part) for part in (value[1] if tag == "b" else value[1:]))
        if tag != "c":
            return False
        func = self.project.function(fid)["calls"][value[1]].func
        if func[0] != "n":
            return False
        symbol = self.project.resolve(fid, func[1])
        return symbol is not None and symbol.kind == EXTERNAL and symbol.target in names.TORCH_FACTORIES

    def _fields_bound_from_outside(self) -> set[str]:
        """The field names some code binds otherwise than as ``self.x = ...`` in a method: on another object, on
        ``cls``, in a function that is no method (a nested one's ``self`` is its method's), or by ``setattr`` or
        ``__setattr__`` with the name spelt out: one pass, the first time."""
        if self._outside is None:
            outside: set[str] = set()
            for _summary, fn in self.project.functions.values():
                method = fn["cls"] is not None
                for fact in fn["assigns"]:
                    target = fact.target
                    if target[0] == "n" and "." in target[1] and not (method and target[1].startswith("self.")):
                        outside.add(target[1].rpartition(".")[2])
                for call in fn["calls"]:
                    # `setattr(obj, "k", v)`, `object.__setattr__(self, "k", v)`, `self.__setattr__("k", v)`
                    if callee_leaf(call.func) in ("setattr", "__setattr__"):
                        outside.update(arg[1] for arg in call.args[:2] if arg[0] == "k" and isinstance(arg[1], str))
            self._outside = outside
        return self._outside

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
        # the questions about one call first; those that pass over the whole project last
        if not calls or not all(self._fresh_bindings(caller, index) is not None for caller, index in calls):
            return False
        for caller, index in project.calls_named(fn["name"]):
            if (caller, index) in calls or "." not in project.function(caller)["calls"][index].func[1]:
                continue
            targets = self.graph.call_targets(caller, index, loose=True)
            if not targets or family.intersection(targets):
                if self._fresh_bindings(caller, index) is None:  # `x.load(...)` on a receiver the graph does not know
                    return False
                calls.add((caller, index))
        for caller, index in project.calls_named(fn["name"], on_values=True):
            targets = self.graph.call_targets(caller, index, loose=True)
            if not targets or family.intersection(targets):
                return False  # `make().load(...)`: on an object no local holds
        return not self.unnamed.may_run_unnamed(fid) and all(
            self._new_object(caller, fact.value, 0) for caller, index in calls
            for fact in self._fresh_bindings(caller, index))

    def _fresh_bindings(self, fid: str, index: int) -> Optional[list]:
        """The bindings of the local that call ``index`` of ``fid`` is made on, where the call and they are placed
        as a call on an object just built must be (see the module's docstring); None where they are not. Whether
        each binding's value is a new object is ``_new_object``'s question."""
        fn = self.project.function(fid)
        if index in fn["deferred"]:
            return None
        call = fn["calls"][index]
        receiver, _method = method_call(call.func)
        if receiver is None or receiver[0] != "n" or "." in receiver[1]:
            return None
        name = receiver[1]
        if name in ("self", "cls") or name in fn["params"] or name in fn["globals"] or name in fn["locals"] \
                or name in fn["other_binds"]:
            return None
        if sum(1 for other in fn["calls"] if other.func == call.func) != 1:
            return None
        bindings = [fact for fact in fn["assigns"] if fact.target == ["n", name]]
        if not bindings:
            return None
        around = {-1, *enclosing_guards(fn, call.guard)}
        blocks_of_call = {block for block in map(tuple, fn["blocks"]) if block[0] <= call.line <= block[1]}
        for fact in bindings:
            blocks = {block for block in map(tuple, fn["blocks"]) if block[0] <= fact.line <= block[1]}
            if fact.op is not None or fact.line >= call.line or fact.guard not in around or blocks != blocks_of_call:
                return None
        return bindings

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
            return bool(values) and symbol.name not in project.function(symbol.owner)["other_binds"] \
                and all(self._class_reference(symbol.owner, v) for v in values)
        return self._class_reference(fid, func)

    def _class_reference(self, fid: str, value: list) -> bool:
        """Whether ``value`` in ``fid`` is a class that builds anew: named, or an item of a registry of such."""
        if value[0] == "s":
            return self._registry(fid, value[1])
        if value[0] == "c":  # `REGISTRY.get(key)`, no default (`.get(key, shared)` may give anything)
            call = self.project.function(fid)["calls"][value[1]]
            func = call.func
            return func[0] == "n" and func[1].endswith(".get") and len(call.args) == 1 and not call.kwargs \
                and self._registry(fid, ["n", func[1][:-4]])
        if value[0] == "n":
            symbol = self.project.resolve(fid, value[1])
            return symbol is not None and symbol.kind == CLASS and self._builds_anew(symbol.target)
        return False

    def _function_returns_new(self, fid: str, depth: int) -> bool:
        """Whether every return of ``fid``, and of each override of it in a subclass, is a new object."""
        found = self._returns_new.get(fid)
        if found is None:
            self._returns_new[fid] = False  # guards recursion
            project = self.project
            fn = project.function(fid)
            owner = project.class_of(fid) if fn["cls"] is not None else None
            overrides = [] if owner is None else [
                method for sub in project.subclasses(owner)
                if (method := project.method(sub, fn["name"])) is not None and method != fid]
            found = True
            for target in (fid, *overrides):
                target_fn = project.function(target)
                rets = target_fn["rets"]
                if target_fn["dec"] or not rets or any(r.is_yield for r in rets) \
                        or not all(self._new_object(target, r.value, depth) for r in rets):
                    found = False
                    break
            self._returns_new[fid] = found
        return found

    def _builds_anew(self, cid: str) -> bool:
        """Whether ``Cls(...)`` always makes a new object: no ``__new__``, metaclass, decorator or base that is no
        name, in it or a base, and the class's name not bound again to anything else
        (``Cls = functools.cache(Cls)``)."""
        project = self.project
        for klass in project.mro(cid):
            summary, cls = project.classes[klass]
            if "__new__" in cls["methods"] or any(maker.rpartition(".")[2] not in _PLAIN_MAKERS
                                                   for maker in cls.get("makers", ())):
                return False
            scope = fid_of(summary["module"], cls["scope"])
            if scope in project.functions and (project.local_values(scope).get(cls["name"])
                                               or cls["name"] in project.function(scope)["globals"]):
                return False
            if cls["scope"] == MODULE_SCOPE and self._changed(summary["module"], cls["name"]):
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
        if not values or self._changed(module, name):
            return False
        scope = fid_of(module, MODULE_SCOPE)
        return all(value[0] == "r" and all(self._class_reference(scope, ["n", item]) for item in value[1])
                   for value in values)

    def _changed(self, module: str, name: str) -> bool:
        """Whether module ``module``'s global ``name`` (a registry, or a class) may be bound or changed after the
        module ran: declared ``global`` in one of its functions; bound through its module (``m.REGISTRY = ...``,
        ``mod.Cls = ...``); given another ``__new__`` (``Cls.__new__ = f``, ``setattr(Cls, "__new__", f)``);
        stored into (``R[k] = v``); a method called on it that is not a read (``R.update(...)``); or handed on as
        it is (``r = R``, ``put(R, k, v)``, ``min([R])``, a default, a class body's ``r = R``), where it may be
        changed (a class handed on stays the class). Looked for in the modules that can name it: its own, and
        those importing it, from it or its package."""
        key = (module, name)
        found = self._changed_memo.get(key)
        if found is None:
            found = self._changed_memo[key] = self._find_change(module, name)
        return found

    def _find_change(self, module: str, name: str) -> bool:
        project = self.project
        summary = project.modules.get(module)
        if summary is None:
            return True
        is_class = name in summary["classes"]
        if any(name in fn["globals"] for fn in summary["functions"].values()):
            return True

        def is_it(fid: str, spelt: str) -> bool:
            symbol = project.resolve(fid, spelt)
            if symbol is None:
                return False
            if is_class:
                return symbol.kind == CLASS and symbol.target == fid_of(module, name)
            return symbol.kind == GLOBAL and (symbol.target, symbol.name) == (module, name)

        for namer in self._namers(module):
            namer_summary = project.modules[namer]
            # the names it may go by there: its own, and what imports of it are called (`from m import R as r`)
            names = {name} | {alias for fn in namer_summary["functions"].values()
                              for alias, full in fn["imports"].items() if full == f"{module}.{name}"}
            for qual, fn in namer_summary["functions"].items():
                fid = fid_of(namer, qual)
                module_scope = qual == MODULE_SCOPE
                for fact in fn["assigns"]:
                    target = fact.target
                    if target[0] == "n":
                        spelt = target[1]
                        if is_class and spelt.endswith(".__new__") and is_it(fid, spelt[:-len(".__new__")]):
                            return True
                        if ("." in spelt or not module_scope) and spelt[spelt.rfind(".") + 1:] in names \
                                and is_it(fid, spelt):
                            return True
                    elif not is_class:
                        while target[0] == "s":
                            target = target[1]
                            if target[0] == "n" and target[1][target[1].rfind(".") + 1:] in names \
                                    and is_it(fid, target[1]):
                                return True
                for call in fn["calls"]:
                    func = call.func
                    if is_class and func[0] == "n" and func[1].endswith("setattr") and len(call.args) >= 2 \
                            and call.args[1] == ["k", "__new__"] and call.args[0][0] == "n" \
                            and is_it(fid, call.args[0][1]):
                        return True
                    receiver, method = method_call(func)
                    if not is_class and receiver is not None and receiver[0] == "n" and method not in _READS \
                            and receiver[1][receiver[1].rfind(".") + 1:] in names and is_it(fid, receiver[1]):
                        return True
                if not is_class:
                    for value in _handed_values(project, fid, fn):
                        for spelt in _bare_names(value):
                            if spelt[spelt.rfind(".") + 1:] in names and is_it(fid, spelt):
                                return True
            if not is_class:
                for cls in namer_summary["classes"].values():  # `r = R` in a class body
                    scope = fid_of(namer, cls["scope"])
                    if scope in project.functions and any(
                            spelt[spelt.rfind(".") + 1:] in names and is_it(scope, spelt)
                            for spelt in cls.get("aliases", {}).values()):
                        return True
        return False

    def _namers(self, module: str) -> set[str]:
        """The modules that can name module ``module``'s globals: itself, and each that imports it (``import m``,
        ``import m as a``), from it (``from m import R``), its package (``import pkg``) or all of it (``*``)."""
        if self._imported_by is None:
            by_full: dict[str, set[str]] = {}
            for importer, summary in self.project.modules.items():
                for fn in summary["functions"].values():
                    for full in fn["imports"].values():
                        by_full.setdefault(full, set()).add(importer)
                        by_full.setdefault(full.rpartition(".")[0], set()).add(importer)  # a member of it
                for source in summary["star"]:
                    by_full.setdefault(source, set()).add(importer)
            self._imported_by = by_full
        found = {module}
        parts = module.split(".")
        for end in range(1, len(parts) + 1):  # the module and each package above it
            found.update(self._imported_by.get(".".join(parts[:end]), ()))
        return found & set(self.project.modules)


def _handed_values(project: Project, fid: str, fn: dict):
    """The values ``fn`` hands on as they are: arguments (not a name given as it is to a builtin that only reads
    it, ``list(R)``), stored values, returns, with-items, parameters' defaults."""
    for call in fn["calls"]:
        func = call.func
        reads = False
        if func[0] == "n" and func[1] in _READING_BUILTINS:
            symbol = project.resolve(fid, func[1])
            reads = symbol is not None and symbol.kind == EXTERNAL
        yield from (arg for arg in call.args if not (reads and arg[0] == "n"))  # `min([R])` gives R back
        yield from call.kwargs.values()
    for fact in fn["assigns"]:
        yield fact.value
    for ret in fn["rets"]:
        yield ret.value
    for record in fn["withs"]:
        for item in record.items:
            yield item.expr
    yield from fn["defaults"].values()


def _bare_names(value: list) -> list[str]:
    """The names ``value`` is, or holds as they are (``summary_records.objects_in``), also as an item or element of
    a display of them (``for r in (R,)``); not one it indexes (``R[k]`` reads an item) or calls."""
    while value[0] in "su" and value[1][0] in "trm":  # an item of a display of names may be one of them
        value = value[1]
    return [name for tag, name in objects_in(value) if tag == "n"]
