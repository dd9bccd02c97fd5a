"""Runtime check: which inference tensors does an engine keep after warmup, and where was each made?

A tensor created while ``torch.inference_mode()`` is on is an inference tensor; kept (a field, a module
global, a pool, a cache) and later updated in place outside inference mode, it makes torch raise
``RuntimeError: Inplace update to inference tensor outside InferenceMode is not allowed``. The static rules
find most of these; this module finds them in the running process, at startup, before the first request::

    from lints import runtime

    with runtime.watch() as recorder:              # around warmup / autotune / capture
        runner.warmup()
    recorder.assert_none_kept(named={"runner": runner}, modules=[engine_module])

* :class:`watch` records, for every tensor made while inference mode is on, the first frame outside torch
  and this module that made it, and the ``torch.inference_mode`` entries in force (a ``with`` block, an
  ``ExitStack``, a decorator: ``inference_mode.__enter__``/``__exit__`` are wrapped while a watch is open).
  A ``TorchFunctionMode`` sees the Python API; a ``TorchDispatchMode`` also sees tensors that the ATen
  dispatcher makes for callers below the Python API (TorchScript, C++ extensions calling ``at::`` ops).
* :func:`kept_inference_tensors` walks objects and module globals and returns every inference tensor it
  reaches, with its owner path (``runner.layer._ws``, ``engine._POOL['ws']``) and what watch() saw.
* ``GRADMODE_RUNTIME_CHECK=1`` makes a watch given roots print that report to stderr when its block exits
  (``=raise`` also raises); :func:`check_at_startup` is a watch only when the variable is set.

What the walk follows: instance ``__dict__`` and ``__slots__`` (read through the type's own descriptors,
so no ``__getattr__``, property or ``__class__`` override runs), nn.Module parameters, buffers and
submodules, dicts (keys too), lists, tuples, named tuples, deques, sets, dataclass fields (they are
attributes), the data attributes of the objects' own classes (not torch's or the standard library's),
functions' closure cells, defaults and ``__wrapped__``, bound methods, ``functools.partial``, and the
contents of C ``functools.lru_cache``/``cache`` wrappers (through ``gc.get_referents``: their
``cache_info()`` gives counts only). What it does not follow: weak references (they keep nothing),
modules other than those given, functions' ``__globals__``, suspended generators' locals, C++ state (an
extension's static workspace), objects of C types without ``__dict__``. Bounds: ``max_depth``,
``max_objects`` (every value looked at, atoms included) and ``max_items`` per container; a walk cut short
says so in ``notes``.

Not seen by watch() (reported with an unknown allocation): tensors wrapped from memory made outside
torch's allocator (DLPack, ``from_blob`` in C++), tensors made inside an op that is itself being recorded
(the inner allocations of a custom op's implementation), tensors made in another thread (torch's modes
are per thread), and inference mode entered without ``torch.inference_mode`` (``torch._C._InferenceMode``
or C++ guards: the tensor is recorded, the entry is unknown). A tensor with no record of its own that shares
its storage with a recorded one (``as_subclass``, a view made later) gets that one's (``via_storage``).
Watch eager warmup: Dynamo falls back or breaks graphs under Python modes, so ``torch.compile``d code inside
a watch runs differently. The modes cost Python time on every torch call in the block (measured in
gpu_validation/test_runtime_check.py). Importing this module needs torch; ``import lints`` and the static
tool do not.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import itertools
import linecache
import os
import sys
import threading
import types
import warnings
import weakref
from collections import deque
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence, TextIO

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

try:
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover - every torch this project supports has it
    TorchDispatchMode = None  # type: ignore[assignment,misc]

__all__ = [
    "ENV_VAR", "INFERENCE_TENSOR_ERROR", "Allocation", "InferenceModeEntry", "KeptInferenceTensor",
    "KeptInferenceTensors", "KeptInferenceTensorsError", "Recorder", "Site", "assert_no_kept_inference_tensors",
    "check_at_startup", "kept_inference_tensors", "watch",
]

ENV_VAR = "GRADMODE_RUNTIME_CHECK"
INFERENCE_TENSOR_ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"

DEFAULT_MAX_DEPTH = 48
DEFAULT_MAX_OBJECTS = 1_000_000
DEFAULT_MAX_ITEMS = 100_000
CALLER_FRAMES = 3  # user frames kept above the allocation site
MAX_OTHER_PATHS = 3
MAX_NOTES_PER_KIND = 5

# Compared with frames' co_filename, so taken from code objects (or the same import path), never normalised.
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_CONTEXTLIB_FILE = contextlib.ExitStack.enter_context.__code__.co_filename
_TORCH_CONTEXTLIB_FILE = torch.utils._contextlib.context_decorator.__code__.co_filename


# --------------------------------------------------------------------------- what is recorded

class Site(NamedTuple):
    """A source position: ``str()`` gives ``file:line:function`` (the file relative to the cwd when under it)."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{_display_path(self.filename)}:{self.lineno}:{self.function}"


