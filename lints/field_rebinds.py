"""Updates of a field that run only after the same object's field was bound to a new tensor.

``run()`` calls ``self.launch()``, which always does ``self.ws = torch.zeros(n)``, and then
``self.validate()``, whose ``self.ws.zero_()`` therefore writes a tensor made in that same call of ``run``:
never one a lazy ``if self.ws is None: self.ws = torch.zeros(8)`` made in an earlier call. An update is behind
such a binding when each project caller of its method calls it on ``self``, then and there (not in a lambda,
a comprehension or a generator that may run later), at a point the binding always comes before:

- a statement of the caller's own that runs whenever the function does (no if-branch, loop, try, match case
  or with around it), whose value is always a new tensor (``torch.zeros(n)``, ``torch.zeros(n).to(d)``; not
  ``torch.zeros(n) if c else self.ws``), with no later binding of the field to anything else before the call;
- a method of ``self`` (undecorated, not a generator), called as a statement of that kind, that always binds
  the field so before it may return;
- or the caller is itself reached only that way (three callers up at most).

Not behind anything: a method no project code calls, one the project stores or returns as a value
(``self.step = self.validate``), a method of a class that dispatches by ``getattr(self, name)``, and a call from
a generator (it may yield between the binding and the call): their callers are not all known.

A lazy allocation run between the binding and the update (``self.ensure(n)`` growing the field) makes a tensor
that the next call of the caller replaces again: only a grad-mode switch between the two (a ``with`` around one
of them) could make them differ, and that is not followed.
"""
from __future__ import annotations

from typing import Callable, Optional

from .buffer_allocations import BufferKey
from .callgraph import CallGraph
from .project import Project
from .provenance import Provenance
from .summary_records import method_call
from .symbols import FIELD
from .unnamed_calls import UnnamedCalls

_MAX_DEPTH = 3


