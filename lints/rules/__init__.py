"""The rules: one class per module of this package, discovered (not registered by hand)."""
from __future__ import annotations

import importlib
import pkgutil

from ..rule import Rule


def _discover() -> dict[str, type[Rule]]:
    found: dict[str, type[Rule]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.CODE:
                if value.CODE in found and found[value.CODE] is not value:
                    raise RuntimeError(f"two rules claim {value.CODE}")
                found[value.CODE] = value
    return dict(sorted(found.items()))


ALL_RULES: dict[str, type[Rule]] = _discover()
OPT_IN_CODES = frozenset(code for code, rule in ALL_RULES.items() if not rule.DEFAULT_ENABLED)
