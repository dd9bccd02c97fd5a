"""One analysis of a whole project: index, call graph, regions, phases, buffers, serving mode.

Built once per run from the summaries and shared by every rule. Rules read it and report
``Finding`` objects; nothing here knows a rule code.
"""
from __future__ import annotations

import functools
from typing import Iterable, NamedTuple, Optional

from . import forked_work, names
from .buffers import Allocation, Buffers
from .callgraph import CallGraph
from .gradmodes import ENTRY_STATES, ON, GradModes
from .kept_buffers import KeptBuffers, kept_buffers_from_json, updates_after
from .model import ServingMode
from .once_per_object import OncePerObject
from .options import Config
from .phases import Phases
from .project import Project
from .regions import INFERENCE, NO_GRAD, Mode, Regions
from .summary_records import enclosing_withs
from .symbols import EXTERNAL


class Switch(NamedTuple):
    """torch's grad-mode switch written in a function, and the role it plays there."""

    fid: str
    role: str  # "with" | "enter_context" | "decorator" | "object" | "callable"
    mode: str
    line: int
    col: int
    text: str  # the switch as spelt, for messages
    call: int  # call index of the switch (-1 for a bare decorator)
    with_index: int = -1
    item: int = -1
    outer_call: int = -1  # for "callable": the call `switch()(fn)`


