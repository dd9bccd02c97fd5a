"""The rule contract: one class per rule, holding its code, docs, examples and check.

Fixit style: every rule lists VALID and INVALID examples beside its check; ``python -m lints
explain CODE`` prints them and the test suite runs them. An example is one source text, or a
dict ``{relative path: source}`` for a multi-module package; the expected findings are written
as ``# expect: GM101:14`` comments (code and 1-based column) on the offending line. TorchFix
style: the rule owns its fix (``FIX`` describes it, the check attaches it to each finding).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Iterator, Union

from .model import Finding, Fix, fixable_of

if TYPE_CHECKING:
    from .analysis import ProjectAnalysis

Example = Union[str, dict]

CRASH = "buffers allocated there become inference tensors"


class Rule:
    CODE: ClassVar[str] = ""
    NAME: ClassVar[str] = ""
    SEVERITY: ClassVar[str] = "warning"
    SUMMARY: ClassVar[str] = ""
    RATIONALE: ClassVar[str] = ""
    FIX: ClassVar[str] = "report only"
    DEFAULT_ENABLED: ClassVar[bool] = True  # opt-in rules (like bugbear's B9xx) run only when selected
    # What the rule needs, so that nothing is dropped by a hidden whitelist: torch's full names it
    # resolves (documentation and the explain page).
    TORCH_NAMES: ClassVar[tuple[str, ...]] = ()
    VALID: ClassVar[tuple[Example, ...]] = ()
    INVALID: ClassVar[tuple[Example, ...]] = ()
    # Options the examples run with (e.g. serving-grad-mode for GM105).
    EXAMPLE_OPTIONS: ClassVar[dict] = {}

    def check(self, analysis: "ProjectAnalysis") -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    def finding(self, analysis: "ProjectAnalysis", fid: str, line: int, col: int, message: str,
                notes: tuple[str, ...] = (), fixes: tuple[Fix, ...] = ()) -> Finding:
        return Finding(analysis.project.path_of(fid), line, col, self.CODE, message, self.SEVERITY,
                       fixable_of(fixes), tuple(notes), tuple(fixes))
