"""The rule contract: one class per rule, holding its code, docs, examples and check.

Fixit style: every rule lists VALID and INVALID examples beside its check; ``python -m lints
explain CODE`` prints them and the test suite runs them. An example is one source text, or a
dict ``{relative path: source}`` for a multi-module package; the expected findings are written
as ``# expect: GM101:14`` comments (code and 1-based column) on the offending line. TorchFix
style: the rule owns its fix (``FIX`` describes it, the check attaches it to each finding).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar, Iterator, Union

from .model import Finding, Fix, fixable_of

if TYPE_CHECKING:
    from .analysis import ProjectAnalysis

Example = Union[str, dict]

CRASH = "buffers first allocated there become inference tensors: updating one in place outside it raises"
# The message part of `path:line:col: CODE message` (ruff's concise line); details go to the notes.
MAX_MESSAGE = 100
_QUOTED = re.compile(r"`([^`]{40,})`")


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
        short = shorten(message)
        notes = tuple(notes) if short == message else (message, *notes)  # the full names stay in the notes
        return Finding(analysis.project.path_of(fid), line, col, self.CODE, short, self.SEVERITY,
                       fixable_of(fixes), notes, tuple(fixes))


def shorten(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` within ``limit`` characters: long quoted names keep their last components
    (`…Runner._capture()`), then the text is cut with an ellipsis."""
    if len(message) <= limit:
        return message

    def tail(match: re.Match) -> str:
        name = match.group(1)
        parts = name.split(".")
        kept = parts[-1]
        for part in reversed(parts[:-1]):
            if len(kept) + len(part) + 1 > 36:
                break
            kept = f"{part}.{kept}"
        return f"`…{kept[-36:]}`" if kept != name else match.group(0)

    message = _QUOTED.sub(tail, message)
    return message if len(message) <= limit else message[:limit - 1] + "…"