class InferenceModeEntry(NamedTuple):
    """Where inference mode was turned on: ``how`` is ``entered`` (a with block, an ExitStack, an __enter__
    call), ``decorator`` (the site is the decorated function's ``@torch.inference_mode()`` line) or
    ``before watch()`` (it was already on when the watch began; the site is the watch's caller)."""

    site: Site
    how: str

    def __str__(self) -> str:
        return f"{self.site} ({self.how})"


@dataclasses.dataclass(frozen=True)
class Allocation:
    """What watch() saw when an inference tensor was made."""

    site: Optional[Site]  # the first frame outside torch and this module
    callers: tuple  # the next user frames out (Site), innermost first
    inference_mode_entries: tuple  # InferenceModeEntry in force, outermost first (empty: entry not seen)
    seen_by: str  # "torch_function" (the Python API) or "torch_dispatch" (an ATen op called from below it)
    op: str  # the function or ATen op that returned it

    @property
    def inference_mode_entry(self) -> Optional[InferenceModeEntry]:
        """The outermost entry in force: the one that turned inference mode on."""
        return self.inference_mode_entries[0] if self.inference_mode_entries else None


@dataclasses.dataclass(frozen=True)
class KeptInferenceTensor:
    """One inference tensor reachable from the walked objects."""

    path: str
    shape: tuple
    dtype: str
    device: str
    type_name: str  # Tensor, Parameter, or the subclass's name
    allocation: Optional[Allocation]  # None: made where no watch() saw it
    other_paths: tuple = ()  # further owners of the same tensor object (a few)
    via_storage: bool = False  # no record of its own: the allocation is that of a tensor sharing its storage

    @property
    def allocation_site(self) -> Optional[Site]:
        return self.allocation.site if self.allocation else None

    @property
    def inference_mode_entries(self) -> tuple:
        return self.allocation.inference_mode_entries if self.allocation else ()

    @property
    def inference_mode_entry(self) -> Optional[InferenceModeEntry]:
        return self.allocation.inference_mode_entry if self.allocation else None

    def describe(self) -> str:
        shape = ", ".join(str(n) for n in self.shape)
        kind = "" if self.type_name == "Tensor" else f" ({self.type_name})"
        lines = [f"{self.path}: {self.dtype}[{shape}] on {self.device}{kind}"]
        alloc = self.allocation
        if alloc is None:
            lines.append("  allocated where no watch() saw it (made outside watch(), in another thread, or "
                         "wrapped from memory torch did not allocate)")
        else:
            where = str(alloc.site) if alloc.site else "no frame outside torch"
            what = "shares its storage with a tensor made" if self.via_storage else "allocated"
            lines.append(f"  {what} at {where} ({alloc.op}, seen by {alloc.seen_by})")
            if alloc.callers:
                lines.append("    called from " + " <- ".join(str(site) for site in alloc.callers))
            if alloc.inference_mode_entries:
                first, *inner = alloc.inference_mode_entries
                text = f"  inference mode on since {first}"
                if inner:
                    text += "; entered again at " + ", ".join(str(entry) for entry in inner)
                lines.append(text)
            else:
                lines.append("  inference mode entered without torch.inference_mode (torch._C._InferenceMode "
                             "or C++): entry not seen")
        if self.other_paths:
            lines.append("  also reachable as " + ", ".join(self.other_paths))
        return "\n".join(lines)


