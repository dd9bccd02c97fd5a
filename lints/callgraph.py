"""The cross-module call graph, built on demand from the project index.

An edge runs from a function to what it may run: a resolved call (``f()``, ``m.f()``,
``self.method()``, ``self.x.method()``, ``Cls()`` runs ``__init__``), a function handed on as an
argument (``run(forward_fn)``, ``functools.partial(self._dummy_run, ...)``), and the functions
defined inside it (``run_once``). ``loose`` edges also follow ``obj.method()`` on an object of
unknown class when exactly one project class defines ``method``; they are used only where a
missed edge would hide a crash (buffer reachability), never to label phases.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Sequence

from . import forked_work
from .project import Project
from .summary_records import callee_leaf
from .symbols import CLASS, FUNC, INSTANCE, LOCAL, fid_of

_GENERIC_METHODS = frozenset({"forward", "__call__", "__init__", "run", "apply", "get", "update", "step",
                              "execute", "call", "process", "build", "setup", "init", "reset", "close"})


# Callers that run a method named by their first argument, a literal string.
_BY_NAME_CALLERS = frozenset({"call_method", "run_method", "invoke_method"})
_BY_NAME_LIMIT = 8  # more methods of that name than this: too common a name to follow


class Edge(NamedTuple):
    caller: str
    callee: str
    call: int  # index of the call in the caller (-1: a nested definition)
    line: int
    how: str  # "call" | "argument" | "nested" | "loose" | "by-name"


class CallGraph:
    def __init__(self, project: Project) -> None:
        self.project = project
        # Per function, not per call: a key per call and a list per call were a fifth of the graph's memory.
        self._strict_targets_of: dict[str, list[Optional[Sequence[str]]]] = {}  # fid -> each call's, once found
        self._loose_targets_of: dict[tuple[str, int], Sequence[str]] = {}
        self._strict_edges: dict[str, list[Edge]] = {}
        self._loose_edges: dict[str, list[Edge]] = {}
        self._runs: dict[str, list[Edge]] = {}
        self._callers: Optional[dict[str, list[Edge]]] = None
        self._sole_owner: Optional[dict[str, str]] = None

    def runs(self, fid: str) -> list[Edge]:
        """Everything ``fid`` may run: the loose edges, and methods called by a literal name
        (``collective_rpc("execute_model")``, ``getattr(worker, name)`` with the name spelt)."""
        cached = self._runs.get(fid)
        if cached is not None:
            return cached
        out = self.edges(fid, loose=True)  # copied only where a call by name adds to it
        for index, call in enumerate(self.project.function(fid)["calls"]):
            args = call.args
            if not args or args[0][0] != "k" or not isinstance(args[0][1], str) or call.func[0] != "n":
                continue
            leaf = callee_leaf(call.func)
            if "rpc" in leaf.lower() or leaf in _BY_NAME_CALLERS:
                methods = self.project.methods_named(args[0][1])
                if 0 < len(methods) <= _BY_NAME_LIMIT:
                    out = [*out, *(Edge(fid, target, index, call.line, "by-name") for target in methods)]
        self._runs[fid] = out
        return out

    def build(self, then: Optional[Callable[[], Any]] = None) -> Optional[forked_work.Conversation]:
        """Every function's ``runs`` edges and the callers index, built now. With ``then``, a forked child
        finds half of the functions' edges meanwhile (``lints/forked_work.py``; each half a set of whole
        modules, so that a class's members are looked up in one process), takes this process's half in
        exchange, and goes on to ``then()``; its result: ``forked_work.last_answer`` on the conversation
        returned (None where no child ran: the graph is then built here whole)."""
        talk = None
        if then is not None:
            mine, theirs = self._halves()

            def in_child(rows: list[list]) -> Any:
                self._adopt(mine, rows)
                self.callers()
                return then()

            talk = forked_work.converse(lambda: self._compact_runs(theirs), in_child)
            try:
                for fid in mine:
                    self.runs(fid)
                found = forked_work.first_answer(talk, _rows_of(len(theirs)), lambda: self._compact_runs(mine)) \
                    if talk is not None else None
                if found is not None:
                    self._adopt(theirs, found)
                elif talk is not None:
                    forked_work.end(talk)
                    talk = None
                self.callers()
            except BaseException:  # Ctrl-C, or a bug of ours: no child left behind
                if talk is not None:
                    forked_work.end(talk)
                raise
            return talk
        self.callers()
        return None

    def _halves(self) -> tuple[list[str], list[str]]:
        """The project's functions in two lists of whole modules, of about as many calls each."""
        halves: tuple[list[str], list[str]] = ([], [])
        weights = [0, 0]
        by_module: dict[str, list[str]] = {}
        for fid, (summary, _fn) in self.project.functions.items():
            by_module.setdefault(summary["module"], []).append(fid)
        for fids in by_module.values():
            side = 0 if weights[0] <= weights[1] else 1
            halves[side].extend(fids)
            weights[side] += sum(len(self.project.function(fid)["calls"]) + 1 for fid in fids)
        return halves

    def _compact_runs(self, fids: list[str]) -> list[list[tuple]]:
        """Each function's ``runs`` edges as (callee, call, line, how) with the callee by its place in the
        project's functions (the child's and the parent's are the same, in the same order)."""
        place = {fid: n for n, fid in enumerate(self.project.functions)}
        return [[(place.get(edge.callee, edge.callee), edge.call, edge.line, _HOW_CODES[edge.how])
                 for edge in self.runs(fid)] for fid in fids]

    def _adopt(self, fids: list[str], rows: list[list]) -> None:
        """The edges a child found, kept as if this process had found them: ``runs``, the strict and loose
        ``edges`` (the loose list is the strict one where it adds nothing) and each call's strict targets."""
        functions = list(self.project.functions)
        for fid, row in zip(fids, rows):
            runs = [Edge(fid, functions[callee] if type(callee) is int else callee, call, line, _HOWS[how])
                    for callee, call, line, how in row]
            end = len(runs)
            while end and runs[end - 1].how == "by-name":
                end -= 1
            strict = [edge for edge in runs[:end] if edge.how != "loose"] or _NO_EDGES
            self._strict_edges[fid] = strict
            self._loose_edges[fid] = strict if len(strict) == end else runs[:end]
            self._runs[fid] = runs or _NO_EDGES
            targets: dict[int, list[str]] = {}
            for edge in strict:
                if edge.how == "call":
                    targets.setdefault(edge.call, []).append(edge.callee)
            found = self._call_slots(fid)
            for index in self._called(fid):
                found[index] = tuple(targets[index]) if index in targets else _NONE

    def callers(self) -> dict[str, list[Edge]]:
        """callee -> the ``runs`` edges into it, over the whole project (built once: every call is resolved)."""
        if self._callers is None:
            callers: dict[str, list[Edge]] = {}
            for fid in self.project.functions:
                for edge in self.runs(fid):
                    callers.setdefault(edge.callee, []).append(edge)
            self._callers = callers
        return self._callers

    def call_targets(self, fid: str, index: int, loose: bool = False) -> Sequence[str]:
        """Project functions that call ``index`` of ``fid`` runs."""
        if loose:
            key = (fid, index)
            found = self._loose_targets_of.get(key)
            if found is None:
                found = self.call_targets(fid, index) or self._loose_targets(fid, index)
                self._loose_targets_of[key] = found
            return found
        slots = self._call_slots(fid)
        found = slots[index]
        if found is None:
            found = slots[index] = self._strict_targets(fid, self.project.function(fid)["calls"][index].func)
        return found

    def _call_slots(self, fid: str) -> list[Optional[Sequence[str]]]:
        slots = self._strict_targets_of.get(fid)
        if slots is None:
            slots = self._strict_targets_of[fid] = [None] * len(self.project.function(fid)["calls"])
        return slots

    def _strict_targets(self, fid: str, func: list) -> Sequence[str]:
        if func[0] != "n":
            return _NONE
        project = self.project
        symbol = project.resolve(fid, func[1])
        if symbol is None:
            return _NONE
        if symbol.kind == FUNC:
            return (symbol.target,)
        if symbol.kind == CLASS:
            init = project.method(symbol.target, "__init__")
            return (init,) if init else _NONE
        if symbol.kind == INSTANCE:
            call_method = project.method(symbol.target, "__call__") or project.method(symbol.target, "forward")
            return (call_method,) if call_method else _NONE
        if symbol.kind == LOCAL and "." not in symbol.name:
            return tuple(self._local_callable(symbol.owner, symbol.name)) or _NONE
        return _NONE

    def _loose_targets(self, fid: str, index: int) -> Sequence[str]:
        """``obj.method()`` on an object of unknown class: the one project class's method of that name."""
        func = self.project.function(fid)["calls"][index].func
        if func[0] != "n" or "." not in func[1]:
            return _NONE
        owner = self._sole_owners().get(func[1].rpartition(".")[2])
        if owner is None:
            return _NONE
        symbol = self.project.resolve(fid, func[1])
        if symbol is None or symbol.kind in (FUNC, CLASS, INSTANCE) or (
                symbol.kind == LOCAL and "." not in symbol.name):
            return _NONE  # known, or a callable local: not an object of unknown class
        return (owner,)

    def _sole_owners(self) -> dict[str, str]:
        """method name -> its method, for the names that one project class defines (generic names left out)."""
        if self._sole_owner is None:
            self._sole_owner = {}
            for name in self.project.method_names():
                owners = self.project.methods_named(name)
                if len(owners) == 1 and name not in _GENERIC_METHODS and not name.startswith("__"):
                    self._sole_owner[name] = owners[0]
        return self._sole_owner

    def _local_callable(self, fid: str, name: str) -> list[str]:
        """``fn = self.method`` / ``fn = functools.partial(f, ...)`` then ``fn()``."""
        found = []
        for value in self.project.local_values(fid).get(name, []):
            target = self.function_ref(fid, value)
            if target:
                found.append(target)
        return found

    def function_ref(self, fid: str, value: list) -> Optional[str]:
        """The project function an expression denotes (not calls), e.g. ``self._dummy_run``."""
        if value[0] == "n":
            name = value[1]
            if name.rpartition(".")[2] not in self.project.function_names or (
                    "." not in name and not self.project.names_a_function(fid, name)):
                return None
            symbol = self.project.resolve(fid, value[1])
            if symbol is not None and symbol.kind == FUNC:
                return symbol.target
        elif value[0] == "c":
            call = self.project.function(fid)["calls"][value[1]]
            func = call.func
            if func[0] == "n" and callee_leaf(func) == "partial" and call.args:
                return self.function_ref(fid, call.args[0])
        return None

    def edges(self, fid: str, loose: bool = False) -> list[Edge]:
        cached = (self._loose_edges if loose else self._strict_edges).get(fid)
        if cached is not None:
            return cached
        if loose:  # the strict edges, with the loose ones of calls that have none, each after its call's
            out = self.edges(fid)
            strict_calls = {e.call for e in out if e.how == "call"}
            calls = self.project.function(fid)["calls"]
            # a call without strict targets: its loose ones (``call_targets(..., loose=True)``, unmemoised)
            extra = [Edge(fid, target, index, calls[index].line, "loose") for index in self._called(fid)
                     if index not in strict_calls for target in self._loose_targets(fid, index)]
            if extra:
                out = sorted(out + extra, key=lambda e: (e.call < 0, e.call, _EDGE_ORDER[e.how]))
            self._loose_edges[fid] = out
            return out
        project = self.project
        summary, fn = project.functions[fid]
        out = []
        calls = fn["calls"]
        known = self._call_slots(fid)
        for index in self._called(fid):
            call = calls[index]
            targets = known[index]
            if targets is None:
                targets = known[index] = self._strict_targets(fid, call.func)
            for target in targets:
                out.append(Edge(fid, target, index, call.line, "call"))
            for arguments in (call.args, call.kwargs.values()):
                for arg in arguments:
                    if arg[0] == "n":
                        target = self.function_ref(fid, arg)
                        if target is not None and target != fid:
                            out.append(Edge(fid, target, index, call.line, "argument"))
        for nested in fn["nested"]:
            target = fid_of(summary["module"], nested)
            out.append(Edge(fid, target, -1, project.function(target)["line"], "nested"))
        out = self._strict_edges[fid] = out or _NO_EDGES
        return out

    def _called(self, fid: str) -> "range | list[int]":
        """The indices of the calls ``fid`` makes when it runs: a decorator runs once, where the function is
        defined, not when it is called."""
        fn = self.project.function(fid)
        decorators = {dec.expr[1] for dec in fn["dec"] if dec.expr[0] == "c"}
        if not decorators:
            return range(len(fn["calls"]))
        return [index for index in range(len(fn["calls"])) if index not in decorators]


_NONE: tuple[str, ...] = ()  # no target: one object, not an empty list per call
_NO_EDGES: list[Edge] = []  # no edge: one object (nothing adds to a function's edges once found)
_EDGE_ORDER = {"call": 0, "loose": 1, "argument": 2, "nested": 3}
_HOWS = ("call", "loose", "argument", "nested", "by-name")
_HOW_CODES = {how: code for code, how in enumerate(_HOWS)}


def _rows_of(count: int) -> Callable[[Any], list[list[list]]]:
    """The reader of a child's edges: one row per function asked for, each edge [callee, call, line, how]."""
    def read(rows: Any) -> list[list[list]]:
        if not isinstance(rows, list) or len(rows) != count or not all(
                isinstance(row, list) and all(isinstance(edge, list) and len(edge) == 4 for edge in row)
                for row in rows):
            raise ValueError("not the edges asked for")
        return rows
    return read
