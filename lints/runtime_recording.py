"""Recording where each inference tensor is made: the torch modes (a ``TorchFunctionMode``, a
``TorchDispatchMode``) that see every tensor made under inference mode, and the weakly keyed tables they fill
(``Recording``, and the tables of every watch so far). Part of ``lints.runtime``."""
from __future__ import annotations

import sys
from typing import Any, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from .runtime_entries import _entries_in_force
from .runtime_frames import _user_frames
from .runtime_records import Allocation

try:
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover - every torch this project supports has it
    TorchDispatchMode = None  # type: ignore[assignment,misc]

CALLER_FRAMES = 3  # user frames kept above the allocation site

_ALL_ALLOCATIONS = WeakIdKeyDictionary()  # every watch's records, for walks given no recorder
_ALL_STORAGES = WeakIdKeyDictionary()


def _remember(table: WeakIdKeyDictionary, key: Any, allocation: "Allocation", replaced: Optional["Allocation"]) -> None:
    """First record wins, except that the Python-level record replaces the dispatch-level one of the same call."""
    current = table.get(key)
    if current is None or current is replaced:
        table[key] = allocation


def _storage_of(tensor: torch.Tensor) -> Any:
    try:
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.untyped_storage(tensor)
    except Exception:  # no storage: sparse, nested, a wrapper subclass
        return None


def _tensors_in(value: Any, depth: int = 2) -> list:
    kind = type(value)
    if issubclass(kind, torch.Tensor):
        return [value]
    if depth and (kind is list or kind is tuple or (issubclass(kind, tuple) and kind.__module__ != "builtins")):
        return [t for item in value for t in _tensors_in(item, depth - 1)]  # torch.return_types are tuples
    if depth and kind is dict:
        return [t for item in value.values() for t in _tensors_in(item, depth - 1)]
    return []


def _is_inference(tensor: torch.Tensor) -> bool:
    if type(tensor) in (torch.Tensor, torch.nn.Parameter):
        return tensor.is_inference()
    with torch._C.DisableTorchFunctionSubclass():  # a subclass's __torch_function__ is user code
        return bool(torch.Tensor.is_inference(tensor))


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) and not isinstance(func, torch._ops.OpOverload) else str(func)


class Recording:
    """Where each inference tensor made under its watch blocks came from (weakly keyed by tensor identity);
    ``lints.runtime.Recorder`` adds the watch and the checks."""

    def __init__(self):
        self.allocations = WeakIdKeyDictionary()
        # storage -> the Allocation of the first recorded tensor on it: the origin of an alias neither mode
        # sees (Tensor.as_subclass, _make_subclass) or of a view made after the watch
        self.storages = WeakIdKeyDictionary()
        self.recorded = 0  # inference tensors recorded, alive or not

    def allocation_of(self, tensor: torch.Tensor) -> Optional[Allocation]:
        """What watch() saw when this tensor object was made (None: not made under this recorder's watch)."""
        return self.allocations.get(tensor)

    def alive(self) -> list:
        """(tensor, Allocation) for each recorded tensor still alive."""
        return list(self.allocations.items())

    def _record(self, out: Any, args: tuple, kwargs: dict, seen_by: str, func: Any) -> None:
        outputs = _tensors_in(out)
        if not outputs:
            return
        inputs = {id(t) for t in _tensors_in(args) + _tensors_in(kwargs)}  # in-place and out= return these
        allocation = None
        for tensor in outputs:
            if id(tensor) in inputs or not _is_inference(tensor):
                continue
            known = self.allocations.get(tensor)
            # The dispatch mode records first (it runs inside the Python call); the Python-level record is
            # the one to keep: it names the function the caller called.
            if known is not None and (known.seen_by == "torch_function" or seen_by == "torch_dispatch"):
                continue
            if allocation is None:
                sites = _user_frames(sys._getframe(1), 1 + CALLER_FRAMES)
                allocation = Allocation(site=sites[0] if sites else None, callers=tuple(sites[1:]),
                                        inference_mode_entries=_entries_in_force(), seen_by=seen_by,
                                        op=_op_name(func))
            if known is None:
                self.recorded += 1
            self.allocations[tensor] = allocation
            _remember(_ALL_ALLOCATIONS, tensor, allocation, known)
            storage = _storage_of(tensor)
            if storage is not None:
                _remember(self.storages, storage, allocation, known)
                _remember(_ALL_STORAGES, storage, allocation, known)


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, recorder: Recording):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if torch.is_inference_mode_enabled():
            with torch._C.DisableTorchFunction():  # our own is_inference() calls are not the program's
                self.recorder._record(out, args, kwargs, "torch_function", func)
        return out


if TorchDispatchMode is not None:
    class _DispatchRecorder(TorchDispatchMode):
        def __init__(self, recorder: Recording):
            super().__init__()
            self.recorder = recorder

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with torch._C.DisableTorchFunction():  # the function modes have had their turn above
                out = func(*args, **kwargs)
                if torch.is_inference_mode_enabled():
                    self.recorder._record(out, args, kwargs, "torch_dispatch", func)
            return out
