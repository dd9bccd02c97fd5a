"""The one classifier of warmup / autotune / CUDA-graph-capture paths.

A function is on such a path when its name, its class or its module matches
the configured patterns, or when it is reached from one within the same module
(nested defs and closures such as ``run_once``, plain calls, ``self.method()``).
Each classified function carries the reason, so every finding can say why.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
from collections import deque
from typing import Iterable, Optional

from . import names
from .config import Config
from .index import CallSite, FunctionInfo, ModuleIndex


@dataclasses.dataclass(frozen=True)
class PathReason:
    text: str  # e.g. "called from `capture()` at line 88"

    def __str__(self) -> str:
        return self.text


def _match(name: str, patterns: Iterable[str]) -> Optional[str]:
    lowered = name.lower()
    return next((p for p in patterns if fnmatch.fnmatchcase(lowered, p.lower())), None)


def name_is_warm_path(name: str, config: Config) -> Optional[str]:
    """The pattern a function name matches, if any (used for unresolved callees too)."""
    return _match(name, config.path_patterns)


@functools.lru_cache(maxsize=16)
def _identifier_matcher(patterns: tuple[str, ...]) -> "re.Pattern[str]":
    return re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in patterns) or r"(?!)")


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def text_may_have_warm_path(text: str, path: str, config: Config) -> bool:
    """False only when no function of ``text`` can be classified (nor a call to one found):
    no identifier matches the name or class patterns and the module glob does not match."""
    if module_matches(path, config):
        return True
    matcher = _identifier_matcher(tuple(config.path_patterns) + tuple(config.class_patterns))
    return any(matcher.match(name.lower()) for name in set(_IDENTIFIER.findall(text)))


def module_matches(path: str, config: Config) -> Optional[str]:
    normalized = path.replace("\\", "/")
    return next((g for g in config.module_globs if fnmatch.fnmatch(normalized, g)
                 or fnmatch.fnmatch(normalized, f"*/{g}")), None)


def resolve_call(index: ModuleIndex, call: CallSite, loose: bool = False) -> list[FunctionInfo]:
    """Functions of this module that ``call`` may run (best effort, no type inference).

    ``loose`` also follows ``obj.method()`` on other objects when exactly one
    class of the module defines ``method`` (used for buffer reachability only).
    """
    caller = call.function
    if call.receiver is None and call.callee is not None and not call.qualified:
        # Bare name: innermost enclosing def that defines it, else module level.
        scope: Optional[FunctionInfo] = caller
        while scope is not None:
            if call.callee in scope.nested:
                return [scope.nested[call.callee]]
            scope = scope.parent
        target = index.top.nested.get(call.callee)
        if target is not None:
            return [target]
        cls = index.classes.get(call.callee)  # `Runner()` runs __init__
        return [cls.methods["__init__"]] if cls and "__init__" in cls.methods else []
    if call.receiver in ("self", "cls") and call.callee is not None:
        owner = _enclosing_class(caller)
        found = _method_in_hierarchy(index, owner.name, call.callee) if owner else None
        return [found] if found else []
    if loose and call.callee is not None and not call.qualified:
        # `self.moe.forward(x)`: follow it only when one class here defines the method.
        owners = [cls.methods[call.callee] for cls in index.classes.values() if call.callee in cls.methods]
        if len(owners) == 1:
            return owners
    return []


def _enclosing_class(fn: FunctionInfo):
    while fn is not None and fn.cls is None:
        fn = fn.parent
    return fn.cls if fn is not None else None


def _method_in_hierarchy(index: ModuleIndex, class_name: str, method: str, seen: Optional[set] = None):
    seen = seen or set()
    if class_name in seen or class_name not in index.classes:
        return None
    seen.add(class_name)
    cls = index.classes[class_name]
    if method in cls.methods:
        return cls.methods[method]
    for base in cls.bases:
        found = _method_in_hierarchy(index, base.rsplit(".", 1)[-1], method, seen)
        if found:
            return found
    return None


def classify_paths(index: ModuleIndex, config: Config) -> dict[FunctionInfo, PathReason]:
    """Every function of the module on a warmup/autotune/capture path, with why."""
    reasons: dict[FunctionInfo, PathReason] = {}
    module_glob = module_matches(index.path, config)
    for fn in index.functions:
        if fn.node is None:
            continue
        if module_glob:
            reasons[fn] = PathReason(f"module matches `{module_glob}`")
        elif (pattern := _match(fn.name, config.path_patterns)) is not None:
            kind = "context-manager factory" if fn.decorated_with(names.CONTEXTMANAGER_DECORATORS) else "name"
            reasons[fn] = PathReason(f"{kind} `{fn.name}` matches `{pattern}`")
        elif fn.cls is not None and (pattern := _match(fn.cls.name, config.class_patterns)) is not None:
            reasons[fn] = PathReason(f"method of `{fn.cls.name}` (matches `{pattern}`)")
    queue = deque(sorted(reasons, key=lambda f: (f.line, f.col)))
    while queue:
        fn = queue.popleft()
        for nested in fn.nested.values():
            if nested not in reasons:
                reasons[nested] = PathReason(f"defined inside {fn.label} at line {fn.line}")
                queue.append(nested)
        for call in fn.calls:
            for target in resolve_call(index, call):
                if target not in reasons:
                    reasons[target] = PathReason(f"called from {fn.label} at line {call.line}")
                    queue.append(target)
    return reasons


def reachable_from(index: ModuleIndex, calls: Iterable[CallSite]) -> dict[FunctionInfo, int]:
    """Functions transitively run by ``calls`` (each with the line of the first call)."""
    seen: dict[FunctionInfo, int] = {}
    queue = deque((call, call.line) for call in calls)
    while queue:
        call, origin_line = queue.popleft()
        for target in resolve_call(index, call, loose=True):
            if target not in seen:
                seen[target] = origin_line
                queue.extend((c, origin_line) for c in target.calls)
                for nested in target.nested.values():
                    queue.extend((c, origin_line) for c in nested.calls)
    return seen
