"""Text, JSON and SARIF 2.1.0 renderings of findings and file errors."""
from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Optional, Sequence

from . import __version__
from .model import FileError, Finding

TOOL_URI = "https://github.com/gradmode-lint/gradmode-lint"


def render_text(findings: Sequence[Finding], notes: bool = True, color: bool = False) -> str:
    """``path:line:col: CODE message``, then (``notes``) the why-chain on indented lines."""
    bold, red, yellow, dim, reset = ("\033[1m", "\033[31m", "\033[33m", "\033[2m", "\033[0m") if color \
        else ("",) * 5
    lines = []
    for f in findings:
        fix = " [*]" if f.fixable == "safe" else (" [unsafe fix]" if f.fixable == "unsafe" else "")
        tint = red if f.severity == "error" else yellow
        lines.append(f"{bold}{f.path}{reset}:{f.line}:{f.col + 1}: {tint}{bold}{f.code}{reset} {f.message}{fix}")
        if notes:
            lines.extend(f"    {dim}{note}{reset}" for note in f.notes)
    return "\n".join(lines) + ("\n" if lines else "")


def render_statistics(findings: Sequence[Finding]) -> str:
    """ruff's --statistics: a count per code, most frequent first."""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.code] = counts.get(f.code, 0) + 1
    fixable = {f.code for f in findings if f.fixable == "safe"}
    return "".join(f"{n:>5}  {code}{' [*]' if code in fixable else ''}\n"
                   for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[Finding], errors: Sequence[FileError]) -> str:
    """GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per finding."""
    lines = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning"
        lines.append(f"::{level} title=gradmode-lint ({f.code}),file={_escape_property(f.path)},line={f.line},"
                     f"col={f.col + 1}::{_escape_data(f'{f.code} {f.message}')}")
    for e in errors:
        lines.append(f"::error title=gradmode-lint,file={_escape_property(e.path)}::{_escape_data(e.message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def _serving(serving) -> dict:
    return {"mode": serving.mode, "source": serving.source, "evidence": serving.evidence} if serving else {}


def _overall_serving(projects: Sequence[tuple]) -> dict:
    """The serving grad mode of a run of one project; {} for several (each has its own under ``projects``)."""
    return _serving(projects[0][1]) if len(projects) == 1 else {}


def _json_finding(f: Finding, details: dict) -> dict:
    """ruff-like: 1-based lines and columns, end exclusive; ``fix`` has the edits of this finding's
    fix alone, against the file as it is (an editor applies one, then lints again)."""
    data = {k: getattr(f, k) for k in ("path", "line", "col", "code", "message", "severity", "fixable")}
    data["col"] = f.col + 1
    detail = details.get((f.path, f.line, f.col))
    if detail is not None:
        data["end_line"], data["end_col"] = detail["end"][0], detail["end"][1] + 1
    data["notes"] = list(f.notes)
    data["fix"] = {"applicability": f.fixable, "edits": detail["edits"]} if detail and detail["edits"] else None
    return data


def render_json(findings: Sequence[Finding], errors: Sequence[FileError], projects: Sequence[tuple] = (),
                details: Optional[dict] = None) -> str:
    """``projects``: (root, serving mode) of each project analysed."""
    return json.dumps(
        {
            "version": __version__,
            "serving_grad_mode": _overall_serving(projects),
            "projects": [{"root": root, "serving_grad_mode": _serving(serving)} for root, serving in projects],
            "findings": [_json_finding(f, details or {}) for f in findings],
            "errors": [{"path": e.path, "message": e.message} for e in errors],
        },
        indent=2,
    ) + "\n"


def _uri(path: str) -> str:
    """A SARIF artifact URI: a relative reference, percent-encoded (a `#`, `?`, `:` or `%` in a file name
    is part of the name), or a file URI; a name that is not UTF-8 keeps its bytes."""
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    return urllib.parse.quote(p.as_posix().encode("utf-8", "surrogateescape"), safe="/")


def render_sarif(findings: Sequence[Finding], errors: Sequence[FileError], projects: Sequence[tuple] = ()) -> str:
    from .rules import ALL_RULES

    rules = sorted(ALL_RULES.values(), key=lambda r: r.CODE)
    rule_index = {r.CODE: i for i, r in enumerate(rules)}
    run = {
        "tool": {
            "driver": {
                "name": "gradmode-lint",
                "version": __version__,
                "informationUri": TOOL_URI,
                "rules": [
                    {
                        "id": r.CODE,
                        "name": r.NAME,
                        "shortDescription": {"text": r.SUMMARY},
                        "fullDescription": {"text": r.RATIONALE},
                        "help": {"text": f"{r.RATIONALE}\n\nFix: {r.FIX}"},
                        "defaultConfiguration": {"level": r.SEVERITY},
                    }
                    for r in rules
                ],
            }
        },
        "results": [
            {
                "ruleId": f.code,
                "ruleIndex": rule_index[f.code],
                "level": f.severity,
                "message": {"text": "\n".join([f.message, *f.notes])},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": _uri(f.path)},
                            "region": {"startLine": f.line, "startColumn": f.col + 1},
                        }
                    }
                ],
            }
            for f in findings
        ],
        "invocations": [
            {
                "executionSuccessful": not errors,
                "properties": {
                    "servingGradMode": _overall_serving(projects),
                    "projects": [{"root": root, "servingGradMode": _serving(serving)} for root, serving in projects],
                },
                "toolExecutionNotifications": [
                    {
                        "level": "error",
                        "message": {"text": e.message},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(e.path)}}}],
                    }
                    for e in errors
                ],
            }
        ],
        "columnKind": "unicodeCodePoints",
    }
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }, indent=2) + "\n"


def explain(code: str) -> str:
    """A rule's page, generated from the rule class: its docs and the same examples the tests run."""
    from .rules import ALL_RULES

    rule = ALL_RULES[code]
    indent = lambda text: "\n".join("    " + line for line in text.rstrip().splitlines())  # noqa: E731

    def examples(title: str, cases) -> str:
        parts = []
        for case in cases:
            files = case if isinstance(case, dict) else {"": case}
            for path, source in files.items():
                parts.append((f"  # {path}\n" if path else "") + indent(source))
        return f"{title}:\n" + "\n\n".join(parts) + "\n" if parts else ""

    state = "" if rule.DEFAULT_ENABLED else ", opt-in"
    return (
        f"{rule.CODE} ({rule.NAME}, {rule.SEVERITY}{state})\n"
        f"{rule.SUMMARY}\n\n"
        f"Why:\n{indent(rule.RATIONALE)}\n\n"
        f"Fix:\n{indent(rule.FIX)}\n\n"
        + examples("Reported (INVALID)", rule.INVALID) + "\n"
        + examples("Not reported (VALID)", rule.VALID)
    )
