"""Where inference mode was turned on: while a watch is open, ``torch.inference_mode.__enter__``/``__exit__``
are wrapped to keep, per thread, the entries in force (a ``with`` block, an ``ExitStack``, a decorator's
line). Part of ``lints.runtime``."""
from __future__ import annotations

import contextlib
import linecache
import sys
import threading
import types
from typing import Any, Optional

import torch

from .runtime_frames import _site_of, _skipped
from .runtime_records import InferenceModeEntry, Site

_CONTEXTLIB_FILE = contextlib.ExitStack.enter_context.__code__.co_filename
_TORCH_CONTEXTLIB_FILE = torch.utils._contextlib.context_decorator.__code__.co_filename


class _EntryState(threading.local):
    def __init__(self):
        self.stack: list = []  # [context object, mode, InferenceModeEntry or None]
        self.generation = -1


_ENTRY_STATE = _EntryState()
_HOOKS_LOCK = threading.Lock()
_HOOKS = {"users": 0, "generation": 0, "enter": None, "exit": None}
_INFERENCE_MODE = torch.autograd.grad_mode.inference_mode


def _entry_stack() -> list:
    state = _ENTRY_STATE
    if state.generation != _HOOKS["generation"]:  # hooks were removed since: entries pushed then are stale
        state.stack = []
        state.generation = _HOOKS["generation"]
    return state.stack


def _decorated_site(func: Any) -> Optional[Site]:
    """The ``@torch.inference_mode()`` line above the function that torch's decorator wraps."""
    for _ in range(16):  # other decorators made with functools.wraps lie between
        inner = getattr(func, "__wrapped__", None) if isinstance(func, types.FunctionType) else None
        if inner is None:
            break
        func = inner
    code = getattr(func, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    lineno = code.co_firstlineno  # the first decorator's line
    for offset in range(32):
        text = linecache.getline(code.co_filename, code.co_firstlineno + offset)
        if not text or text.lstrip().startswith(("def ", "async def ")):
            break
        if "inference_mode" in text:
            lineno = code.co_firstlineno + offset
            break
    return Site(code.co_filename, lineno, getattr(code, "co_qualname", code.co_name))


def _entry_of(frame: Optional[types.FrameType]) -> Optional[InferenceModeEntry]:
    while frame is not None:
        code = frame.f_code
        if code.co_filename == _TORCH_CONTEXTLIB_FILE and code.co_name in ("decorate_context", "generator_context"):
            site = _decorated_site(frame.f_locals.get("func"))
            if site is not None:
                return InferenceModeEntry(site, "decorator")
        if not _skipped(code) and code.co_filename != _CONTEXTLIB_FILE:  # ExitStack/@contextmanager plumbing
            return InferenceModeEntry(_site_of(frame), "entered")
        frame = frame.f_back
    return None


def _install_entry_hooks() -> None:
    with _HOOKS_LOCK:
        _HOOKS["users"] += 1
        if _HOOKS["users"] > 1:
            return
        original_enter, original_exit = _INFERENCE_MODE.__enter__, _INFERENCE_MODE.__exit__

        def __enter__(self):  # noqa: N807 - replaces the special method for the watch's duration
            entry = _entry_of(sys._getframe(1)) if self.mode else None
            result = original_enter(self)
            _entry_stack().append([self, bool(self.mode), entry])
            return result

        def __exit__(self, *exc_info):  # noqa: N807
            try:
                return original_exit(self, *exc_info)
            finally:
                stack = _entry_stack()
                for index in range(len(stack) - 1, -1, -1):
                    if stack[index][0] is self:
                        del stack[index]
                        break

        _HOOKS.update(enter=(original_enter, __enter__), exit=(original_exit, __exit__))
        _INFERENCE_MODE.__enter__, _INFERENCE_MODE.__exit__ = __enter__, __exit__


def _remove_entry_hooks() -> None:
    with _HOOKS_LOCK:
        _HOOKS["users"] -= 1
        if _HOOKS["users"] > 0:
            return
        for name in ("enter", "exit"):
            original, ours = _HOOKS[name]
            if _INFERENCE_MODE.__dict__.get(f"__{name}__") is ours:  # someone else's wrapper stays
                setattr(_INFERENCE_MODE, f"__{name}__", original)
        _HOOKS["generation"] += 1


def _entries_in_force() -> tuple:
    in_force: list = []
    for _, mode, entry in _entry_stack():
        if not mode:
            in_force.clear()  # inference_mode(False) turned it off: what came before is not why
        elif entry is not None:
            in_force.append(entry)
    return tuple(in_force)