class KeptInferenceTensors(list):
    """The walk's result: a list of :class:`KeptInferenceTensor`, plus ``notes`` (non-empty when a bound or
    an unreadable object cut the walk short: ``complete`` is then False) and ``objects_examined``."""

    def __init__(self, records: Iterable[KeptInferenceTensor] = (), notes: Sequence[str] = (),
                 complete: bool = True, objects_examined: int = 0):
        super().__init__(records)
        self.notes = list(notes)
        self.complete = complete
        self.objects_examined = objects_examined

    def format(self) -> str:
        if self:
            lines = [f"gradmode runtime check: {len(self)} kept inference tensor(s); an in-place torch update "
                     f"of one outside inference mode raises `RuntimeError: {INFERENCE_TENSOR_ERROR}`:"]
            lines += ["  " + record.describe().replace("\n", "\n  ") for record in self]
        else:
            lines = [f"gradmode runtime check: no kept inference tensors ({self.objects_examined} objects examined)"]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    __str__ = format


class KeptInferenceTensorsError(AssertionError):
    """Raised by :func:`assert_no_kept_inference_tensors`; ``report`` holds the walk's result."""

    def __init__(self, report: KeptInferenceTensors):
        super().__init__(report.format())
        self.report = report


# --------------------------------------------------------------------------- frames

_SKIPPED_FILES: dict = {}  # co_filename -> whether its frames are torch's or this module's


def _skipped(code: types.CodeType) -> bool:
    filename = code.co_filename
    skipped = _SKIPPED_FILES.get(filename)
    if skipped is None:
        skipped = _SKIPPED_FILES[filename] = filename.startswith(_TORCH_DIR) or filename == _THIS_FILE
    return skipped


def _site_of(frame: types.FrameType) -> Site:
    code = frame.f_code
    return Site(code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name))


_THIS_FILE = _site_of.__code__.co_filename


def _user_frames(frame: Optional[types.FrameType], limit: int) -> list:
    sites = []
    while frame is not None and len(sites) < limit:
        if not _skipped(frame.f_code):
            sites.append(_site_of(frame))
        frame = frame.f_back
    return sites


def _display_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        relative = filename
    if not relative.startswith(os.pardir):
        return relative
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --------------------------------------------------------------------------- inference-mode entries

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


# --------------------------------------------------------------------------- recording

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


class Recorder:
    """Where each inference tensor made under its watch blocks came from (weakly keyed by tensor identity).

    The pytest fixture ``inference_tensor_watch`` yields one: ``with recorder.watch(): ...`` records into
    it, ``recorder.assert_none_kept(...)`` checks.
    """

    def __init__(self):
        self.allocations = WeakIdKeyDictionary()
        # storage -> the Allocation of the first recorded tensor on it: the origin of an alias neither mode
        # sees (Tensor.as_subclass, _make_subclass) or of a view made after the watch
        self.storages = WeakIdKeyDictionary()
        self.recorded = 0  # inference tensors recorded, alive or not

    def watch(self, *roots: Any, **options: Any) -> "watch":
        """A :class:`watch` block recording into this recorder."""
        return watch(*roots, recorder=self, **options)

    def allocation_of(self, tensor: torch.Tensor) -> Optional[Allocation]:
        """What watch() saw when this tensor object was made (None: not made under this recorder's watch)."""
        return self.allocations.get(tensor)

    def alive(self) -> list:
        """(tensor, Allocation) for each recorded tensor still alive."""
        return list(self.allocations.items())

    def kept(self, *roots: Any, **options: Any) -> KeptInferenceTensors:
        return kept_inference_tensors(*roots, recorder=self, **options)

    def assert_none_kept(self, *roots: Any, **options: Any) -> KeptInferenceTensors:
        return assert_no_kept_inference_tensors(*roots, recorder=self, **options)

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
    def __init__(self, recorder: Recorder):
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
        def __init__(self, recorder: Recorder):
            super().__init__()
            self.recorder = recorder

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with torch._C.DisableTorchFunction():  # the function modes have had their turn above
                out = func(*args, **kwargs)
                if torch.is_inference_mode_enabled():
                    self.recorder._record(out, args, kwargs, "torch_dispatch", func)
            return out


