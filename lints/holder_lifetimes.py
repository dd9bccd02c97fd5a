"""Which project classes hold state for one call only: every instance the project builds is kept in a local,
handed to a field of another object that the call sets afresh (``batch.spec_info = DraftInput(...)``),
returned to callers that do the same, or given to builtins and to constructors of such classes. None is
stored on ``self`` or ``cls``, in a module global, or in a container, nor given to a function that may keep
it. A lazy buffer of such a holder is made again with the next holder, not kept across calls.

Any doubt (no construction seen, a function that returns one and has no caller in the project, a value
nested in a display, a cycle, depth) counts as kept: the buffer is reported as before.
"""
from __future__ import annotations

from typing import Optional

from .callgraph import CallGraph
from .project import Project
from .summary_records import MODULE_SCOPE, callee_leaf
from .symbols import CLASS, EXTERNAL

# builtins a value may be given to without being kept
_PASSIVE_BUILTINS = frozenset(("len", "isinstance", "id", "type", "repr", "str", "bool", "print", "hasattr",
                               "getattr", "callable", "hash"))
_MAX_DEPTH = 4


class HolderLifetimes:
    def __init__(self, project: Project, graph: CallGraph) -> None:
        self.project = project
        self.graph = graph
        self._per_call: dict[str, bool] = {}
        self._sites: Optional[dict[str, list[tuple[str, int]]]] = None
        self._subclasses: Optional[dict[str, set[str]]] = None

    def per_call(self, cid: str, depth: int = 0) -> bool:
        """Whether every instance of class ``cid`` (or of a subclass) that the project builds lives for one
        call (see the module's docstring)."""
        known = self._per_call.get(cid)
        if known is not None:
            return known
        if depth > _MAX_DEPTH:
            return False
        self._per_call[cid] = False  # a cycle counts as kept
        classes = {cid} | self._subclasses_of(cid)
        sites = [site for klass in classes for site in self._construction_sites(klass)]
        answer = bool(sites) and all(self._per_call_value(fid, ["c", index], depth) for fid, index in sites)
        self._per_call[cid] = answer
        return answer

    def _subclasses_of(self, cid: str) -> set[str]:
        if self._subclasses is None:
            self._subclasses = {}
            for klass in self.project.classes:
                for base in self.project.mro(klass)[1:]:
                    self._subclasses.setdefault(base, set()).add(klass)
        return self._subclasses.get(cid, set())

    def _construction_sites(self, cid: str) -> list[tuple[str, int]]:
        if self._sites is None:
            # one pass over the calls, by the name they are spelt with: `Cls(...)`, `mod.Cls(...)`, `cls(...)`
            wanted = {cls["name"] for _summary, cls in self.project.classes.values()} | {"cls"}
            self._sites = {}
            for fid, (_summary, fn) in self.project.functions.items():
                for index, call in enumerate(fn["calls"]):
                    if call.func[0] == "n":
                        leaf = callee_leaf(call.func)
                        if leaf in wanted:
                            self._sites.setdefault(leaf, []).append((fid, index))
        project = self.project
        name = project.classes[cid][1]["name"]
        out = []
        for fid, index in self._sites.get(name, []):
            symbol = project.resolve(fid, project.function(fid)["calls"][index].func[1])
            if symbol is not None and symbol.kind == CLASS and symbol.target == cid:
                out.append((fid, index))
        for fid, index in self._sites.get("cls", []):
            fn = project.function(fid)
            if fn["params"][:1] == ["cls"] and project.class_of(fid) == cid:
                out.append((fid, index))  # `return cls(...)` in a classmethod of the class itself
        return out

    def _per_call_value(self, fid: str, expr: list, depth: int) -> bool:
        """Whether the object ``expr`` evaluates to in ``fid`` is kept no longer than the call."""
        project = self.project
        fn = project.function(fid)
        if fn["qual"] == MODULE_SCOPE:
            return False
        for fact in fn["assigns"]:
            value = fact.value
            if value != expr:
                if _contains(value, expr):
                    return False  # in a tuple, list or dict display: where it goes is not followed
                continue
            if fact.op is not None:
                return False
            target = fact.target
            if target[0] != "n":
                return False  # a subscript store (a container) or an unpacking
            name = target[1]
            head, dot, _rest = name.partition(".")
            if name in fn["globals"] or head in ("self", "cls"):
                return False
            if not dot:
                if not self._per_call_value(fid, ["n", name], depth):
                    return False
            elif head not in fn["params"] and head not in project.local_values(fid):
                return False  # a field of a class, a module or a module's object: kept
        for ret in fn["rets"]:
            if ret.value == expr or _contains(ret.value, expr):
                if ret.value != expr or ret.is_yield:
                    return False
                # every call that may run it, by name too (a callee of a receiver not known); one that takes it
                # as a value (a callback) may call it anywhere
                edges = self.graph.callers().get(fid, ())
                if not edges or depth >= _MAX_DEPTH or any(e.call < 0 or e.how in ("argument", "nested")
                                                           for e in edges):
                    return False  # returned to callers outside the project, or not followed
                if not all(self._per_call_value(e.caller, ["c", e.call], depth + 1) for e in edges):
                    return False
        for call in fn["calls"]:
            given = [arg for arg in (*call.args, *call.kwargs.values()) if arg == expr or _contains(arg, expr)]
            if not given:
                continue
            if any(arg != expr for arg in given) or call.func[0] != "n":
                return False
            symbol = project.resolve(fid, call.func[1])
            if symbol is not None and symbol.kind == EXTERNAL and symbol.target in _PASSIVE_BUILTINS:
                continue
            if symbol is not None and symbol.kind == CLASS and self.per_call(symbol.target, depth + 1):
                continue
            return False
        return True


def _contains(value, expr: list) -> bool:
    """Whether ``expr`` occurs strictly inside the tagged expression ``value``."""
    return isinstance(value, list) and any(
        isinstance(item, list) and (item == expr or _contains(item, expr)) for item in value)
