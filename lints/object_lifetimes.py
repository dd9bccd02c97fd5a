"""Which objects live for one call only: a class whose objects a function that project code calls (a step, a
request handler) builds and drops before it returns (``metadata = Metadata(); metadata.run()``), or returns to a
caller that does (``return make_draft_input(...)`` up to a step loop). A buffer such an object allocates lazily is allocated
again for each object, in the grad mode of the call that uses it: no later call of another phase finds it.
"""
from __future__ import annotations

from typing import Optional

from . import names
from .callgraph import CallGraph
from .project import Project
from .summary_records import A_OP, A_TARGET, A_VALUE, C_ARGS, C_FUNC, C_KWARGS, MODULE_SCOPE, R_VALUE, method_call
from .symbols import CLASS

_RETURN_DEPTH = 3  # how many returns a built object is followed up through


class ObjectLifetimes:
    def __init__(self, project: Project, graph: CallGraph) -> None:
        self.project = project
        self.graph = graph
        self._dropped_results: dict[str, bool] = {}

    def built_per_call(self) -> frozenset[str]:
        """The classes some function builds and drops within one call, with their project base classes (an
        allocation in a base's method runs on these objects)."""
        project = self.project
        found: set[str] = set()
        for fid, (_summary, fn) in project.functions.items():
            for index, call in enumerate(fn["calls"]):
                func = call[C_FUNC]
                if func[0] != "n":
                    continue
                built = self._built_class(fid, fn, func[1])
                if built is not None and built not in found and self._dropped(fid, ["c", index], 0):
                    found.update(project.mro(built))
        return frozenset(found)

    def _built_class(self, fid: str, fn: dict, callee: str) -> Optional[str]:
        if callee == "cls" and fn["cls"] is not None and fn["params"][:1] == ["cls"]:
            return self.project.class_of(fid)  # `cls(...)` in a classmethod (`ForwardBatch.init_new`)
        symbol = self.project.resolve(fid, callee)
        return symbol.target if symbol is not None and symbol.kind == CLASS else None

    def _dropped(self, fid: str, value: list, depth: int) -> bool:
        """Whether what ``value`` holds in ``fid`` is used there and let go: bound only to locals that are
        never stored, passed on or returned (or returned to callers that do so). Anything else, or not known,
        is not dropped."""
        fn = self.project.function(fid)
        if fn["qual"] == MODULE_SCOPE:
            return False  # a module's names are its globals: kept
        for index, call in enumerate(fn["calls"]):
            receiver, method = method_call(call[C_FUNC])
            if receiver == value and method in names.MODULE_RETURNING_METHODS:  # `Model().to(device).eval()`
                return self._dropped(fid, ["c", index], depth)
        bound: list[str] = []
        for fact in fn["assigns"]:
            if fact[A_VALUE] == value:
                target = fact[A_TARGET]
                if fact[A_OP] is not None or target[0] != "n" or "." in target[1] or target[1] in fn["globals"]:
                    return False  # stored in a field, a global, a container
                bound.append(target[1])
        uses = [value] + [["n", name] for name in bound]
        for fact in fn["assigns"]:
            if fact[A_VALUE] in uses[1:] or (fact[A_VALUE][0] == "t" and any(v in uses for v in fact[A_VALUE][1])):
                return False  # stored on, or bound again
        for call in fn["calls"]:
            if any(arg in uses for arg in [*call[C_ARGS], *call[C_KWARGS].values()]):
                return False  # handed on: the callee may keep it
        returned = any(ret[R_VALUE] in uses for ret in fn["rets"])
        if not returned:
            return (bool(bound) or self._used_in_place(fn, value)) and self._runs_again(fid)
        return depth < _RETURN_DEPTH and self._callers_drop(fid, depth + 1)

    def _runs_again(self, fid: str) -> bool:
        """Whether project code calls ``fid`` from a function (a step, a request): what a program's ``main`` or a
        test builds and drops lives as long as the program or the test does."""
        return any(self.project.function(edge.caller)["qual"] != MODULE_SCOPE
                   for edge in self.graph.callers().get(fid, ()))

    def _used_in_place(self, fn: dict, value: list) -> bool:
        """``Builder(...).build()``: the object is a call's receiver and nothing else holds it."""
        return any(method_call(call[C_FUNC])[0] == value for call in fn["calls"])

    def _callers_drop(self, fid: str, depth: int) -> bool:
        """Whether a caller of ``fid`` drops what it returns (one that does is enough)."""
        key = f"{fid}@{depth}"
        if key not in self._dropped_results:
            self._dropped_results[key] = False  # guards recursion
            self._dropped_results[key] = any(
                edge.call >= 0 and edge.how == "call" and self._dropped(edge.caller, ["c", edge.call], depth)
                for edge in self.graph.callers().get(fid, ()))
        return self._dropped_results[key]