class FieldRebinds:
    def __init__(self, project: Project, graph: CallGraph, provenance: Provenance,
                 matches: Callable[[BufferKey, BufferKey], bool],
                 always_new: Callable[[str, list], bool]) -> None:
        """``matches``: whether two keys name one buffer (a field of a base class and of a subclass);
        ``always_new``: whether a value in a function is always a new tensor that holds no buffer."""
        self.project = project
        self.graph = graph
        self.provenance = provenance
        self.matches = matches
        self.always_new = always_new
        # answers by depth too: each is then the same wherever the walk began, and a cycle of calls ends at the
        # depth limit
        self._behind: dict[tuple[str, BufferKey, int, int, int], bool] = {}
        self._always: dict[tuple[str, BufferKey, int], bool] = {}
        self._callers: dict[tuple[str, BufferKey, int], bool] = {}
        self._event_lists: dict[tuple[str, str], list] = {}
        self.unnamed = UnnamedCalls(project)

    def behind_binding(self, fid: str, key: BufferKey) -> bool:
        """Whether every project call of method ``fid`` runs it after ``self.<key.name>`` was bound to a new
        tensor, so that an update of the field in ``fid`` writes that tensor (see the module's docstring)."""
        return self._callers_bind(fid, key, 0)

    def _callers_bind(self, fid: str, key: BufferKey, depth: int) -> bool:
        memo = (fid, key, depth)
        found = self._callers.get(memo)
        if found is None:
            found = self._callers[memo] = self._all_callers_bind(fid, key, depth)
        return found

    def _all_callers_bind(self, fid: str, key: BufferKey, depth: int) -> bool:
        fn = self.project.function(fid)
        if depth > _MAX_DEPTH or fn["cls"] is None:
            return False
        edges = list(self.graph.callers().get(fid, ()))
        for base in self.project.overridden(fid):  # `self.validate()` in a base may run this override
            edges.extend(e for e in self.graph.callers().get(base, ()) if self._on_self(e.caller, e.call))
        # the project-wide questions last: most methods have a caller that binds nothing
        return bool(edges) and all(
            e.how == "call" and self._on_self(e.caller, e.call)
            and e.call not in self.project.function(e.caller)["deferred"]  # a lambda's call runs later
            and self._bound_at(e.caller, key, e.line, e.call, depth) for e in edges) \
            and not self.unnamed.may_run_unnamed(fid)

    def _bound_at(self, fid: str, key: BufferKey, line: int, call: int, depth: int) -> bool:
        memo = (fid, key, line, call, depth)
        found = self._behind.get(memo)
        if found is None:
            fn = self.project.function(fid)
            found = not any(r.is_yield for r in fn["rets"]) and (
                self._binding_line(fid, fn, key, line, call, depth) is not None
                or self._callers_bind(fid, key, depth + 1))
            self._behind[memo] = found
        return found

    def _binding_line(self, fid: str, fn: dict, key: BufferKey, line: Optional[int], call: int,
                      depth: int) -> Optional[int]:
        """Where ``fid`` last binds the field to a new tensor before ``line`` (None: its end), by a statement that
        always runs or a method of ``self`` called so that always binds it; None where it does not, or where a
        binding to anything else comes later (``self.ws = None``, ``self.ws = self._saved``). ``call``: the call
        being asked about, which a binding's own value (``self.ws = torch.zeros(self.drain(n))``) runs first."""
        for at, fact, inside in self._events(fid, fn, key):
            if line is not None and at >= line:
                continue
            if fact is None:  # a method of `self`: binds it, or leaves it as it was (not followed further)
                if depth < _MAX_DEPTH and all(self._always_binds(t, key, depth + 1) for t in inside):
                    return at
            elif call in inside:
                continue
            elif not (self._names_key(fid, "self." + key.name, key) and self.always_new(fid, fact.value)):
                return None
            elif _always_runs(fn, fact.line, fact.guard, fact.with_index):
                return at
        return None

    def _events(self, fid: str, fn: dict, key: BufferKey) -> list[tuple[int, object, object]]:
        """What may bind the field in ``fid``, last first: (line, the assignment, the calls in its value) for a
        binding, (line, None, the methods it may run) for a call of a method of ``self`` made as a statement that
        always runs."""
        memo = (fid, key.name)
        found = self._event_lists.get(memo)
        if found is not None:
            return found
        field = ["n", "self." + key.name]
        calls = fn["calls"]
        found = [(fact.line, fact, _calls_in(calls, fact.value)) for fact in fn["assigns"]
                 if fact.op is None and fact.target == field]
        column = _statement_column(fn)
        deferred = fn["deferred"]
        for index, record in enumerate(calls):
            if record.col == column and index not in deferred \
                    and _always_runs(fn, record.line, record.guard, record.with_index) and self._on_self(fid, index):
                targets = self.graph.call_targets(fid, index)
                targets = [*targets, *(o for t in targets for o in self.provenance.overrides(t) if o not in targets)]
                if targets:
                    found.append((record.line, None, targets))
        found.sort(key=lambda event: event[0], reverse=True)
        self._event_lists[memo] = found
        return found

    def _always_binds(self, fid: str, key: BufferKey, depth: int) -> bool:
        """Whether a call of method ``fid`` binds the field before it may return, and leaves it so (a decorator
        may skip the body, a generator's call runs none of it)."""
        memo = (fid, key, depth)
        found = self._always.get(memo)
        if found is None:
            fn = self.project.function(fid)
            rets = fn["rets"]
            bound = None if fn["dec"] or any(r.is_yield for r in rets) else \
                self._binding_line(fid, fn, key, None, -1, depth)
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


def _always_runs(fn: dict, line: int, guard: int, with_index: int) -> bool:
    """Whether a statement runs whenever its function reaches it in order: under no if-branch, loop, try, match
    case, or with (whose context may swallow an exception raised before it)."""
    return guard < 0 and with_index < 0 and not any(first <= line <= last for first, last in fn["blocks"])


def _statement_column(fn: dict) -> int:
    """The column the function's body statements start at: the least of its body's records' (a call that starts a
    statement there is a statement of its own, or its value's first part, which always runs). Decorators, on the
    lines above the ``def``, are not its body."""
    columns = [record.col for field in ("calls", "assigns") for record in fn[field] if record.line > fn["line"]]
    return min(columns) if columns else -1


def _calls_in(calls: list, value: list) -> set[int]:
    """The calls an expression runs (its calls' arguments' too)."""
    found: set[int] = set()
    stack = [value]
    while stack:
        expr = stack.pop()
        if not isinstance(expr, list) or not expr:
            continue
        if expr[0] == "c":
            if expr[1] not in found:
                found.add(expr[1])
                call = calls[expr[1]]
                stack.append(call.func)
                stack.extend(call.args)
                stack.extend(call.kwargs.values())
        elif expr[0] in "tb":
            stack.extend(expr[1])
        else:
            stack.extend(part for part in expr[1:] if isinstance(part, list))
    return found
