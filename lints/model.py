"""Plain data passed between the engine, the rules, the outputs and the fixer (no syntax nodes)."""
from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple, Optional


@dataclasses.dataclass(frozen=True)
class Fix:
    """How to rewrite the code behind a finding, by position; ``lints.fixer`` finds the nodes.

    actions: "unwrap_with" / "drop_with_item" (``at`` the with, ``items`` the inference-mode items),
    "null_context" (the switch call ``at``), "decorator_no_grad" (the decorator expression ``at``),
    "unwrap_callable" (``at`` the call ``torch.inference_mode()(fn)``), "add_inference_decorator" (``at`` the
    ``def`` of a function to run under ``@torch.inference_mode()``).
    """

    action: str
    at: tuple[int, int]
    safe: bool
    items: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict:
        return {"action": self.action, "at": list(self.at), "safe": self.safe, "items": [list(i) for i in self.items]}


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """One reported problem."""

    path: str
    line: int
    col: int  # 0-based, as flake8 reports it
    code: str
    message: str
    severity: str = "warning"  # "warning" | "error"
    fixable: str = ""  # "" | "safe" | "unsafe"
    notes: tuple[str, ...] = dataclasses.field(default=(), compare=False)  # the why-chain, one step a line
    fixes: tuple[Fix, ...] = dataclasses.field(default=(), compare=False)  # several when nested blocks wrap a call

    def to_dict(self) -> dict:
        data = {k: getattr(self, k) for k in ("path", "line", "col", "code", "message", "severity", "fixable")}
        data["notes"] = list(self.notes)
        data["fixes"] = [f.to_dict() for f in self.fixes]
        return data


@dataclasses.dataclass(frozen=True)
class FileError:
    """A file that could not be linted or fixed, with a one-line reason."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: error: {self.message}"

    @property
    def position(self) -> tuple[Optional[int], Optional[int]]:
        """(1-based line, 1-based column) a syntax error points at, else (None, None). Read from the
        message ``summary_jobs.summarize_source`` writes, since the results cache keeps errors as messages."""
        match = _SYNTAX_AT.match(self.message)
        if match is None:
            return None, None
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None


_SYNTAX_AT = re.compile(r"syntax error at line (\d+), column (?:(\d+)|None)\b")


class ServingMode(NamedTuple):
    """The grad mode serving runs under, as a run found it (a carried or cached run reads it back without the
    analysis)."""

    mode: str  # "no_grad" | "inference_mode"
    source: str  # "config" | "inferred"
    evidence: str


def fixable_of(fixes: tuple[Fix, ...]) -> str:
    if not fixes:
        return ""
    return "safe" if all(f.safe for f in fixes) else "unsafe"


def finding_from_dict(data: dict) -> Finding:
    """``Finding.to_dict`` read back (a cached result, the libcst command's hand-over); raises on any other shape."""
    fixes = tuple(Fix(str(f["action"]), _position(f["at"]), bool(f["safe"]), tuple(_position(i) for i in f["items"]))
                  for f in data.get("fixes", ()))
    return Finding(str(data["path"]), int(data["line"]), int(data["col"]), str(data["code"]), str(data["message"]),
                   str(data["severity"]), str(data["fixable"]), tuple(str(n) for n in data.get("notes", ())), fixes)


def _position(value) -> tuple[int, int]:
    line, col = value
    return int(line), int(col)
