"""Text, JSON and SARIF 2.1.0 renderings of findings and file errors."""
from __future__ import annotations

import json
import re
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
        line, col = e.position
        where = (f",line={line}" if line is not None else "") + (f",col={col}" if col is not None else "")
        lines.append(f"::error title=gradmode-lint,file={_escape_property(e.path)}{where}::{_escape_data(e.message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def _serving(serving) -> dict:
    return {"mode": serving.mode, "source": serving.source, "evidence": serving.evidence} if serving else {}


def _overall_serving(projects: Sequence[tuple]) -> dict:
    """The serving grad mode of a run of one project; {} for several (each has its own under ``projects``)."""
    return _serving(projects[0][1]) if len(projects) == 1 else {}


# A step's place, `PATH:LINE`, as ``Project.where`` writes it: after " at ", ", " or ": ", or opening the
# note. The rules, the grad-mode and phase analyses write the why-chain as text and the results cache
# keeps it so: it is read back here, in one place, rather than carried as data through all of them.
_LINE_REF = re.compile(r":(\d+)(?=$|[\s),;])")
_BEFORE_PATH = (" at ", ", ", ": ")


def _place_in(note: str) -> Optional[tuple[str, int]]:
    """(path, line) of the place ``note`` is about, or None: the first one written `at PATH:LINE` (a
    step's own place; `(enters X, PATH:LINE) in F at PATH:LINE` names the helper's line first), else
    the first one. The path runs from the nearest delimiter before `:LINE` (a path with spaces is
    whole), and is never quoted code."""
    places = []
    for match in _LINE_REF.finditer(note):
        before = note[:match.start()]
        start, after_at = max(((before.rfind(d) + len(d), d == " at ") for d in _BEFORE_PATH if d in before),
                              default=(0, False))
        path = before[start:]
        if path and not path[0].isspace() and "`" not in path:
            places.append((not after_at, path, int(match.group(1))))
    if not places:
        return None
    _, path, line = min(places, key=lambda place: place[0])  # min is stable: the first of its kind
    return path, line


def chain_of(f: Finding) -> list[dict]:
    """The why-chain's steps that name a place, in order: {path, line, column, message, nested}.
    ``column`` (1-based) is known only where the step is the finding's own line; ``nested``: an
    indented step (a call of the chain under the step above it)."""
    steps = []
    for note in f.notes:
        place = _place_in(note)
        if place is None:
            continue
        path, line = place
        steps.append({"path": path, "line": line, "column": f.col + 1 if (path, line) == (f.path, f.line) else None,
                      "message": note.strip(), "nested": note.startswith(" ")})
    return steps


def _json_finding(f: Finding, details: dict) -> dict:
    """ruff-like: 1-based lines and columns, end exclusive; ``fix`` has the edits of this finding's
    fix alone, against the file as it is (an editor applies one, then lints again)."""
    data = {k: getattr(f, k) for k in ("path", "line", "col", "code", "message", "severity", "fixable")}
    data["col"] = f.col + 1
    detail = details.get((f.path, f.line, f.col))
    if detail is not None:
        data["end_line"], data["end_col"] = detail["end"][0], detail["end"][1] + 1
    data["notes"] = list(f.notes)
    # the notes' places as data, for an editor's related information (the text above stays as it is)
    data["chain"] = [{k: step[k] for k in ("path", "line", "column", "message")} for step in chain_of(f)]
    data["fix"] = {"applicability": f.fixable, "edits": detail["edits"]} if detail and detail["edits"] else None
    return data


def _json_error(e: FileError) -> dict:
    line, col = e.position
    return {"path": e.path, "line": line, "col": col, "message": e.message}


def render_json(findings: Sequence[Finding], errors: Sequence[FileError], projects: Sequence[tuple] = (),
                details: Optional[dict] = None) -> str:
    """``projects``: (root, serving mode) of each project analysed."""
    return json.dumps(
        {
            "version": __version__,
            "serving_grad_mode": _overall_serving(projects),
            "projects": [{"root": root, "serving_grad_mode": _serving(serving)} for root, serving in projects],
            "findings": [_json_finding(f, details or {}) for f in findings],
            "errors": [_json_error(e) for e in errors],
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


def _sarif_location(path: str, line: int, column: Optional[int] = None, message: str = "") -> dict:
    region: dict = {"startLine": line}
    if column is not None:
        region["startColumn"] = column
    location: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(path)}, "region": region}}
    if message:
        location["message"] = {"text": message}
    return location


