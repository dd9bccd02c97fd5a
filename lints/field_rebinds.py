"""Updates of a field that run only after the same object's field was bound to a new tensor.

``run()`` calls ``self.launch()``, which always does ``self.ws = torch.zeros(n)``, and then
``self.validate()``, whose ``self.ws.zero_()`` therefore writes ``launch``'s tensor: never the one a lazy
``if self.ws is None: self.ws = torch.zeros(8)`` made in an earlier call. An update is behind such a
binding when each project caller of its method calls it on ``self`` at a point the binding always comes
before: a statement of the caller's own that runs whenever the function does (no if-branch, loop, try or
match around it), or a method of ``self`` called so that always binds the field before it may return. A
method no project code calls is not behind anything: its callers are not known.

A lazy allocation run between the binding and the update (a size test under another grad mode) is not
followed: what this says lets the rules say less, never more.
"""
from __future__ import annotations

from typing import Callable, Optional

from .buffer_allocations import BufferKey
from .callgraph import CallGraph
from .project import Project
from .provenance import Provenance
from .summary_records import method_call
from .symbols import FIELD

_MAX_DEPTH = 6


class FieldRebinds:
    def __init__(self, project: Project, graph: CallGraph, provenance: Provenance,
                 matches: Callable[[BufferKey, BufferKey], bool]) -> None:
        """``matches``: whether two keys name one buffer (a field of a base class and of a subclass)."""
        self.project = project
        self.graph = graph
        self.provenance = provenance
        self.matches = matches
        # answers by depth too: each is then the same wherever the walk began, and a cycle of calls ends at the
        # depth limit
        self._behind: dict[tuple[str, BufferKey, int, int], bool] = {}
        self._always: dict[tuple[str, BufferKey, int], bool] = {}

    def behind_binding(self, fid: str, key: BufferKey) -> bool:
        """Whether every project call of method ``fid`` runs it after ``self.<key.name>`` was bound to a new
        tensor, so that an update of the field in ``fid`` writes that tensor (see the module's docstring)."""
        return self._callers_bind(fid, key, 0)

    def _callers_bind(self, fid: str, key: BufferKey, depth: int) -> bool:
        if depth > _MAX_DEPTH or self.project.function(fid)["cls"] is None:
            return False
        edges = list(self.graph.callers().get(fid, ()))
        for base in self.project.overridden(fid):  # `self.validate()` in a base may run this override
            edges.extend(e for e in self.graph.callers().get(base, ()) if self._on_self(e.caller, e.call))
        if not edges:
            return False
        return all(e.how == "call" and self._on_self(e.caller, e.call) and self._bound_at(e.caller, key, e.line, depth)
                   for e in edges)

    def _bound_at(self, fid: str, key: BufferKey, line: int, depth: int) -> bool:
        memo = (fid, key, line, depth)
        found = self._behind.get(memo)
        if found is None:
            fn = self.project.function(fid)
            found = self._binds_before(fid, fn, key, line, depth) or self._callers_bind(fid, key, depth + 1)
            self._behind[memo] = found
        return found

    def _binds_before(self, fid: str, fn: dict, key: BufferKey, line: Optional[int], depth: int) -> bool:
        return self._binding_line(fid, fn, key, line, depth) is not None

    def _binding_line(self, fid: str, fn: dict, key: BufferKey, line: Optional[int], depth: int) -> Optional[int]:
        """Where ``fid`` last binds the field to a new tensor before ``line`` (None: its end), by a statement that
        always runs or a method of ``self`` called so that always binds it; None where it does not, or where a
        binding to anything else comes later (``self.ws = None``, ``self.ws = self._saved``)."""
        field = "self." + key.name
        events = [(fact.line, fact) for fact in fn["assigns"] if fact.op is None and fact.target == ["n", field]
                  and (line is None or fact.line < line)]
        if depth < _MAX_DEPTH:
            events.extend((call.line, index) for index, call in enumerate(fn["calls"])
                          if (line is None or call.line < line) and _always_runs(fn, call.line, call.guard)
                          and self._on_self(fid, index))
        for at, event in sorted(events, key=lambda pair: pair[0], reverse=True):
            if type(event) is int:  # a method of `self`: binds it, or leaves it as it was (not followed further)
                targets = self.graph.call_targets(fid, event)
                targets = targets + [o for t in targets for o in self.provenance.overrides(t) if o not in targets]
                if targets and all(self._always_binds(t, key, depth + 1) for t in targets):
                    return at
            elif not (self._names_key(fid, field, key) and self.provenance.fresh(fid, event.value)):
                return None
            elif _always_runs(fn, event.line, event.guard):
                return at
        return None

    def _always_binds(self, fid: str, key: BufferKey, depth: int) -> bool:
        """Whether a call of method ``fid`` binds the field before it may return, and leaves it so (a generator's
        call runs none of its body)."""
        memo = (fid, key, depth)
        found = self._always.get(memo)
        if found is None:
            fn = self.project.function(fid)
            rets = fn["rets"]
            bound = None if any(r.is_yield for r in rets) else self._binding_line(fid, fn, key, None, depth)
            found = bound is not None and all(bound < r.line for r in rets)
            self._always[memo] = found
        return found

    def _on_self(self, fid: str, index: int) -> bool:
        """Whether call ``index`` of method ``fid`` calls a method of ``self`` (``self.f()``, ``super().f()``)."""
        fn = self.project.function(fid)
        if fn["cls"] is None or index < 0:
            return False
        receiver, _method = method_call(fn["calls"][index].func)
        if receiver == ["n", "self"]:
            return True
        return receiver is not None and receiver[0] == "c" and fn["calls"][receiver[1]].func == ["n", "super"]

    def _names_key(self, fid: str, field: str, key: BufferKey) -> bool:
        symbol = self.project.resolve(fid, field)
        if symbol is None or symbol.kind != FIELD:
            return False
        return self.matches(key, BufferKey("attr", symbol.target, symbol.name))


def _always_runs(fn: dict, line: int, guard: int) -> bool:
    """Whether a statement runs whenever its function reaches it in order: under no if-branch, loop, try or
    match case."""
    return guard < 0 and not any(first <= line <= last for first, last in fn["blocks"])
