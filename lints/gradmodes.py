"""Grad modes along every call chain: whether inference mode may be on or off where each function runs.

Each function is called in some inference-mode *states*: ``on`` (inside ``torch.inference_mode()``),
``off`` (known to be outside it: a thread or program entry, where Python starts with grad enabled,
``inference_mode(False)``, or ``no_grad``/``enable_grad`` entered outside inference mode) and
``unknown`` (a function no project code calls: a library's API or a host's callback, unless the
``entry-grad-mode`` setting says how the host calls it). The states flow from caller to callee
over the cross-module call graph, through what the caller switches around the call: its own
decorators, then the ``with`` blocks around the call, outermost first. ``no_grad`` keeps inference
mode on where it is on (torch does); an entry the host calls that enters no_grad itself is taken to run
outside inference mode, while elsewhere no_grad keeps an unknown state unknown. A ``with run_ctx:`` on a
parameter enters whatever the callers pass for it.

Every state a function reaches keeps its witness: the caller and the line of the call, down from
where the state was set. The fixpoint visits each (function, state) pair once.
"""
from __future__ import annotations

from collections import deque
from typing import NamedTuple, Optional

from .callgraph import CallGraph, Edge
from .project import Project
from .regions import ENABLE_GRAD, INFERENCE, INFERENCE_OFF, NO_GRAD, PARAM_MODE, Mode, Regions
from .summary_records import MODULE_SCOPE, callee_leaf, enclosing_guards, enclosing_withs

ON, OFF, UNKNOWN = "on", "off", "unknown"
# entry-grad-mode values and the state each gives
ENTRY_STATES = {"unknown": UNKNOWN, "inference_mode": ON, "no_grad": OFF, "grad": OFF}
# Calls that run a function handed to them later on a new thread or process: torch's grad-mode switches
# are thread-local, so it starts with grad enabled and inference mode off.
_FRESH_THREAD_LEAVES = frozenset({"Thread", "Process", "start_new_thread", "submit", "run_in_executor", "Timer"})


class Origin(NamedTuple):
    """Where a state was set: a switch or an entry point."""

    fid: str
    line: int
    text: str  # "`torch.inference_mode()`", "no grad-mode context (program entry)"


class Step(NamedTuple):
    """How a function first came to run in a state: its caller and the line of the call (None for a seed)."""

    parent: Optional[str]
    line: int
    origin: Origin


