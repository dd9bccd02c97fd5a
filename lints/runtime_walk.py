"""The walk of kept objects for inference tensors: from roots, named roots and module globals, breadth
first (each tensor at its shortest path), within bounds, each found tensor with what watch() saw when it was
made. Part of ``lints.runtime`` (its docstring says what is followed and what is not)."""
from __future__ import annotations

import functools
import gc
import itertools
import sys
import types
import warnings
from collections import deque
from typing import Any, Iterable, Iterator, Mapping, Optional

import torch

from .runtime_objects import (_ATOMS, _LRU_WRAPPER, _NOT_FOLLOWED, _PARTIAL_FIELDS, _TYPE_NAME, _class_dict,
                              _instance_dict, _is_library_class, _label, _own_classes, _root_name, _slot_values)
from .runtime_records import KeptInferenceTensor, KeptInferenceTensors, KeptInferenceTensorsError
from .runtime_recording import _ALL_ALLOCATIONS, _ALL_STORAGES, Recording, _is_inference, _storage_of

DEFAULT_MAX_DEPTH = 48
DEFAULT_MAX_OBJECTS = 1_000_000
DEFAULT_MAX_ITEMS = 100_000
MAX_OTHER_PATHS = 3
MAX_NOTES_PER_KIND = 5


class _Walk:
    def __init__(self, recorder: Optional[Recording], max_depth: int, max_objects: int, max_items: int):
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


def kept_inference_tensors(*roots: Any, modules: Iterable[Any] = (), named: Optional[Mapping[str, Any]] = None,
                           recorder: Optional[Recording] = None, max_depth: int = DEFAULT_MAX_DEPTH,
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
                                     recorder: Optional[Recording] = None, **limits: Any) -> KeptInferenceTensors:
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
