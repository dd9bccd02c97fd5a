"""Rule families. Each module holds its rules' docs and VALID/INVALID examples beside the check."""
from __future__ import annotations

from typing import Callable, Iterator

from ..analysis import ModuleAnalysis
from ..model import Rule, RuleHit
from . import grad_mode_boundary, lazy_buffers

Checker = Callable[[ModuleAnalysis], Iterator[RuleHit]]

# (code prefix of the family, its rules, its check)
FAMILIES: tuple[tuple[str, dict[str, Rule], Checker], ...] = (
    ("GM1", grad_mode_boundary.RULES, grad_mode_boundary.check),
    ("GM2", lazy_buffers.RULES, lazy_buffers.check),
)
ALL_RULES: dict[str, Rule] = {code: rule for _, rules, _ in FAMILIES for code, rule in rules.items()}