class ProjectAnalysis:
    def __init__(self, project: Project, config: Config, serving_config_set: bool = False,
                 fork_buffers: bool = False, buffer_holders: bool = True) -> None:
        """``fork_buffers``: a forked child finds half of the call graph, then the kept buffers while this
        process labels phases and grad modes (``lints/forked_work.py``); ``close`` ends it if its result is
        never asked for. ``buffer_holders``: tag the lazy fields made with each holder
        (``Allocation.per_holder``)."""
        self.buffer_holders = buffer_holders
        self.project = project
        self.config = config
        self.graph = CallGraph(project)
        self.regions = Regions(project, self.graph)
        # half of the call graph found by a child, which then finds the kept buffers (each side needs the whole
        # graph; neither needs what the other finds next)
        self._buffers_child = self.graph.build(then=self._find_kept_buffers if fork_buffers else None)
        try:
            self.phases = Phases(project, self.graph, self.regions, config)
            if serving_config_set:
                self.serving = ServingMode(config.serving_grad_mode, "config",
                                           "serving-grad-mode in the configuration")
            else:
                mode, evidence = self._infer_serving_mode()
                self.serving = ServingMode(mode, "inferred", evidence)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the buffers' child if it still runs (its result was not asked for)."""
        child, self._buffers_child = self._buffers_child, None
        if child is not None:
            forked_work.end(child)

    def _find_kept_buffers(self) -> KeptBuffers:
        return KeptBuffers(self.buffers.allocations, updates_after(self.project, self.buffers))

    @property
    def kept_allocations(self) -> list[Allocation]:
        """The kept allocations alone: found here without the updates where no child finds both (GM202 asks
        for the updates only when an allocation may run under inference mode)."""
        if self._buffers_child is not None or "kept_buffers" in self.__dict__:
            return self.kept_buffers.allocations
        return self.buffers.allocations

    @functools.cached_property
    def kept_buffers(self) -> KeptBuffers:
        """The kept allocations, and each with the in-place updates of its buffer after it."""
        child, self._buffers_child = self._buffers_child, None
        if child is not None:
            found = forked_work.last_answer(child, kept_buffers_from_json)
            if found is not None:
                return found
        return self._find_kept_buffers()

    @functools.cached_property
    def _class_serving(self) -> dict[str, tuple[str, str]]:
        """class id -> (mode, evidence) where that class's own serving entry points set a mode explicitly."""
        votes: dict[str, list[tuple[str, str]]] = {}
        for fid in self.phases.serving_roots:
            cid = self.project.class_of(fid)
            if cid is None:
                continue
            explicit = self.explicit_mode(fid)
            if explicit is not None:
                votes.setdefault(cid, []).append(explicit)
        out = {}
        for cid, found in votes.items():
            on = [e for m, e in found if m == INFERENCE]
            off = [e for m, e in found if m != INFERENCE]
            out[cid] = (INFERENCE, on[0]) if len(on) > len(off) else ("no_grad", off[0]) if off else (INFERENCE, on[0])
        return out

    def _infer_serving_mode(self) -> tuple[str, str]:
        """(mode, evidence): inference_mode when serving roots set it explicitly more often than no_grad."""
        on: list[str] = []
        off: list[str] = []
        for fid in sorted(self.phases.serving_roots):
            evidence = self.explicit_mode(fid)
            if evidence is None:
                continue
            (on if evidence[0] == INFERENCE else off).append(evidence[1])
        if on and len(on) > len(off):
            return INFERENCE, f"{len(on)} serving root(s) run under inference mode, e.g. {on[0]}" + (
                f" ({len(off)} under no_grad)" if off else "")
        if off:
            return NO_GRAD, f"{len(off)} serving root(s) run under no_grad, e.g. {off[0]}" + (
                f" ({len(on)} under inference mode)" if on else "")
        return NO_GRAD, "the default: no serving root sets a grad mode the analysis can resolve"

    def explicit_mode(self, fid: str) -> Optional[tuple[str, str]]:
        """(mode, evidence) where serving root ``fid`` switches a grad mode itself, or a caller outside warm code
        runs it under inference mode."""
        project = self.project
        for mode, dec in self.regions.decorator_modes(fid):
            if mode.mode in (INFERENCE, NO_GRAD):
                return mode.mode, f"{project.label(fid)} decorated {mode.via} at {project.where(fid, dec.line)}"
        fn = project.function(fid)
        for index, record in enumerate(fn["withs"]):
            for modes in self.regions.with_modes(fid, index):
                for mode in modes:
                    if mode.mode in (INFERENCE, NO_GRAD):
                        where = project.where(fid, record.line)
                        return mode.mode, f"{project.label(fid)} enters {mode.via} at {where}"
        step = self.modes.states.get(fid, {}).get(ON)
        if step is not None and not any(self.phases.is_warm(caller) for caller, _, _ in self.modes.links(fid, ON)):
            origin = step.origin
            where = project.where(origin.fid, origin.line)
            return INFERENCE, f"{project.label(fid)} called under {origin.text} at {where}"
        return None

    def serving_mode_for(self, fid: str) -> ServingMode:
        """The serving grad mode that code in ``fid`` must agree with: its own class's serving entry points
        when they set one (a TPU runner may serve under no_grad beside a GPU runner under inference mode),
        else the project's."""
        if self.serving.source == "config":
            return self.serving
        cid = self.project.class_of(fid)
        if cid is not None:
            for klass in self.project.mro(cid):
                found = self._class_serving.get(klass)
                if found is not None:
                    return ServingMode(found[0], "inferred", found[1])
        return self.serving

    def runs_code(self, fid: str, with_index: int) -> bool:
        """Whether a region makes any call (a region that calls nothing allocates nothing)."""
        fn = self.project.function(fid)
        if with_index < 0:
            decorators = {dec.expr[1] for dec in fn["dec"] if dec.expr[0] == "c"}
            return bool(fn["nested"]) or any(i not in decorators for i in range(len(fn["calls"])))
        # a call inside, or a yield: a context manager yielding there runs its caller's block
        return any(with_index in enclosing_withs(fn, current) for current in
                   [call.with_index for call in fn["calls"]] + [ret.with_index for ret in fn["rets"] if ret.is_yield])

    @functools.cached_property
    def modes(self) -> GradModes:
        """The inference-mode states every function may run in, from every entry point."""
        return GradModes(self.project, self.graph, self.regions, ENTRY_STATES[self.config.entry_grad_mode])

    @functools.cached_property
    def once_per_object(self) -> OncePerObject:
        """Which methods run once per object (each project call on an object its caller has just built)."""
        return OncePerObject(self.project, self.graph, self.regions)

    @functools.cached_property
    def buffers(self) -> Buffers:
        return Buffers(self.project, self.graph, self.regions, self.buffer_holders)

    def switches(self, fid: str) -> list[Switch]:
        """Every grad-mode switch written in ``fid`` (enabled or not), with its role."""
        fn = self.project.function(fid)
        calls = fn["calls"]
        out: list[Switch] = []
        claimed: set[int] = set()
        for w_index, record in enumerate(fn["withs"]):
            for i_index, item in enumerate(record.items):
                expr = item.expr
                if expr[0] == "c":
                    mode = self._switch_call(fid, expr[1])
                    if mode is not None:
                        role = "enter_context" if record.is_enter_context else "with"
                        out.append(Switch(fid, role, mode, item.line, item.col,
                                          self._text(calls[expr[1]]), expr[1], w_index, i_index))
                        claimed.add(expr[1])
        for dec in fn["dec"]:
            expr = dec.expr
            if expr[0] == "c":
                mode = self._switch_call(fid, expr[1])
                if mode is not None:
                    out.append(Switch(fid, "decorator", mode, dec.line, dec.col,
                                      self._text(calls[expr[1]]), expr[1]))
                    claimed.add(expr[1])
            elif expr[0] == "n":
                symbol = self.project.resolve(fid, expr[1])
                if symbol is not None and symbol.kind == EXTERNAL and symbol.target in names.GRAD_MODE_CLASSES:
                    out.append(Switch(fid, "decorator", names.GRAD_MODE_CLASSES[symbol.target], dec.line,
                                      dec.col, expr[1], -1))
        for index, call in enumerate(calls):
            func = call.func
            if func[0] == "c" and func[1] not in claimed:
                mode = self._switch_call(fid, func[1])
                if mode is not None:  # torch.inference_mode()(fn): the callable form
                    out.append(Switch(fid, "callable", mode, call.line, call.col, self._text(calls[func[1]]),
                                      func[1], outer_call=index))
                    claimed.add(func[1])
        for index, call in enumerate(calls):
            if index in claimed:
                continue
            mode = self._switch_call(fid, index)
            if mode is not None:
                out.append(Switch(fid, "object", mode, call.line, call.col, self._text(call), index))
        out.sort(key=lambda s: (s.line, s.col))
        return out

    def _switch_call(self, fid: str, index: int) -> Optional[str]:
        call = self.project.function(fid)["calls"][index]
        func = call.func
        if func[0] != "n":
            return None
        symbol = self.project.resolve(fid, func[1])
        if symbol is None or symbol.kind != EXTERNAL:
            return None
        return names.switch_mode(symbol.target, call.args, call.kwargs)

    @staticmethod
    def _text(call: list) -> str:
        func = call.func
        name = func[1] if func[0] == "n" else "..."
        args = [("True" if a == ["k", True] else "False" if a == ["k", False] else "...") for a in call.args]
        args += [f"{k}=..." for k in call.kwargs]
        return f"{name}({', '.join(args)})"

    def warm_functions(self) -> Iterable[str]:
        """Warm-only functions, less the helpers that only hand back a switch (reported where it is used)."""
        return (fid for fid in sorted(self.phases.warm) if self.phases.is_warm_only(fid)
                and (fid in self.phases.roots or not self.regions.returns(fid)))

    def indirect_with_items(self, fid: str) -> list[tuple[int, int, Mode]]:
        """(with, item, mode) for with-items entering inference mode through a helper (not written here)."""
        out = []
        fn = self.project.function(fid)
        for w_index, record in enumerate(fn["withs"]):
            for i_index, modes in enumerate(self.regions.with_modes(fid, w_index)):
                item = record.items[i_index]
                if item.expr[0] != "c" or self._switch_call(fid, item.expr[1]) is not None:
                    continue
                chosen = next((m for m in modes if m.mode == INFERENCE and not m.direct
                               and not (m.source and m.source in self.phases.roots)), None)
                if chosen is not None:
                    out.append((w_index, i_index, chosen))
        return out
