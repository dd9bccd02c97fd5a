"""What each scope of the project binds a name to, in the order ``Project._resolve`` looks: a part of
``lints.project.Project`` (as ``ValueClasses`` is), reading the index through its ``functions``,
``function`` and ``local_values``. A name's lookup walks its function, the functions it is nested in,
then the module's top level, one table per scope.
"""
from __future__ import annotations

from typing import Iterator, Optional

from .summary_records import MODULE_SCOPE
from .symbols import fid_of

# How a scope binds a name, in the order ``_resolve`` looks for them: a method's ``self``/``cls``, an
# import, a function defined in it, a class (module level), a parameter, an assignment or ``global``.
BOUND_SELF, BOUND_IMPORT, BOUND_NESTED, BOUND_CLASS, BOUND_PARAM, BOUND_NAME = range(6)


class ScopeBindings:
    def _init_scope_bindings(self) -> None:
        self._chains: dict[str, tuple[str, ...]] = {}
        self._binding_tables: dict[str, dict[str, int]] = {}
        self._nested: dict[str, dict[Optional[str], list[str]]] = {}

    def scope_chain(self, fid: str) -> Iterator[str]:
        """``fid``, the functions it is nested in, then the module's top level."""
        summary, fn = self.functions[fid]
        module = summary["module"]
        while fn is not None:
            yield fid_of(module, fn["qual"])
            fn = summary["functions"].get(fn["parent"]) if fn["parent"] else None
        if self.function(fid)["qual"] != MODULE_SCOPE:
            yield fid_of(module, MODULE_SCOPE)

    def names_a_function(self, fid: str, name: str) -> bool:
        """Whether a plain ``name`` read in ``fid`` may denote a project function: not where the
        scope that binds it binds a parameter, a variable or a class (a quick test before ``resolve``)."""
        for scope_fid in self._scope_chain(fid):
            binding = self._bindings(scope_fid).get(name)
            if binding is not None:
                return binding == BOUND_IMPORT or binding == BOUND_NESTED
        return True  # unbound here: a star import may bring it

    def _scope_chain(self, fid: str) -> tuple[str, ...]:
        chain = self._chains.get(fid)
        if chain is None:
            chain = self._chains[fid] = tuple(self.scope_chain(fid))
        return chain

    def _bindings(self, scope_fid: str) -> dict[str, int]:
        """name -> how ``scope_fid`` binds it, the first way ``_resolve`` looks for: its ``self``, an
        import, a function nested in it, a class (module level), a parameter, an assignment or ``global``."""
        found = self._binding_tables.get(scope_fid)
        if found is not None:
            return found
        summary, scope = self.functions[scope_fid]
        is_top = scope["qual"] == MODULE_SCOPE
        found = dict.fromkeys(self.local_values(scope_fid), BOUND_NAME)
        found.update(dict.fromkeys(scope["globals"], BOUND_NAME))
        if is_top:
            found.update(dict.fromkeys(summary["classes"], BOUND_CLASS))
        else:
            found.update(dict.fromkeys(scope["params"], BOUND_PARAM))
        found.update(dict.fromkeys(self._nested_functions(summary).get(None if is_top else scope["qual"], ()),
                                   BOUND_NESTED))
        found.update(dict.fromkeys(scope["imports"], BOUND_IMPORT))
        params = scope["params"]
        if not is_top and scope["cls"] and params and params[0] in ("self", "cls"):
            found[params[0]] = BOUND_SELF
        self._binding_tables[scope_fid] = found
        return found

    def _nested_functions(self, summary: dict) -> dict[Optional[str], list[str]]:
        """parent qual (None: module level) -> the names of the plain functions defined directly in it."""
        found = self._nested.get(summary["module"])
        if found is None:
            found = {}
            for qual, fn in summary["functions"].items():
                if fn["cls"] is not None or qual == MODULE_SCOPE:
                    continue
                parent = fn["parent"]
                if parent is None:
                    found.setdefault(None, []).append(qual)
                elif qual.startswith(parent + "."):
                    found.setdefault(parent, []).append(qual[len(parent) + 1:])
            self._nested[summary["module"]] = found
        return found