class GradModes:
    def __init__(self, project: Project, graph: CallGraph, regions: Regions, entry_state: str = UNKNOWN) -> None:
        self.project = project
        self.graph = graph
        self.regions = regions
        self.entry_state = entry_state
        self.states: dict[str, dict[str, Step]] = {}  # function -> state -> first step
        self._callers: dict[str, list[Edge]] = {}
        self._param_modes: dict[tuple[str, str], tuple[Mode, ...]] = {}
        self._solve()

    # layers: what a function switches around a fact ------------------------------------
    def layers(self, fid: str, with_index: int) -> list[tuple[tuple[Mode, ...], int]]:
        """(modes one switch may enter, its line), outermost first: decorators, then the withs around."""
        out = [((mode._replace(via=f"`@{mode.via.strip('`')}`"),), dec.line)
               for mode, dec in self.regions.decorator_modes(fid)]
        fn = self.project.function(fid)
        for index in reversed(list(enclosing_withs(fn, with_index))):
            for modes in self.regions.with_modes(fid, index):
                if modes:
                    out.append((modes, fn["withs"][index].line))
        return out

    def apply(self, fid: str, with_index: int, state: str, step: Step) -> list[tuple[str, Origin]]:
        """The states a fact at ``with_index`` of ``fid`` runs in when ``fid`` is called in ``state``."""
        current = [(state, step.origin)]
        for modes, line in self.layers(fid, with_index):
            expanded = []
            for mode in modes:
                if mode.mode == PARAM_MODE:
                    passed = self.param_modes(fid, mode.param)
                    if not passed:
                        expanded.extend(current)  # not known: the callers' state stays
                    for inner in passed:
                        expanded.extend(_switch(inner, fid, line, current))
                else:
                    expanded.extend(_switch(mode, fid, line, current, self._host_entry(fid)))
            current = list(dict.fromkeys(expanded))
        return current

    def _host_entry(self, fid: str) -> bool:
        """Whether ``fid`` is an entry the host calls (no project code calls it, or only a script's top level
        does), not a module's ``forward``
        or ``__call__`` (its runner calls it, often through an object of unknown class, in the runner's mode).
        An entry that enters no_grad itself is taken to be called outside inference mode: that is what the
        engine chose for it. Anywhere else no_grad keeps an unknown state unknown (torch keeps inference mode
        on under no_grad)."""
        if self.project.function(fid)["name"] in ("forward", "__call__"):
            return False
        # no project code calls it, or only a module's top level does (a script driving the engine)
        return all(self.project.function(edge.caller)["name"] == MODULE_SCOPE for edge in self._callers.get(fid, ()))

    def param_modes(self, fid: str, param: str) -> tuple[Mode, ...]:
        """The switches callers pass for ``param`` of ``fid`` (``run_ctx``), its default included."""
        key = (fid, param)
        if key in self._param_modes:
            return self._param_modes[key]
        self._param_modes[key] = ()  # guards recursion
        found: list[Mode] = []
        default = self.project.function(fid)["defaults"].get(param)
        if default is not None:
            found.extend(self.regions.modes_of(fid, default))
        for edge in self._callers.get(fid, ()):
            if edge.call < 0 or edge.how != "call":
                continue
            argument = self.regions.argument_for(fid, param, self.project.function(edge.caller)["calls"][edge.call])
            if argument is not None and argument is not default:
                found.extend(m for m in self.regions.modes_of(edge.caller, argument) if m.mode != PARAM_MODE)
        result = tuple(dict.fromkeys(found))
        self._param_modes[key] = result
        return result

    # the fixpoint ----------------------------------------------------------------------
    def _solve(self) -> None:
        project = self.project
        functions = list(project.functions)
        self._callers = self.graph.callers()
        queue: deque = deque()
        for fid in functions:
            fn = project.function(fid)
            if fid in self._callers:
                continue
            if fn["name"] == MODULE_SCOPE:
                module = project.functions[fid][0]["module"]
                if module == "__main__" or module.endswith(".__main__"):
                    self._offer(queue, fid, OFF, Step(None, 1, Origin(fid, 1, "no grad-mode context (`__main__`)")))
                else:
                    self._offer(queue, fid, UNKNOWN, Step(None, 1, Origin(fid, 1, "import time")))
            else:
                self._offer(queue, fid, self.entry_state,
                            Step(None, fn["line"], Origin(fid, fn["line"], "its callers (no project code calls it)")))
        while queue:
            fid, state = queue.popleft()
            step = self.states[fid][state]
            fn = self.project.function(fid)
            calls = fn["calls"]
            is_module = fn["name"] == MODULE_SCOPE
            for edge in self.graph.runs(fid):
                call = calls[edge.call] if edge.call >= 0 else None
                if call is not None and edge.how == "argument" and callee_leaf(call.func) in _FRESH_THREAD_LEAVES:
                    origin = Origin(fid, edge.line, f"a new thread or process (`{call.func[1]}(...)`)")
                    self._offer(queue, edge.callee, OFF, Step(fid, edge.line, origin))
                    continue
                if call is not None and is_module and _under_main_guard(fn, call.guard):
                    origin = Origin(fid, edge.line, "no grad-mode context (`if __name__ == \"__main__\"`)")
                    for new_state, new_origin in self.apply(fid, call.with_index, OFF, Step(None, 0, origin)):
                        self._offer(queue, edge.callee, new_state, Step(fid, edge.line, new_origin))
                    continue
                with_index = call.with_index if call is not None else -1
                for new_state, origin in self.apply(fid, with_index, state, step):
                    self._offer(queue, edge.callee, new_state, Step(fid, edge.line, origin))

    def _offer(self, queue: deque, fid: str, state: str, step: Step) -> None:
        known = self.states.setdefault(fid, {})
        if state not in known:
            known[state] = step
            queue.append((fid, state))

    # questions -------------------------------------------------------------------------
    def at(self, fid: str, with_index: int) -> dict[str, tuple[Origin, Optional[str]]]:
        """state -> (where it was set, the incoming state it came from) for a fact of ``fid``."""
        out: dict[str, tuple[Origin, Optional[str]]] = {}
        for incoming, step in self.states.get(fid, {}).items():
            for state, origin in self.apply(fid, with_index, incoming, step):
                out.setdefault(state, (origin, incoming))
        return out

    def links(self, fid: str, state: str, limit: int = 64) -> list[tuple[str, str, int]]:
        """(caller, callee, line of the call) down to ``fid`` running in ``state``, from the function that set it."""
        out: list[tuple[str, str, int]] = []
        current, seen = fid, set()
        while current not in seen and len(out) < limit:
            seen.add(current)
            step = self.states.get(current, {}).get(state)
            if step is None or step.parent is None:
                break
            out.append((step.parent, current, step.line))
            if step.parent == step.origin.fid:
                break
            # the caller ran in whichever state this one came from: follow the one that set the origin
            parent_states = self.states.get(step.parent, {})
            state = next((s for s, st in parent_states.items() if st.origin == step.origin), state)
            current = step.parent
        return list(reversed(out))

    def chain(self, fid: str, state: str, limit: int = 8) -> list[str]:
        """`A calls B at path:line` steps down to ``fid`` running in ``state``, from the function that set it."""
        return [f"{self.project.label(caller)} calls {self.project.label(callee)} at {self.project.where(caller, line)}"
                for caller, callee, line in self.links(fid, state)[-limit:]]

    def entry_contexts(self, fid: str, limit: int = 50000) -> frozenset[str]:
        """Where the runs that reach ``fid`` start: each entry no project code calls, as the package of its
        module (an engine's warmup and serving modules, side by side) and, for a method, its class (one
        object's methods run in one program). Two switches whose contexts share none (a layer's forward in
        `srt/models` and a test kit's or a benchmark script's function) are not known to run in one program."""
        memo = self.__dict__.setdefault("_entry_contexts", {})
        if fid in memo:
            return memo[fid]
        seen = {fid}
        stack = [fid]
        found: set[str] = set()
        while stack and len(seen) < limit:
            current = stack.pop()
            edges = self._callers.get(current)
            if not edges:
                module = self.project.functions[current][0]["module"]
                found.add(f"package {module.rpartition('.')[0] or module}")
                if self.project.function(current)["cls"]:
                    found.add(self.project.class_of(current) or module)
                continue
            for edge in edges:
                if edge.caller not in seen:
                    seen.add(edge.caller)
                    stack.append(edge.caller)
        memo[fid] = frozenset(found)
        return memo[fid]

    def describe(self, origin: Origin) -> str:
        return f"{origin.text} in {self.project.label(origin.fid)} at {self.project.where(origin.fid, origin.line)}"


def _switch(mode: Mode, fid: str, line: int, current: list[tuple[str, Origin]], host_entry: bool
            ) -> list[tuple[str, Origin]]:
    """What one switch does to each incoming (state, origin)."""
    here = Origin(fid, line, mode.via)
    if mode.mode == INFERENCE:
        return [(ON, here)]
    if mode.mode == INFERENCE_OFF:
        return [(OFF, here)]
    if mode.mode in (NO_GRAD, ENABLE_GRAD):  # inference mode stays on under no_grad; elsewhere it is off
        return [(state, origin) if state != UNKNOWN else ((OFF, here) if host_entry else (UNKNOWN, origin))
                for state, origin in current]
    return [(UNKNOWN, here)]  # `inference_mode(flag)`: either


def _under_main_guard(fn: dict, guard: int) -> bool:
    guards = fn["guards"]
    return any("__name__" in guards[around].names and "'__main__'" in guards[around].names
               for around in enclosing_guards(fn, guard))
