"""Where a method may run without a call that names it: Python's protocols run a dunder (``__call__``,
``__enter__``), torch's module call runs ``forward``, the project stores or returns the method as a value
(``self.step = self.validate``, ``return self.validate``, ``register(obj.validate)``), binds it under another
name in a class body (``refresh = load``) or names it to ``operator.methodcaller`` or ``attrgetter``, or its class
dispatches by ``getattr(self, name)`` with a name not spelt out. Not seen: ``getattr(obj, name)`` with a computed
name on an object of a class not known."""
from __future__ import annotations

from typing import Optional

from .project import Project


class UnnamedCalls:
    def __init__(self, project: Project) -> None:
        self.project = project
        self._taken_as_values: Optional[frozenset[str]] = None
        self._by_name: dict[str, bool] = {}

    def may_run_unnamed(self, fid: str) -> bool:
        """Whether method ``fid`` may run where no call names it (see the module's docstring)."""
        name = self.project.function(fid)["name"]
        return name == "forward" or (name.startswith("__") and name.endswith("__")) \
            or name in self._values_taken() or self._dispatches_by_name(self.project.class_of(fid))

    def _values_taken(self) -> frozenset[str]:
        """The attribute names the project stores, returns or hands to a call as values anywhere, or names to
        ``operator.methodcaller`` or ``attrgetter`` (each function's ``values_taken``, made with its summary), or
        binds under another name in a class body (``refresh = load``); asked of methods' names only."""
        if self._taken_as_values is None:
            taken: set[str] = set()
            for _summary, fn in self.project.functions.values():
                taken.update(fn["taken"])
            for _summary, cls in self.project.classes.values():
                taken.update(value.rpartition(".")[2] for value in cls.get("aliases", {}).values())
            self._taken_as_values = frozenset(taken)
        return self._taken_as_values

    def _dispatches_by_name(self, cid: Optional[str]) -> bool:
        """Whether a method of the class, of a base or of a subclass calls ``getattr(self, name)`` with a name not
        spelt out: any method of the class may run there."""
        if cid is None or cid not in self.project.classes:
            return True
        found = self._by_name.get(cid)
        if found is None:
            project = self.project
            found = False
            for klass in (*project.mro(cid), *project.subclasses(cid)):
                if klass not in project.classes:
                    continue
                for method in project.classes[klass][1]["methods"]:
                    fid = project.method(klass, method)
                    if fid is None:
                        continue
                    for call in project.function(fid)["calls"]:
                        if call.func == ["n", "getattr"] and call.args[:1] == [["n", "self"]] and (
                                len(call.args) < 2 or call.args[1][0] != "k"):
                            found = True
            self._by_name[cid] = found
        return found
