"""Text, JSON and SARIF 2.1.0 renderings of findings and file errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from . import __version__
from .model import FileError, Finding

TOOL_URI = "https://github.com/gradmode-lint/gradmode-lint"


def render_text(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        fix = " [*]" if f.fixable == "safe" else (" [unsafe fix]" if f.fixable == "unsafe" else "")
        lines.append(f"{f.path}:{f.line}:{f.col + 1}: {f.code} {f.message}{fix}")
    return "\n".join(lines) + ("\n" if lines else "")


def render_json(findings: Sequence[Finding], errors: Sequence[FileError]) -> str:
    return json.dumps(
        {
            "version": __version__,
            "findings": [dict(f.to_dict(), col=f.col + 1) for f in findings],
            "errors": [{"path": e.path, "message": e.message} for e in errors],
        },
        indent=2,
    ) + "\n"


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else p.as_uri()


def render_sarif(findings: Sequence[Finding], errors: Sequence[FileError]) -> str:
    from .rules import ALL_RULES

    rules = sorted(ALL_RULES.values(), key=lambda r: r.code)
    rule_index = {r.code: i for i, r in enumerate(rules)}
    run = {
        "tool": {
            "driver": {
                "name": "gradmode-lint",
                "version": __version__,
                "informationUri": TOOL_URI,
                "rules": [
                    {
                        "id": r.code,
                        "name": r.name,
                        "shortDescription": {"text": r.summary},
                        "fullDescription": {"text": r.rationale},
                        "help": {"text": f"{r.rationale}\n\nFix: {r.fix}"},
                        "defaultConfiguration": {"level": r.severity},
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
                "message": {"text": f.message},
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
    from .rules import ALL_RULES

    rule = ALL_RULES[code]
    indent = lambda text: "\n".join("    " + line for line in text.rstrip().splitlines())  # noqa: E731
    return (
        f"{rule.code} ({rule.name}, {rule.severity})\n"
        f"{rule.summary}\n\n"
        f"Why:\n{indent(rule.rationale)}\n\n"
        f"Bad:\n{indent(rule.bad)}\n\n"
        f"Good:\n{indent(rule.good)}\n\n"
        f"Fix:\n{indent(rule.fix)}\n"
    )
