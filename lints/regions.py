"""Grad-mode regions: which code runs with inference mode (or no_grad) switched on, and why.

A region is a ``with`` (or ``ExitStack.enter_context``) whose context is a grad-mode switch, or a
function decorated with one. The switch may be written there (``torch.inference_mode()``,
``torch.autograd.grad_mode.inference_mode``, ``getattr(torch, "inference_mode")()``,
``torch._C._InferenceMode(True)``), or come from a helper that returns one (a factory, a
``@contextmanager`` yielding inside one, a lambda, a platform wrapper such as
``current_platform.inference_mode()``), a decorator built with ``functools.wraps`` that runs the
function inside one, a local variable, or a parameter the caller fills (``run_ctx``).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from . import names
from .project import Project
from .summary_records import MODULE_SCOPE, callee_leaf, enclosing_withs
from .symbols import EXTERNAL, FUNC, GLOBAL, LOCAL, PARAM

INFERENCE, INFERENCE_OFF, NO_GRAD, ENABLE_GRAD, UNKNOWN, PARAM_MODE = (
    "inference_mode", "inference_off", "no_grad", "enable_grad", "unknown", "param")
_INFERENCE_STATES = (INFERENCE, INFERENCE_OFF)


class Mode(NamedTuple):
    """One way a grad mode is entered: the mode, and where its switch is spelt."""

    mode: str
    via: str  # for messages: "`torch.inference_mode()`", "`ctx()` (returns `torch.inference_mode()` at a.py:3)"
    direct: bool  # torch's switch is written in this very expression
    param: str = ""  # for PARAM_MODE: the parameter whose value decides
    source: str = ""  # the function where torch's switch is written


class Regions:
    def __init__(self, project: Project, graph) -> None:
        self.project = project
        self.graph = graph
        self._returns: dict[str, tuple[Mode, ...]] = {}
        self._decorators: dict[str, tuple[Mode, ...]] = {}
        self._with_modes: dict[tuple[str, int], tuple[tuple[Mode, ...], ...]] = {}

    # expressions -----------------------------------------------------------------
    def modes_of(self, fid: str, expr: list, depth: int = 0) -> tuple[Mode, ...]:
        """The grad modes a context expression may enter (empty: not a grad-mode switch)."""
        if depth > 6 or not expr:
            return ()
        tag = expr[0]
        if tag == "b" or tag == "i":
            operands = expr[1] if tag == "b" else expr[1:]
            out: list[Mode] = []
            for operand in operands:
                out.extend(m for m in self.modes_of(fid, operand, depth + 1) if m not in out)
            return tuple(out)
        if tag == "c":
            return self._call_modes(fid, expr[1], depth)
        if tag == "n":
            symbol = self.project.resolve(fid, expr[1])
            if symbol is None:
                return ()
            if symbol.kind == PARAM and "." not in symbol.name:
                return (Mode(PARAM_MODE, f"parameter `{symbol.name}`", False, symbol.name),)
            if symbol.kind == LOCAL and "." not in symbol.name:
                out = []
                for value in self.project.local_values(symbol.owner).get(symbol.name, []):
                    for mode in self.modes_of(symbol.owner, value, depth + 1):
                        if mode.mode != PARAM_MODE or symbol.owner == fid:
                            out.append(Mode(mode.mode, f"`{symbol.name}` ({mode.via})", False, mode.param,
                                            mode.source))
                return tuple(out)
            if symbol.kind == EXTERNAL and symbol.target in names.GRAD_MODE_CLASSES:
                # a bare reference used as a context: `with torch.no_grad:` is an error, but as a decorator
                # (`@torch.inference_mode`) it enables the mode
                return (Mode(names.GRAD_MODE_CLASSES[symbol.target], f"`{expr[1]}`", True, "", fid),)
        return ()

    def _call_modes(self, fid: str, index: int, depth: int) -> tuple[Mode, ...]:
        project = self.project
        call = project.function(fid)["calls"][index]
        func = call.func
        if func[0] != "n":
            return ()
        symbol = project.resolve(fid, func[1])
        if symbol is None:
            return ()
        text = f"`{func[1]}()`"
        if symbol.kind == EXTERNAL:
            mode = names.switch_mode(symbol.target, call.args, call.kwargs)
            return (Mode(mode, text, True, "", fid),) if mode else ()
        if symbol.kind == FUNC:
            return self._from_helper(symbol.target, text, call, fid, depth)
        if symbol.kind in (LOCAL, GLOBAL) and "." not in symbol.name:
            owner = symbol.owner if symbol.kind == LOCAL else f"{symbol.target}:{MODULE_SCOPE}"
            out = []
            for value in project.local_values(owner).get(symbol.name, []) if owner in project.functions else ():
                if value[0] == "l":  # ctx = lambda: torch.inference_mode()
                    out.extend(Mode(m.mode, f"{text} (a lambda returning {m.via})", False, "", m.source)
                               for m in self.modes_of(owner, value[1], depth + 1))
                else:
                    target = self.graph.function_ref(owner, value)
                    if target:
                        out.extend(self._from_helper(target, text, call, fid, depth))
            return tuple(out)
        if "." in func[1] and symbol.kind not in (FUNC,):
            # `current_platform.inference_mode()`: an object we cannot type; trust the project's methods of
            # that name only when every one of them returns the same switch
            leaf = callee_leaf(func)
            if leaf in names.SWITCH_LEAVES:
                found = {m.mode for target in project.methods_named(leaf) for m in self.returns(target)}
                helpers = project.methods_named(leaf)
                if helpers and len(found) == 1 and all(self.returns(t) for t in helpers):
                    where = project.where(helpers[0], project.function(helpers[0])["line"])
                    return (Mode(found.pop(), f"{text} (returns a grad-mode switch, {where})", False, "",
                                 helpers[0]),)
        return ()

    def _from_helper(self, target: str, text: str, call: list, fid: str, depth: int) -> tuple[Mode, ...]:
        out = []
        for mode in self.returns(target, depth + 1):
            if mode.mode == PARAM_MODE:
                # `def ctx(run_ctx=None): return run_ctx or torch.inference_mode()`: the caller's argument
                arg = self.argument_for(target, mode.param, call)
                if arg is not None:
                    out.extend(self.modes_of(fid, arg, depth + 1))
                continue
            out.append(Mode(mode.mode, f"{text} (enters {mode.via}, "
                                       f"{self.project.where(target, self.project.function(target)['line'])})",
                            False, "", mode.source))
        return tuple(out)

    def argument_for(self, callee: str, param: str, call: list) -> Optional[list]:
        """The expression a call passes for ``param`` of ``callee`` (its default if none)."""
        fn = self.project.function(callee)
        if param in call.kwargs:
            return call.kwargs[param]
        params = fn["params"]
        offset = 1 if fn["cls"] is not None and params[:1] in (["self"], ["cls"]) else 0
        if param in params:
            position = params.index(param) - offset
            if 0 <= position < len(call.args):
                return call.args[position]
        return fn["defaults"].get(param)

    # functions ------------------------------------------------------------------
    def returns(self, fid: str, depth: int = 0) -> tuple[Mode, ...]:
        """Grad modes a call of ``fid`` hands back as a context (returned, or yielded inside one)."""
        if fid in self._returns:
            return self._returns[fid]
        self._returns[fid] = ()  # guards recursion
        fn = self.project.function(fid)
        out: list[Mode] = []
        is_cm = self.is_context_manager(fid)
        for ret in fn["rets"]:
            if ret.is_yield:
                if is_cm:
                    for modes in self.enclosing_modes(fid, ret.with_index):
                        out.extend(m for m in modes if m.mode != PARAM_MODE and m not in out)
            elif not is_cm:
                out.extend(m for m in self.modes_of(fid, ret.value, depth + 1) if m not in out)
        self._returns[fid] = tuple(out)
        return self._returns[fid]

    def is_context_manager(self, fid: str) -> bool:
        for dec in self.project.function(fid)["dec"]:
            expr = dec.expr
            if expr[0] == "n":
                symbol = self.project.resolve(fid, expr[1])
                if symbol is not None and symbol.kind == EXTERNAL and symbol.target in names.CONTEXTMANAGERS:
                    return True
        return False

    def decorator_modes(self, fid: str) -> tuple[tuple[Mode, list], ...]:
        """(mode, decorator record) for the decorators of ``fid`` that switch a grad mode on."""
        cached = self._decorators.get(fid)
        if cached is not None:
            return cached
        self._decorators[fid] = ()
        fn = self.project.function(fid)
        out = []
        for dec in fn["dec"]:
            for mode in self.modes_of(fid, dec.expr):
                if mode.mode != PARAM_MODE:
                    out.append((mode, dec))
            wrapped = self._wrapping_decorator(fid, dec.expr)
            if wrapped is not None:
                out.append((wrapped, dec))
        self._decorators[fid] = tuple(out)
        return self._decorators[fid]

    def _wrapping_decorator(self, fid: str, expr: list) -> Optional[Mode]:
        """``@with_inference`` where ``with_inference(fn)`` returns a wrapper calling fn inside a switch."""
        target = None
        if expr[0] == "n":
            symbol = self.project.resolve(fid, expr[1])
            target = symbol.target if symbol is not None and symbol.kind == FUNC else None
        elif expr[0] == "c":  # a decorator factory: @with_mode() returns the decorator
            func = self.project.function(fid)["calls"][expr[1]].func
            symbol = self.project.resolve(fid, func[1]) if func[0] == "n" else None
            if symbol is not None and symbol.kind == FUNC:
                target = self._returned_function(symbol.target)
        if target is None:
            return None
        wrapper = self._returned_function(target)
        if wrapper is None:
            return None
        decorator = self.project.function(target)
        wrapped_param = decorator["params"][0] if decorator["params"] else None
        for index, call in enumerate(self.project.function(wrapper)["calls"]):
            func = call.func
            if func[0] == "n" and func[1] == wrapped_param:
                for modes in self.enclosing_modes(wrapper, call.with_index):
                    for mode in modes:
                        if mode.mode in (INFERENCE, NO_GRAD, ENABLE_GRAD, INFERENCE_OFF):
                            return Mode(mode.mode, f"decorator `{decorator['qual']}` (runs the function under "
                                                   f"{mode.via}, {self.project.where(wrapper, call.line)})", False,
                                        "", mode.source or wrapper)
        return None

    def _returned_function(self, fid: str) -> Optional[str]:
        for ret in self.project.function(fid)["rets"]:
            if not ret.is_yield:
                target = self.graph.function_ref(fid, ret.value)
                if target is not None:
                    return target
        return None

    def with_modes(self, fid: str, with_index: int) -> tuple[tuple[Mode, ...], ...]:
        """Per item of a with-statement, the modes it may enter."""
        key = (fid, with_index)
        cached = self._with_modes.get(key)
        if cached is None:
            record = self.project.function(fid)["withs"][with_index]
            cached = tuple(self.modes_of(fid, item.expr) for item in record.items)
            self._with_modes[key] = cached
        return cached

    def enclosing_modes(self, fid: str, with_index: int) -> list[tuple[Mode, ...]]:
        """Modes of the with-items around a fact, innermost with first, items in entry order reversed."""
        out = []
        for index in enclosing_withs(self.project.function(fid), with_index):
            out.extend(modes for modes in reversed(self.with_modes(fid, index)) if modes)
        return out

    def fixed_inference_state(self, fid: str, with_index: int) -> Optional[str]:
        """INFERENCE or INFERENCE_OFF where the code around a fact fixes it whatever its callers do: the innermost
        with-item or decorator of ``fid`` that may switch inference mode is torch's switch written there, with
        one state and no alternative (not ``inference_mode() if c else no_grad()``, not a helper's, not
        ``inference_mode(flag)``); None where it may come from the callers or the code does not say."""
        fn = self.project.function(fid)
        for index in enclosing_withs(fn, with_index):
            items = fn["withs"][index].items
            for item, modes in reversed(list(zip(items, self.with_modes(fid, index)))):
                if any(m.mode not in (NO_GRAD, ENABLE_GRAD) for m in modes):
                    return _one_state(modes) if item.expr[0] == "c" else None
        modes = tuple(mode for mode, _dec in self.decorator_modes(fid))
        return _one_state(modes) if any(m.mode not in (NO_GRAD, ENABLE_GRAD) for m in modes) else None

    def inference_state(self, fid: str, with_index: int, params: Optional[dict] = None) -> Optional[tuple[str, Mode]]:
        """(INFERENCE or INFERENCE_OFF, why) set locally around a fact, None when it comes from the callers.

        ``params`` maps parameter names to the states callers pass (``run_ctx``)."""
        for modes in self.enclosing_modes(fid, with_index):
            states = [m for m in modes if m.mode in _INFERENCE_STATES]
            for mode in modes:
                if mode.mode == PARAM_MODE and params and mode.param in params:
                    states.extend(params[mode.param])
            if states:
                chosen = next((m for m in states if m.mode == INFERENCE), states[0])
                return chosen.mode, chosen
        for mode, _dec in self.decorator_modes(fid):
            if mode.mode in _INFERENCE_STATES:
                return mode.mode, mode
        return None


def _one_state(modes: tuple[Mode, ...]) -> Optional[str]:
    """The inference state that ``modes`` all switch, each torch's own switch written in place; else None."""
    states = {m.mode for m in modes}
    state = states.pop() if len(states) == 1 else None
    return state if state in _INFERENCE_STATES and all(m.direct for m in modes) else None