def _sarif_fix(f: Finding, edits: list[dict]) -> dict:
    """The finding's fix as SARIF's artifact changes: each edit replaces a region (1-based, end exclusive)."""
    return {
        "description": {"text": f"{'unsafe ' if f.fixable == 'unsafe' else ''}fix of {f.code}"},
        "artifactChanges": [{
            "artifactLocation": {"uri": _uri(f.path)},
            "replacements": [{
                "deletedRegion": {"startLine": e["location"]["row"], "startColumn": e["location"]["column"],
                                  "endLine": e["end_location"]["row"], "endColumn": e["end_location"]["column"]},
                "insertedContent": {"text": e["content"]},
            } for e in edits],
        }],
        "properties": {"applicability": f.fixable},
    }


def _sarif_result(f: Finding, rule_index: int, detail: Optional[dict]) -> dict:
    """One result; the why-chain both in the message (as text) and, where its steps name places, as a
    code flow (one thread flow, the indented steps one level deeper) and related locations."""
    region = {"startLine": f.line, "startColumn": f.col + 1}
    if detail is not None:  # SARIF's endColumn is exclusive, as the JSON format's end_col
        region["endLine"], region["endColumn"] = detail["end"][0], detail["end"][1] + 1
    result: dict = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": f.severity,
        "message": {"text": "\n".join([f.message, *f.notes])},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.path)}, "region": region}}],
    }
    steps = chain_of(f)
    if steps:
        result["codeFlows"] = [{"threadFlows": [{"locations": [
            {"location": _sarif_location(s["path"], s["line"], s["column"], s["message"]),
             "nestingLevel": 1 if s["nested"] else 0}
            for s in steps]}]}]
        result["relatedLocations"] = [dict(_sarif_location(s["path"], s["line"], s["column"], s["message"]), id=i)
                                      for i, s in enumerate(steps, 1)]
    if detail is not None and detail["edits"]:
        result["fixes"] = [_sarif_fix(f, detail["edits"])]
    return result


def _sarif_notification(e: FileError) -> dict:
    line, col = e.position
    location: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(e.path)}}}
    if line is not None:  # a syntax error: where the parser stopped
        location["physicalLocation"]["region"] = {"startLine": line, **({"startColumn": col} if col else {})}
    return {"level": "error", "message": {"text": e.message}, "locations": [location]}


def render_sarif(findings: Sequence[Finding], errors: Sequence[FileError], projects: Sequence[tuple] = (),
                 details: Optional[dict] = None) -> str:
    """``details``: as for ``render_json`` (end positions and each finding's fix edits)."""
    from .rules import ALL_RULES

    rules = sorted(ALL_RULES.values(), key=lambda r: r.CODE)
    rule_index = {r.CODE: i for i, r in enumerate(rules)}
    details = details or {}
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
        "results": [_sarif_result(f, rule_index[f.code], details.get((f.path, f.line, f.col))) for f in findings],
        "invocations": [
            {
                "executionSuccessful": not errors,
                "properties": {
                    "servingGradMode": _overall_serving(projects),
                    "projects": [{"root": root, "servingGradMode": _serving(serving)} for root, serving in projects],
                },
                "toolExecutionNotifications": [_sarif_notification(e) for e in errors],
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
                parts.append((f"  # {path}\n" if path else "") + indent(_without_markers(source)))
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


# The test suite's `# expect: GM101:14` markers in the rules' examples: for the tests, not the reader.
_EXPECT_MARKER = re.compile(r"\s*#\s*expect:(?:\s*GM\d{3}:\d+)+[ \t]*$", re.MULTILINE)


def _without_markers(source: str) -> str:
    return _EXPECT_MARKER.sub("", source)