# --------------------------------------------------------------------------- watch

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


# --------------------------------------------------------------------------- the walk

_ATOMS = frozenset({int, float, complex, bool, str, bytes, bytearray, type(None), type(Ellipsis),
                    type(NotImplemented), range, slice, torch.dtype, torch.device, torch.Size, torch.layout,
                    torch.memory_format})
_NOT_FOLLOWED = (weakref.ReferenceType, weakref.ProxyType, weakref.CallableProxyType,  # they keep nothing
                 types.ModuleType, types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType,
                 types.AsyncGeneratorType, types.BuiltinFunctionType, types.MethodWrapperType,
                 types.WrapperDescriptorType, types.MethodDescriptorType, types.GetSetDescriptorType,
                 types.MemberDescriptorType, types.MappingProxyType, property, threading.Thread)
_LRU_WRAPPER = getattr(functools, "_lru_cache_wrapper", None)  # the C wrapper; the pure-Python one is a closure
_KEY_SEQUENCES = (tuple, list) + ((functools._HashedSeq,) if hasattr(functools, "_HashedSeq") else ())
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "torch", "typing", "typing_extensions"}
_PARTIAL_FIELDS = tuple((name, functools.partial.__dict__[name]) for name in ("func", "args", "keywords")
                        if name in functools.partial.__dict__)
