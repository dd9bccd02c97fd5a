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

# This module is the public entry; the parts, one job each, are lints/runtime_*.py: records (what is reported
# and its text), frames (which frames are the program's), entries (the inference_mode hooks), recording (the
# torch modes and their tables), objects (reading objects without running their code), walk (the scan of
# kept objects), watch (the watch block, its exit report, the GRADMODE_RUNTIME_CHECK startup hook).
from .runtime_entries import _HOOKS, _INFERENCE_MODE, _entry_stack  # noqa: F401 - the tests look at the hooks
from .runtime_records import (INFERENCE_TENSOR_ERROR, Allocation, InferenceModeEntry, KeptInferenceTensor,
                              KeptInferenceTensors, KeptInferenceTensorsError, Site)
from .runtime_recording import CALLER_FRAMES  # noqa: F401
from .runtime_walk import (DEFAULT_MAX_DEPTH, DEFAULT_MAX_ITEMS, DEFAULT_MAX_OBJECTS,  # noqa: F401
                           MAX_NOTES_PER_KIND, MAX_OTHER_PATHS, assert_no_kept_inference_tensors,
                           kept_inference_tensors)
from .runtime_watch import ENV_VAR, Recorder, check_at_startup, watch

__all__ = [
    "ENV_VAR", "INFERENCE_TENSOR_ERROR", "Allocation", "InferenceModeEntry", "KeptInferenceTensor",
    "KeptInferenceTensors", "KeptInferenceTensorsError", "Recorder", "Site", "assert_no_kept_inference_tensors",
    "check_at_startup", "kept_inference_tensors", "watch",
]

# Named where they are documented and imported from (tracebacks, reprs and pickles say `lints.runtime.X`).
for _public in (Allocation, InferenceModeEntry, KeptInferenceTensor, KeptInferenceTensors, KeptInferenceTensorsError,
                Recorder, Site, watch):
    _public.__module__ = __name__
del _public
