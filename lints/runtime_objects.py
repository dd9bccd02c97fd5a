"""Reading objects without running their code, for the walk: what is an atom, what is not followed, a class's
or an instance's namespace and slots through the type's own descriptors (no property, ``__getattr__`` or
``__repr__`` of theirs runs), which classes are the program's own, dict keys as written in code, a root's
name. Part of ``lints.runtime``."""
from __future__ import annotations

import functools
import sys
import threading
import types
import weakref
from typing import Any, Iterator, Mapping, Optional

import torch

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