# Read through type's own descriptors, so a metaclass's __getattr__ or property never runs.
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_NAME = type.__dict__["__name__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_FUNCTION_QUALNAME = types.FunctionType.__dict__["__qualname__"]


def _class_dict(cls: type) -> Mapping:
    return _TYPE_DICT.__get__(cls)


def _class_name(cls: type) -> str:
    return _TYPE_QUALNAME.__get__(cls)


def _instance_dict(obj: Any) -> Optional[dict]:
    """``obj.__dict__`` through the type's own descriptor: no property, __getattr__ or proxy of obj runs."""
    for cls in type(obj).__mro__:
        descriptor = _class_dict(cls).get("__dict__")
        if isinstance(descriptor, (types.GetSetDescriptorType, types.MemberDescriptorType)):
            value = descriptor.__get__(obj, type(obj))
            return value if type(value) is dict else None
    return None  # no __dict__, or a class that replaced it with a property: not read


def _slot_values(obj: Any) -> Iterator:
    for cls in type(obj).__mro__:
        namespace = _class_dict(cls)
        slots = namespace.get("__slots__")
        if slots is None:
            continue
        for name in ((slots,) if isinstance(slots, str) else slots):
            if not isinstance(name, str) or name in ("__dict__", "__weakref__"):
                continue
            private = name.startswith("__") and not name.endswith("__")
            stored = f"_{_TYPE_NAME.__get__(cls).lstrip('_')}{name}" if private else name
            descriptor = namespace.get(stored)
            if isinstance(descriptor, types.MemberDescriptorType):
                try:
                    yield name, descriptor.__get__(obj, cls)
                except AttributeError:  # an empty slot
                    continue


def _is_library_class(cls: type) -> bool:
    module = _class_dict(cls).get("__module__")
    return not isinstance(module, str) or module.split(".", 1)[0] in _STDLIB


def _own_classes(cls: type) -> Iterator:
    """The classes of an object whose data attributes may be pools: not object, torch's or the stdlib's."""
    for klass in cls.__mro__:
        if klass is not object and not _is_library_class(klass):
            yield klass, f"{_class_dict(klass).get('__module__')}.{_class_name(klass)}"


def _simple_repr(value: Any, depth: int = 0) -> Optional[str]:
    kind = type(value)
    if kind in (str, int, bool, float, bytes, type(None)):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    if kind in (torch.dtype, torch.device):
        return str(value)
    if depth < 2 and kind in _KEY_SEQUENCES:
        head = list.__getitem__(value, slice(0, 8)) if issubclass(kind, list) else tuple.__getitem__(value, slice(0, 8))
        parts = [_simple_repr(item, depth + 1) for item in head]
        if None in parts:
            return None
        text = ", ".join(parts) + (", ..." if len(value) > 8 else "")
        if kind is tuple:
            return f"({text},)" if len(value) == 1 else f"({text})"
        return f"[{text}]"
    return None


def _label(key: Any, index: int) -> str:
    """A dict key as written in code, for atoms and sequences of atoms only (never a user __repr__)."""
    text = _simple_repr(key)
    return text if text is not None else f"<{_TYPE_NAME.__get__(type(key))} key #{index}>"


def _tensor_summary(tensor: torch.Tensor) -> str:
    try:
        with torch._C.DisableTorchFunctionSubclass():
            return f"{tensor.dtype}{list(tensor.shape)} on {tensor.device}"
    except Exception:
        return f"<{type(tensor).__name__}>"


class _Walk:
    def __init__(self, recorder: Optional[Recorder], max_depth: int, max_objects: int, max_items: int):
        self.allocations = recorder.allocations if recorder is not None else _ALL_ALLOCATIONS
        self.storages = recorder.storages if recorder is not None else _ALL_STORAGES
        self.max_depth, self.max_objects, self.max_items = max_depth, max_objects, max_items
        self.queue: deque = deque()
        self.seen: dict = {}  # id -> object: holding them keeps ids unique for the walk's duration
        self.found: dict = {}  # id(tensor) -> [tensor, path, other paths]
        self.examined = 0
        self.stopped = False
        self.notes: dict = {}  # kind -> [count, first few texts]
        self.complete = True

    def note(self, kind: str, text: str) -> None:
        entry = self.notes.setdefault(kind, [0, []])
        entry[0] += 1
        if len(entry[1]) < MAX_NOTES_PER_KIND:
            entry[1].append(text)
        self.complete = False

    def push(self, obj: Any, path: str, depth: int) -> None:
        self.examined += 1
        if self.examined > self.max_objects:
            if not self.stopped:
                self.stopped = True
                self.note("max_objects", f"stopped after examining {self.max_objects} objects (max_objects): "
                                         "the walk is incomplete; raise max_objects or give narrower roots")
            return
        cls = type(obj)
        if cls in _ATOMS:
            return
        key = id(obj)
        if key in self.seen:
            known = self.found.get(key)
            if known is not None and len(known[2]) < MAX_OTHER_PATHS and path != known[1]:
                known[2].append(path)
            return
        if issubclass(cls, _NOT_FOLLOWED):
            return
        self.seen[key] = obj
        if issubclass(cls, torch.Tensor):
            self.tensor(obj, path)  # even at max_depth: a tensor needs no opening
        if depth >= self.max_depth:
            self.note("max_depth", f"{path}: not opened (max_depth={self.max_depth})")
            return
        self.queue.append((obj, path, depth))

    def tensor(self, tensor: torch.Tensor, path: str) -> None:
        try:
            inference = _is_inference(tensor)
        except Exception as error:
            self.note("unreadable", f"{path}: is_inference() raised {type(error).__name__}")
            return
        if inference:
            self.found[id(tensor)] = [tensor, path, []]

    def run(self) -> None:
        while self.queue and not self.stopped:
            obj, path, depth = self.queue.popleft()
            try:
                for child, child_path in self.children(obj, path):
                    self.push(child, child_path, depth + 1)
                    if self.stopped:
                        break
            except Exception as error:  # a container changed under us, a C object refused: go on
                self.note("unreadable", f"{path}: could not be read ({type(error).__name__}: {error})")

    def head(self, items: Iterable, size: int, path: str) -> list:
        if size > self.max_items:
            self.note("max_items", f"{path}: looked at the first {self.max_items} of {size} items (max_items)")
        return list(itertools.islice(items, self.max_items))

    def children(self, obj: Any, path: str) -> Iterator:
        """(value, path) for what ``obj`` holds; containers through their base type's methods."""
        cls = type(obj)
        if issubclass(cls, torch.Tensor):
            yield from self.attributes(obj, path)  # Python attributes; a wrapper subclass's inner tensors
        elif issubclass(cls, dict):
            for index, (key, value) in enumerate(self.head(dict.items(obj), dict.__len__(obj), path)):
                if type(key) not in _ATOMS:
                    yield key, f"{path}.keys()[{index}]"
                yield value, f"{path}[{_label(key, index)}]"
            yield from self.attributes(obj, path)
        elif issubclass(cls, (list, tuple)):
            base = list if issubclass(cls, list) else tuple
            size = base.__len__(obj)
            if size > self.max_items:
                self.note("max_items", f"{path}: looked at the first {self.max_items} of {size} items (max_items)")
            fields = _class_dict(cls).get("_fields") if base is tuple and cls is not tuple else None
            fields = fields if isinstance(fields, tuple) else ()
            for index, item in enumerate(base.__getitem__(obj, slice(0, self.max_items))):
                name = fields[index] if index < len(fields) else None
                yield item, (f"{path}.{name}" if isinstance(name, str) else f"{path}[{index}]")
            yield from self.attributes(obj, path)
        elif issubclass(cls, (set, frozenset, deque)):
            base = deque if issubclass(cls, deque) else (set if issubclass(cls, set) else frozenset)
            for index, item in enumerate(self.head(base.__iter__(obj), base.__len__(obj), path)):
                yield item, (f"{path}[{index}]" if base is deque else f"{path}{{item {index}}}")
            yield from self.attributes(obj, path)
        elif issubclass(cls, type):
            yield from self.class_attributes(obj, path)
        elif _LRU_WRAPPER is not None and issubclass(cls, _LRU_WRAPPER):
            yield from self.lru_cache(obj, path)
            yield from self.attributes(obj, path)
        elif issubclass(cls, types.FunctionType):
            yield from self.function(obj, path)
        elif issubclass(cls, types.MethodType):
            yield obj.__func__, f"{path}.__func__"
            yield obj.__self__, f"{path}.__self__"
        elif issubclass(cls, (staticmethod, classmethod)):
            yield obj.__func__, f"{path}.__func__"
        elif issubclass(cls, torch.nn.Module):
            yield from self.module(obj, path)
        else:
            if issubclass(cls, functools.partial):
                for name, descriptor in _PARTIAL_FIELDS:
                    yield descriptor.__get__(obj, cls), f"{path}.{name}"
            yield from self.attributes(obj, path)
            yield from _own_classes(cls)  # class-level pools and caches

    def attributes(self, obj: Any, path: str) -> Iterator:
        namespace = _instance_dict(obj)
        if namespace:
            for index, (name, value) in enumerate(self.head(dict.items(namespace), len(namespace), path)):
                yield value, (f"{path}.{name}" if isinstance(name, str) else f"{path}.__dict__[{_label(name, index)}]")
        for name, value in _slot_values(obj):
            yield value, f"{path}.{name}"

    def class_attributes(self, cls: type, path: str) -> Iterator:
        if _is_library_class(cls):
            return
        for name, value in list(_class_dict(cls).items()):
            if not isinstance(name, str) or (name.startswith("__") and name.endswith("__")):
                continue
            kind = type(value)
            if kind in _ATOMS or issubclass(kind, (property, types.FunctionType)):
                continue  # methods are code, not state; a property would have to run
            if issubclass(kind, (staticmethod, classmethod)):
                value = value.__func__
                if _LRU_WRAPPER is None or not issubclass(type(value), _LRU_WRAPPER):
                    continue
            yield value, f"{path}.{name}"

    def function(self, fn: types.FunctionType, path: str) -> Iterator:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                yield cell.cell_contents, f"{path}.<closure {name}>"
            except ValueError:  # an empty cell
                continue
        for index, value in enumerate(fn.__defaults__ or ()):
            yield value, f"{path}.__defaults__[{index}]"
        for name, value in (fn.__kwdefaults__ or {}).items():
            yield value, f"{path}.__kwdefaults__[{name!r}]"
        yield from self.attributes(fn, path)  # function attributes (fn.cache = {}) and __wrapped__

    def lru_cache(self, wrapper: Any, path: str) -> Iterator:
        """The keys and results a C lru_cache/cache wrapper holds (its gc traverse hands them out)."""
        own_dict = _instance_dict(wrapper)
        wrapped = own_dict.get("__wrapped__") if own_dict else None
        referents = [r for r in gc.get_referents(wrapper)
                     if not isinstance(r, type) and r is not own_dict and r is not wrapped and type(r) is not object]
        key_labels: dict = {}
        for cache in (r for r in referents if type(r) is dict):
            for index, (key, value) in enumerate(self.head(dict.items(cache), len(cache), path)):
                if type(value).__name__ == "_lru_list_elem":  # a bounded cache: results come as referents
                    key_labels[id(key)] = _label(key, index)
                    continue
                if type(key) not in _ATOMS:
                    yield key, f"{path}.cache.keys()[{index}]"
                yield value, f"{path}.cache[{_label(key, index)}]"
        current = "?"
        for index, item in enumerate(r for r in referents if type(r) is not dict):
            if id(item) in key_labels:  # each result follows its key
                current = key_labels[id(item)]
                if type(item) not in _ATOMS:
                    yield item, f"{path}.cache.keys()[{index}]"
            else:
                yield item, f"{path}.cache[{current}]"

    def module(self, module: torch.nn.Module, path: str) -> Iterator:
        namespace = _instance_dict(module) or {}
        for store in ("_parameters", "_buffers"):
            for name, value in dict.items(namespace.get(store) or {}):
                if value is not None:
                    yield value, f"{path}.{name}"
        numbered = issubclass(type(module), (torch.nn.ModuleList, torch.nn.Sequential))
        keyed = issubclass(type(module), torch.nn.ModuleDict)
        for name, child in dict.items(namespace.get("_modules") or {}):
            if child is None:
                continue
            if numbered and isinstance(name, str) and name.isdigit():
                yield child, f"{path}[{name}]"
            else:
                yield child, (f"{path}[{name!r}]" if keyed else f"{path}.{name}")
        for name, value in dict.items(namespace):
            if name not in ("_parameters", "_buffers", "_modules"):
                yield value, f"{path}.{name}"
        for name, value in _slot_values(module):
            yield value, f"{path}.{name}"
        yield from _own_classes(type(module))

    def module_globals(self, module: types.ModuleType, name: str) -> None:
        self.seen[id(module)] = module
        for key, value in list(dict.items(_instance_dict(module) or {})):
            if isinstance(key, str) and not (key.startswith("__") and key.endswith("__")):
                self.push(value, f"{name}.{key}", 1)

    def result(self) -> KeptInferenceTensors:
        records = []
        for tensor, path, others in self.found.values():
            try:
                with torch._C.DisableTorchFunctionSubclass():
                    shape, dtype, device = tuple(tensor.shape), str(tensor.dtype), str(tensor.device)
            except Exception:
                shape, dtype, device = (), "?", "?"
            allocation, via_storage = self.allocations.get(tensor), False
            if allocation is None:
                storage = _storage_of(tensor)
                allocation = self.storages.get(storage) if storage is not None else None
                via_storage = allocation is not None
            records.append(KeptInferenceTensor(path=path, shape=shape, dtype=dtype, device=device,
                                               type_name=_TYPE_NAME.__get__(type(tensor)), allocation=allocation,
                                               other_paths=tuple(others), via_storage=via_storage))
        notes = []
        for kind, (count, examples) in self.notes.items():
            notes += examples
            if count > len(examples):
                notes.append(f"... and {count - len(examples)} more like the above ({kind})")
        return KeptInferenceTensors(records, notes, self.complete, min(self.examined, self.max_objects))


def _root_name(root: Any) -> str:
    if issubclass(type(root), types.ModuleType):
        name = (_instance_dict(root) or {}).get("__name__")
        return name if isinstance(name, str) else "<module>"
    if issubclass(type(root), type):
        return _class_name(root)
    if issubclass(type(root), types.FunctionType):
        return _FUNCTION_QUALNAME.__get__(root)
    name = (_instance_dict(root) or {}).get("__qualname__") if _LRU_WRAPPER and issubclass(type(root), _LRU_WRAPPER) \
        else None  # functools.wraps copied the function's name there
    return name if isinstance(name, str) else _TYPE_NAME.__get__(type(root))


def kept_inference_tensors(*roots: Any, modules: Iterable[Any] = (), named: Optional[Mapping[str, Any]] = None,
                           recorder: Optional[Recorder] = None, max_depth: int = DEFAULT_MAX_DEPTH,
                           max_objects: int = DEFAULT_MAX_OBJECTS,
                           max_items: int = DEFAULT_MAX_ITEMS) -> KeptInferenceTensors:
    """Every inference tensor reachable from ``roots`` (paths start at the type's name), ``named`` roots
    (``{"runner": runner}``: paths start at the given name) and the globals of ``modules`` (module objects
    or names in ``sys.modules``), breadth first, so each is reported at its shortest path. Allocation sites
    come from ``recorder`` (default: every watch() so far). Objects are never asked for attributes: no
    property, ``__getattr__`` or ``__repr__`` of theirs runs."""
    walk = _Walk(recorder, max_depth, max_objects, max_items)
    for root in roots:
        walk.push(root, _root_name(root), 0)
    for name, root in (named or {}).items():
        walk.push(root, name, 0)
    for module in modules:
        if isinstance(module, str):
            found = sys.modules.get(module)
            if found is None:
                walk.note("modules", f"module {module!r} is not imported: not walked")
                continue
            module = found
        if not issubclass(type(module), types.ModuleType):
            kind = _TYPE_NAME.__get__(type(module))
            walk.note("modules", f"modules=: {'an' if kind[:1] in 'aeiou' else 'a'} {kind} is not a module: not walked")
            continue
        walk.module_globals(module, _root_name(module))
    walk.run()
    return walk.result()


def assert_no_kept_inference_tensors(*roots: Any, modules: Iterable[Any] = (),
                                     named: Optional[Mapping[str, Any]] = None,
                                     recorder: Optional[Recorder] = None, **limits: Any) -> KeptInferenceTensors:
    """Raise :class:`KeptInferenceTensorsError` (an AssertionError whose message is the report) if the walk
    finds a kept inference tensor; warn if the walk was cut short and found none. Returns the report."""
    report = kept_inference_tensors(*roots, modules=modules, named=named, recorder=recorder, **limits)
    if report:
        raise KeptInferenceTensorsError(report)
    if not report.complete:
        notes = "\n".join(report.notes)
        warnings.warn(f"gradmode runtime check: no kept inference tensors found, but the walk was incomplete:\n{notes}",
                      RuntimeWarning, stacklevel=2)
    return report
