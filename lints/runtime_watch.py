"""The watch: a block that records every inference tensor made in it (``watch``, yielding a ``Recorder``),
its report on exit when asked or when ``GRADMODE_RUNTIME_CHECK`` is set, and ``check_at_startup`` (a watch
only when that variable is set). Part of ``lints.runtime``."""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterable, Mapping, Optional, TextIO

import torch

from .runtime_entries import _entries_in_force, _entry_stack, _install_entry_hooks, _remove_entry_hooks
from .runtime_frames import _user_frames
from .runtime_records import InferenceModeEntry, KeptInferenceTensors, KeptInferenceTensorsError
from .runtime_recording import Recording, TorchDispatchMode, _DispatchRecorder, _FunctionRecorder
from .runtime_walk import assert_no_kept_inference_tensors, kept_inference_tensors

ENV_VAR = "GRADMODE_RUNTIME_CHECK"


class Recorder(Recording):
    """Where each inference tensor made under its watch blocks came from (weakly keyed by tensor identity).

    The pytest fixture ``inference_tensor_watch`` yields one: ``with recorder.watch(): ...`` records into
    it, ``recorder.assert_none_kept(...)`` checks.
    """

    def watch(self, *roots: Any, **options: Any) -> "watch":
        """A :class:`watch` block recording into this recorder."""
        return watch(*roots, recorder=self, **options)

    def kept(self, *roots: Any, **options: Any) -> KeptInferenceTensors:
        return kept_inference_tensors(*roots, recorder=self, **options)

    def assert_none_kept(self, *roots: Any, **options: Any) -> KeptInferenceTensors:
        return assert_no_kept_inference_tensors(*roots, recorder=self, **options)


def _env_setting() -> str:
    return os.environ.get(ENV_VAR, "").strip().lower()


class watch:
    """Context manager: record every inference tensor made in its block, with where and under which entry.

    ``with watch() as recorder:`` yields a :class:`Recorder` (``recorder=`` shares one across blocks).
    Roots (objects, ``named={"runner": runner}``, ``modules=[...]``) are what the exit report walks: with
    ``report=True``, or ``GRADMODE_RUNTIME_CHECK=1`` in the environment (``=raise``: also raise
    :class:`KeptInferenceTensorsError` when the block itself did not raise), the exit prints the kept
    inference tensors to ``stream`` (stderr); given no roots, the recorded tensors still alive. Exceptions
    in the block propagate; the modes and the inference_mode hooks are removed on exit. ``dispatch=False``
    leaves out the TorchDispatchMode pass (cheaper; it sees TorchScript and C++ extension allocations).
    """

    def __init__(self, *roots: Any, modules: Iterable[Any] = (), named: Optional[Mapping[str, Any]] = None,
                 recorder: Optional[Recorder] = None, dispatch: bool = True, report: Optional[bool] = None,
                 stream: Optional[TextIO] = None):
        self.roots = roots
        self.modules = tuple(modules)
        self.named = dict(named or {})
        self.recorder = recorder if recorder is not None else Recorder()
        self.dispatch = dispatch and TorchDispatchMode is not None
        self.report = report
        self.stream = stream
        self._modes: list = []
        self._before_entry: Optional[list] = None
        self._active = False

    def __enter__(self) -> Recorder:
        if self._active:
            raise RuntimeError("this watch() is already active; nest a new watch() instead")
        _install_entry_hooks()
        self._active = True
        try:
            if torch.is_inference_mode_enabled() and not _entries_in_force():
                sites = _user_frames(sys._getframe(1), 1)
                if sites:
                    self._before_entry = [self, True, InferenceModeEntry(sites[0], "before watch()")]
                    _entry_stack().append(self._before_entry)
            modes = [_FunctionRecorder(self.recorder)]
            if self.dispatch:
                modes.append(_DispatchRecorder(self.recorder))
            for mode in modes:
                mode.__enter__()
                self._modes.append(mode)
        except BaseException:
            self._close()
            raise
        return self.recorder

    def _close(self) -> None:
        try:
            while self._modes:
                self._modes.pop().__exit__(None, None, None)
        finally:
            if self._before_entry is not None:
                stack = _entry_stack()
                if self._before_entry in stack:
                    stack.remove(self._before_entry)
                self._before_entry = None
            self._active = False
            _remove_entry_hooks()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._close()
        setting = _env_setting()
        wanted = self.report if self.report is not None else setting in ("1", "true", "yes", "on", "raise")
        if wanted:
            report = self._report()
            if report is not None and report and setting == "raise" and exc_type is None:
                raise KeptInferenceTensorsError(report)
        return False  # exceptions in the block propagate

    def _report(self) -> Optional[KeptInferenceTensors]:
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            if self.roots or self.modules or self.named:
                report = kept_inference_tensors(*self.roots, modules=self.modules, named=self.named,
                                                recorder=self.recorder)
                text = report.format()
            else:
                report = None
                alive = self.recorder.alive()
                lines = [f"gradmode runtime check: {len(alive)} inference tensor(s) made under watch() still "
                         f"alive (give watch() roots to see which are kept, and where)"]
                for tensor, allocation in alive:
                    site = allocation.site or "no frame outside torch"
                    lines.append(f"  {_tensor_summary(tensor)} allocated at {site} ({allocation.op}); "
                                 "inference mode on since "
                                 f"{allocation.inference_mode_entry or 'an entry not seen'}")
                text = "\n".join(lines)
        except Exception as error:  # the check must never take the engine down with it
            text = f"gradmode runtime check failed: {type(error).__name__}: {error}"
            report = None
        print(text, file=stream, flush=True)
        return report


def check_at_startup(*roots: Any, **options: Any) -> contextlib.AbstractContextManager:
    """A reporting :class:`watch` when ``GRADMODE_RUNTIME_CHECK`` is set, else a no-op (no overhead)."""
    if _env_setting() in ("", "0", "false", "no", "off"):
        return contextlib.nullcontext()
    return watch(*roots, **options)


def _tensor_summary(tensor: torch.Tensor) -> str:
    try:
        with torch._C.DisableTorchFunctionSubclass():
            return f"{tensor.dtype}{list(tensor.shape)} on {tensor.device}"
    except Exception:
        return f"<{type(tensor).__name__}>"
