"""Plain data passed between the engine, the outputs and the fixer."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # keep `python -m lints` on a warm cache free of the libcst import
    import libcst as cst


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """One reported problem. Picklable (crosses process boundaries and the cache)."""

    path: str
    line: int
    col: int  # 0-based, as flake8 reports it
    code: str
    message: str
    severity: str = "warning"  # "warning" | "error"
    fixable: str = ""  # "" | "safe" | "unsafe"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class FileError:
    """A file that could not be linted or fixed, with a one-line reason."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: error: {self.message}"


@dataclasses.dataclass(eq=False)
class FixPlan:
    """How to rewrite the node behind a finding. Applied by ``lints.fixer``."""

    action: str  # "unwrap_with" | "drop_with_item" | "replace_with_no_grad" | "null_context" | "decorator_no_grad"
    node: cst.CSTNode
    safe: bool
    items: tuple[cst.WithItem, ...] = ()  # for the with-block actions


@dataclasses.dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str
    summary: str
    rationale: str
    bad: str
    good: str
    fix: str
    valid: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    # Opt-in rules (like bugbear's B9xx) run only when a select or extend-select entry matches them.
    default_enabled: bool = True


@dataclasses.dataclass(eq=False)
class RuleHit:
    """What a rule reports, before the engine adds the path and applies noqa/select."""

    code: str
    line: int
    col: int
    message: str
    plans: tuple[FixPlan, ...] = ()  # several when nested blocks all wrap the same call

    @property
    def fixable(self) -> str:
        if not self.plans:
            return ""
        return "safe" if all(p.safe for p in self.plans) else "unsafe"
