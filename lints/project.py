"""The project index: every module's summary, and what a name means in a given scope.

Resolves ``from a.b import f``, ``import a.b as m; m.f()``, re-exports through ``__init__.py``,
base classes across modules, ``self.x.method()`` where ``self.x``'s class is known from an
assignment or an annotation, and names local to a function. Everything is computed on demand
and memoised: a run pays for the code it follows, not for the whole tree. What class a value is
(``self.x``'s, what a factory returns) is ``lints/value_classes.py``, a part of ``Project``.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from .summary_records import MODULE_SCOPE
from .symbols import CLASS, EXTERNAL, FIELD, FUNC, GLOBAL, INSTANCE, LOCAL, MODULE, PARAM, Symbol, fid_of
from .scope_bindings import (BOUND_CLASS, BOUND_IMPORT, BOUND_NESTED, BOUND_PARAM, BOUND_SELF,
                             ScopeBindings)
from .value_classes import ValueClasses

_UNSEEN = object()
_NO_VALUES: tuple = ()  # a local bound otherwise than by an assignment: one object, not a list per name


class Project(ValueClasses, ScopeBindings):
    def __init__(self, summaries: Iterable[dict]) -> None:
        self.modules: dict[str, dict] = {}
        self.by_path: dict[str, dict] = {}
        shadowed: list[dict] = []
        for summary in summaries:
            held = self.modules.get(summary["module"])
            if held is None or (summary["package"] and not held["package"]):
                self.modules[summary["module"]] = summary
                if held is not None:
                    shadowed.append(held)
            else:
                shadowed.append(summary)
        # Two files, one module name (`foo.py` beside `foo/__init__.py`, or files named outside the
        # root): imports find the package, as Python's do. The other is still analysed, under a name
        # no import spells (a copy: the summary itself stays as the cache holds it).
        for summary in shadowed:
            name = summary["module"]
            n = 2
            while f"{name}#{n}" in self.modules:
                n += 1
            self.modules[f"{name}#{n}"] = {**summary, "module": f"{name}#{n}"}
        for summary in self.modules.values():
            self.by_path[summary["path"]] = summary
        self.functions: dict[str, tuple[dict, dict]] = {}
        self.classes: dict[str, tuple[dict, dict]] = {}
        self._methods_by_name: dict[str, list[str]] = {}
        self.function_names: set[str] = set()  # a name no function has denotes none (a cheap test)
        for name, summary in self.modules.items():
            for qual, fn in summary["functions"].items():
                fid = fid_of(name, qual)
                self.functions[fid] = (summary, fn)
                self.function_names.add(fn["name"])
                if fn["cls"] is not None:
                    self._methods_by_name.setdefault(fn["name"], []).append(fid)
            for qual, cls in summary["classes"].items():
                self.classes[fid_of(name, qual)] = (summary, cls)
        self._suffixes: dict[str, list[str]] = {}
        for name in self.modules:
            parts = name.split(".")
            for start in range(1, len(parts)):
                self._suffixes.setdefault(".".join(parts[start:]), []).append(name)
        self._tops = {name.split(".", 1)[0] for name in self.modules}
        self._memo: dict[str, dict[str, Optional[Symbol]]] = {}  # by function, then name: no key tuple per name
        self._symbols: dict[Symbol, Symbol] = {}
        self._global_memo: dict[str, Optional[Symbol]] = {}
        self._mro: dict[str, list[str]] = {}
        self._below: Optional[dict[str, list[str]]] = None
        self._local_values: dict[str, dict[str, list]] = {}
        self._rebound: dict[str, set[str]] = {}
        self._members: dict[tuple[Symbol, str], Optional[Symbol]] = {}
        self._methods: dict[tuple[str, str], Optional[str]] = {}
        self._calls_by_leaf: Optional[tuple[dict[str, list[tuple[str, int]]], ...]] = None
        self._init_value_classes()
        self._init_scope_bindings()

    # functions and classes ----------------------------------------------------
    def function(self, fid: str) -> dict:
        return self.functions[fid][1]

    def is_library(self, fid: str) -> bool:
        """Whether ``fid`` is in an installed library's module (``lints/libraries.py``), not the project's."""
        return bool(self.functions[fid][0].get("library"))

    def path_of(self, fid: str) -> str:
        return self.functions[fid][0]["path"]

    def label(self, fid: str) -> str:
        qual = self.function(fid)["qual"]
        return "module level" if qual == MODULE_SCOPE else f"`{qual.split('@', 1)[0]}()`"

    def where(self, fid: str, line: int) -> str:
        summary = self.functions[fid][0]
        # an installed library's file by its place in site-packages and its distribution
        if summary.get("library"):
            return f"{summary.get('shown_path', summary['path'])}:{line} ({summary['library']})"
        return f"{summary['path']}:{line}"

    def class_of(self, fid: str) -> Optional[str]:
        """The class a function is a method of, or is nested in a method of."""
        summary, fn = self.functions[fid]
        while fn is not None:
            if fn["cls"] is not None:
                return fid_of(summary["module"], fn["cls"])
            fn = summary["functions"].get(fn["parent"]) if fn["parent"] else None
        return None

    def overridden(self, fid: str) -> list[str]:
        """The methods of base classes that method ``fid`` overrides."""
        cls = self.class_of(fid) if self.function(fid)["cls"] is not None else None
        if cls is None:
            return []
        name = self.function(fid)["name"]
        return [m for base in self.mro(cls)[1:] if (m := self.method(base, name)) is not None
                and self.class_of(m) == base]

    def subclasses(self, cid: str) -> list[str]:
        """Every project class below class ``cid``, in the project's order (the index built once)."""
        if self._below is None:
            below: dict[str, list[str]] = {}
            for klass in self.classes:
                for base in self.mro(klass)[1:]:
                    below.setdefault(base, []).append(klass)
            self._below = below
        return self._below.get(cid, [])

    def mro(self, cid: str) -> list[str]:
        """The class and its project base classes, depth first (enough for method lookup here)."""
        if cid in self._mro:
            return self._mro[cid]
        self._mro[cid] = [cid]  # guards cycles
        self._collecting += 1  # a class's bases half known: `method` keeps nothing it finds meanwhile
        try:
            order = self._linear_bases(cid)
        finally:
            self._collecting -= 1
        self._mro[cid] = order
        return order

    def _linear_bases(self, cid: str) -> list[str]:
        order = [cid]
        summary, cls = self.classes[cid]
        scope = fid_of(summary["module"], cls["scope"]) if cls["scope"] else fid_of(summary["module"], MODULE_SCOPE)
        for base in cls["bases"]:
            symbol = self.resolve(scope, base) if scope in self.functions else self.resolve_global(base)
            if symbol is not None and symbol.kind == CLASS:
                order.extend(c for c in self.mro(symbol.target) if c not in order)
        return order

    def method(self, cid: str, name: str) -> Optional[str]:
        key = (cid, name)
        found = self._methods.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._method(cid, name)
            if not self._collecting:
                self._methods[key] = found
        return found

    def _method(self, cid: str, name: str) -> Optional[str]:
        for klass in self.mro(cid):
            summary, cls = self.classes[klass]
            if name in cls["methods"]:
                qual = f"{cls['qual']}.{name}"
                return fid_of(summary["module"], qual)
        return None

    def calls_named(self, leaf: str, on_values: bool = False) -> list[tuple[str, int]]:
        """(function, call) of the calls spelt ``leaf(...)`` or ``x.leaf(...)`` where ``leaf`` names a class or a
        method of the project, or is ``cls`` (``on_values``: those spelt ``f().leaf(...)``): one pass over every
        call, the first time."""
        if self._calls_by_leaf is None:
            wanted = {cls["name"] for _summary, cls in self.classes.values()} | {"cls"}
            wanted.update(self._methods_by_name)
            by_leaf: dict[str, list[tuple[str, int]]] = {}
            by_attribute: dict[str, list[tuple[str, int]]] = {}
            for fid, (_summary, fn) in self.functions.items():
                for index, call in enumerate(fn["calls"]):
                    func = call.func
                    if func[0] == "n":
                        name = func[1].rpartition(".")[2]
                        if name in wanted:
                            by_leaf.setdefault(name, []).append((fid, index))
                    elif func[0] == "a" and func[2] in wanted:
                        by_attribute.setdefault(func[2], []).append((fid, index))
            self._calls_by_leaf = (by_leaf, by_attribute)
        return self._calls_by_leaf[on_values].get(leaf, [])

    def methods_named(self, name: str) -> list[str]:
        return self._methods_by_name.get(name, [])

    def method_names(self) -> Iterable[str]:
        return self._methods_by_name.keys()

    # names ----------------------------------------------------------------------
    def local_values(self, fid: str) -> dict[str, Sequence[list]]:
        """name -> the expressions assigned to it in this function (plain names only)."""
        values = self._local_values.get(fid)
        if values is None:
            values = {}
            fn = self.function(fid)
            for fact in fn["assigns"]:
                target = fact.target
                if target[0] == "n" and "." not in target[1]:
                    values.setdefault(target[1], []).append(fact.value)
            for name, found in values.items():
                values[name] = tuple(found)  # a list of one grew room for four
            for name in fn["locals"]:
                values.setdefault(name, _NO_VALUES)
            self._local_values[fid] = values
        return values

    def resolve(self, fid: str, dotted: str) -> Optional[Symbol]:
        """What ``dotted`` means inside function ``fid``."""
        memo = self._memo.get(fid)
        if memo is None:
            memo = self._memo[fid] = {}
        found = memo.get(dotted, _UNSEEN)
        if found is _UNSEEN:
            memo[dotted] = None  # guards cycles
            found = self._resolve(fid, dotted)
            if found is not None:  # one object per meaning: most names of a project mean a few hundred things
                found = self._symbols.setdefault(found, found)
            memo[dotted] = found
        return found

    def _resolve(self, fid: str, dotted: str) -> Optional[Symbol]:
        head, _, rest = dotted.partition(".")
        summary = self.functions[fid][0]
        module = summary["module"]
        for scope_fid in self._scope_chain(fid):
            binding = self._bindings(scope_fid).get(head)
            if binding is None:
                continue
            scope = self.function(scope_fid)
            if binding == BOUND_SELF:
                base = Symbol(INSTANCE, fid_of(module, scope["cls"]))
                return self.member(base, rest) if rest else base
            if binding == BOUND_IMPORT:
                return self.resolve_global(scope["imports"][head] + (f".{rest}" if rest else ""))
            if binding == BOUND_NESTED:
                qual = head if scope["qual"] == MODULE_SCOPE else f"{scope['qual']}.{head}"
                base = Symbol(FUNC, fid_of(module, qual))
                return self.member(base, rest) if rest else base
            if binding == BOUND_CLASS:
                base = Symbol(CLASS, fid_of(module, head))
                return self.member(base, rest) if rest else base
            if binding == BOUND_PARAM:
                annotation = scope["ann"].get(head)
                cls = self.resolve(scope_fid, annotation) if annotation and annotation != head else None
                base = (Symbol(INSTANCE, cls.target) if cls is not None and cls.kind == CLASS
                        else Symbol(PARAM, "", head, scope_fid))
                return self.member(base, rest) if rest else base
            # a local or a global: bound by an assignment in this scope, or declared `global`
            alias = self._external_alias(summary, scope_fid, head) if head not in scope["globals"] else None
            if alias is not None:  # `im = torch.inference_mode`: the name is that callable
                return self.member(alias, rest) if rest else alias
            if head in scope["globals"]:
                base = Symbol(GLOBAL, module, head)
            elif scope["qual"] == MODULE_SCOPE:  # `_WS = Workspace()` at the top, bound once: an instance
                cls = self._module_instance(summary, scope_fid, head)
                base = Symbol(INSTANCE, cls) if cls else Symbol(GLOBAL, module, head)
            else:
                values = self.local_values(scope_fid)[head]
                cls = next((c for v in values if (c := self.class_of_value(scope_fid, v))), None)
                base = Symbol(INSTANCE, cls) if cls else Symbol(LOCAL, "", head, scope_fid)
            return self.member(base, rest) if rest else base
        for star in summary["star"]:
            found = self.resolve_global(f"{star}.{dotted}")
            if found is not None and found.kind != EXTERNAL:
                return found
        return Symbol(EXTERNAL, dotted)

    def _rebound_names(self, summary: dict) -> set[str]:
        """The names some function of the module declares ``global`` or ``nonlocal``."""
        found = self._rebound.get(summary["module"])
        if found is None:
            found = {n for fn in summary["functions"].values() for n in fn["globals"]}
            self._rebound[summary["module"]] = found
        return found

    def _external_alias(self, summary: dict, scope_fid: str, name: str) -> Optional[Symbol]:
        """What ``name`` stands for where its only binding in ``scope_fid`` is another name that resolves
        outside the project (``im = torch.inference_mode``); None for anything else, and for a module
        global that a function rebinds (``global im``)."""
        values = self.local_values(scope_fid).get(name, [])
        if len(values) != 1 or values[0][0] != "n" or "." not in values[0][1]:
            return None  # `x = y` between names of the project is left to the usual resolution
        scope = self.function(scope_fid)
        if name in scope["locals"]:
            return None  # also bound to a constant (`im = None`): not only this alias
        if name in self._rebound_names(summary):
            return None  # a function rebinds it (`global im`, `nonlocal im`)
        target = self.resolve(scope_fid, values[0][1])
        return target if target is not None and target.kind == EXTERNAL else None

    def member(self, base: Symbol, rest: str) -> Optional[Symbol]:
        """``base.rest`` for a symbol and a dotted attribute chain."""
        if (base.kind != INSTANCE and base.kind != CLASS) or self._collecting:
            return self._member(base, rest)  # kept only where no class's fields are half known
        key = (base, rest)  # `self.x.f` in every method of a class: one lookup
        found = self._members.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._members[key] = self._member(base, rest)
        return found

    def _member(self, base: Symbol, rest: str) -> Optional[Symbol]:
        current = base
        parts = rest.split(".")
        for index, part in enumerate(parts):
            remaining = ".".join(parts[index:])
            if current.kind == MODULE:
                return self.resolve_global(f"{current.target}.{remaining}")
            if current.kind == EXTERNAL:
                return Symbol(EXTERNAL, f"{current.target}.{remaining}")
            if current.kind == CLASS:
                method = self.method(current.target, part)
                current = Symbol(FUNC, method) if method else Symbol(FIELD, current.target, part)
            elif current.kind == INSTANCE:
                method = self.method(current.target, part)
                if method is not None:
                    current = Symbol(FUNC, method)
                else:
                    field_cls = self.field_type(current.target, part)
                    alias = self.field_alias(current.target, part) if not field_cls else None
                    if alias is not None:  # `self.ctx = torch.inference_mode`: the field is that callable
                        rest_parts = parts[index + 1:]
                        return Symbol(EXTERNAL, ".".join([alias.target, *rest_parts]))
                    current = Symbol(INSTANCE, field_cls) if field_cls else Symbol(FIELD, current.target, part)
            else:  # attributes of functions, params, locals, fields: not followed
                return Symbol(current.kind, current.target, current.name + "." + remaining, current.owner) \
                    if current.kind in (PARAM, LOCAL, GLOBAL, FIELD) else None
        return current

    def resolve_global(self, full: str) -> Optional[Symbol]:
        """A fully qualified name: a project module, something defined or re-exported in one, or external."""
        found = self._global_memo.get(full, _UNSEEN)
        if found is _UNSEEN:
            self._global_memo[full] = None  # guards cycles
            found = self._global_memo[full] = self._resolve_global(full)
        return found

    def _resolve_global(self, full: str) -> Optional[Symbol]:
        parts = full.split(".")
        if parts[0] not in self._tops:
            # src layouts and vendored trees: `pkg.mod` may be known here as `src.pkg.mod` (two names at
            # least must match: a lone `flashinfer` is the library, not some `x.y.flashinfer` module here)
            for cut in range(len(parts), 1, -1):
                matches = self._suffixes.get(".".join(parts[:cut]), [])
                if len(matches) == 1:
                    parts = matches[0].split(".") + parts[cut:]
                    break
            else:
                return Symbol(EXTERNAL, full)
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            summary = self.modules.get(name)
            if summary is None:
                continue
            if cut == len(parts):
                return Symbol(MODULE, name)
            return self._module_member(summary, parts[cut], ".".join(parts[cut + 1:]))
        return Symbol(EXTERNAL, full)

    def _module_member(self, summary: dict, name: str, rest: str) -> Optional[Symbol]:
        module = summary["module"]
        top = summary["functions"][MODULE_SCOPE]
        if name in summary["functions"] and summary["functions"][name]["parent"] is None \
                and summary["functions"][name]["cls"] is None:
            base = Symbol(FUNC, fid_of(module, name))
        elif name in summary["classes"]:
            base = Symbol(CLASS, fid_of(module, name))
        elif name in top["imports"]:
            return self.resolve_global(top["imports"][name] + (f".{rest}" if rest else ""))
        elif f"{module}.{name}" in self.modules:
            return self.resolve_global(f"{module}.{name}" + (f".{rest}" if rest else ""))
        elif name in self.local_values(fid_of(module, MODULE_SCOPE)):
            values = self.local_values(fid_of(module, MODULE_SCOPE))[name]
            alias = self._external_alias(summary, fid_of(module, MODULE_SCOPE), name)
            if alias is not None:
                return self.member(alias, rest) if rest else alias
            # `f = other_module.g` re-exports g; `x = Cls()` is an instance
            for value in values:
                if value[0] == "n":
                    target = self.resolve(fid_of(module, MODULE_SCOPE), value[1])
                    if target is not None and target.kind in (FUNC, CLASS):
                        return self.member(target, rest) if rest else target
            cls = next((c for v in values if (c := self.class_of_value(fid_of(module, MODULE_SCOPE), v))), None)
            base = Symbol(INSTANCE, cls) if cls else Symbol(GLOBAL, module, name)
        else:
            for star in summary["star"]:
                found = self.resolve_global(f"{star}.{name}")
                if found is not None and found.kind != EXTERNAL:
                    return self.member(found, rest) if rest else found
            return Symbol(EXTERNAL, f"{module}.{name}" + (f".{rest}" if rest else ""))
        return self.member(base, rest) if rest else base
