"""Where a method may run without a call that names it: Python's protocols run a dunder (``__call__``,
``__enter__``), torch's module call runs ``forward``, the project stores or returns the method as a value
(``self.step = self.validate``, ``return self.validate``, ``register(obj.validate)``), binds it under another
name in a class body (``refresh = load``) or names it to ``operator.methodcaller`` or ``attrgetter``, or its class
dispatches by ``getattr(self, name)`` with a name not spelt out. Not seen: ``getattr(obj, name)`` with a computed
name on an object of a class not known."""
from __future__ import annotations

from typing import Optional

from .project import Project
from .summary_records import objects_in


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
        """The attribute names the project stores, returns or hands to a call as values anywhere (``[s.load]``,
        ``Thread(target=s.load)``), binds under another name in a class body (``refresh = load``), or names to
        ``operator.methodcaller`` or ``attrgetter``: one pass, the first time."""
        if self._taken_as_values is None:
            taken: set[str] = set()
            methods = set(self.project.method_names())

            def note(value: list) -> None:
                tag = value[0]
                if tag == "n":  # most values: a name, a call, a constant
                    name = value[1]
                    dot = name.rfind(".")
                    if dot > 0 and name[dot + 1:] in methods:  # a bound method is an attribute (`self.validate`)
                        taken.add(name[dot + 1:])
                elif tag != "c" and tag != "k":  # what a display, `a or b`, a lambda holds
                    for part_tag, name in objects_in(value):
                        if part_tag == "n" and name[name.rfind(".") + 1:] in methods and "." in name:
                            taken.add(name[name.rfind(".") + 1:])

            for _summary, fn in self.project.functions.values():
                for fact in fn["assigns"]:
                    note(fact.value)
                for ret in fn["rets"]:
                    note(ret.value)
                for call in fn["calls"]:
                    for arg in call.args:  # `Thread(target=obj.load)`, on an object of a class not known
                        note(arg)
                    for arg in call.kwargs.values():
                        note(arg)
                    if call.func[0] == "n" and call.func[1].endswith(("methodcaller", "attrgetter")) and call.args \
                            and call.args[0][0] == "k" and isinstance(call.args[0][1], str):
                        taken.add(call.args[0][1].rpartition(".")[2])
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
