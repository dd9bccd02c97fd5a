"""Baseline files: adopt the tool on a big codebase and fail only on new findings.

A baseline records each finding by file, code, message and the text of its line, not by line
number, so that edits elsewhere in a file do not bring recorded findings back; line numbers inside
messages (``at eng/warm.py:12``, ``(line 12)``) are compared as any number for the same reason.
Paths are stored relative to the baseline file's folder, so the result does not depend on the cwd.
"""
from __future__ import annotations

import collections
import json
import os
import re
from typing import Callable, Iterable

from .sources import read_regular_bytes, source_lines
from .writes import write_new_file
from .model import Finding

FORMAT = 1


class BaselineError(Exception):
    pass


# A line number in a message: `path.py:12` or `line 12`.
_LINE_NUMBER = re.compile(r"(?<=\.py:)\d+|(?<=\bline )\d+")


def _key(finding: Finding, base: str, lines_of: Callable[[str], list[str]]) -> tuple[str, str, str, str]:
    path = os.path.relpath(os.path.abspath(finding.path), base).replace(os.sep, "/")
    lines = lines_of(finding.path)
    text = lines[finding.line - 1].strip() if 0 < finding.line <= len(lines) else ""
    return path, finding.code, finding.message, text


def _matching(key: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
    """What a baseline entry is matched by: its key with the line numbers in the message left out."""
    path, code, message, text = key
    return path, code, _LINE_NUMBER.sub("#", message), text


def _line_reader(text_of: Callable[[str], str]) -> Callable[[str], list[str]]:
    cache: dict[str, list[str]] = {}

    def lines_of(path: str) -> list[str]:
        if path not in cache:
            cache[path] = source_lines(text_of(path))
        return cache[path]
    return lines_of


def write_baseline(path: str, findings: Iterable[Finding], text_of: Callable[[str], str]) -> int:
    base = os.path.dirname(os.path.abspath(path))
    lines_of = _line_reader(text_of)
    entries = sorted(_key(f, base, lines_of) for f in findings)
    data = {"tool": "gradmode-lint", "format": FORMAT,
            "findings": [dict(zip(("path", "code", "message", "line_text"), e)) for e in entries]}
    write_new_file(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))  # never half-written
    return len(entries)


def filter_baseline(path: str, findings: list[Finding], text_of: Callable[[str], str]) -> tuple[list[Finding], int]:
    """(the findings not in the baseline, how many it hid). Each recorded entry hides one finding."""
    try:
        data = json.loads(read_regular_bytes(path))
        entries = [_matching((str(e["path"]), str(e["code"]), str(e["message"]), str(e["line_text"])))
                   for e in data["findings"]]
        if data.get("tool") != "gradmode-lint" or type(data.get("format")) is not int or data["format"] != FORMAT:
            raise ValueError("not a gradmode-lint baseline of this format")
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BaselineError(f"{path} is not a gradmode-lint baseline: {exc}") from None
    budget = collections.Counter(entries)
    base = os.path.dirname(os.path.abspath(path))
    lines_of = _line_reader(text_of)
    kept, hidden = [], 0
    for finding in findings:
        key = _matching(_key(finding, base, lines_of))
        if budget[key] > 0:
            budget[key] -= 1
            hidden += 1
        else:
            kept.append(finding)
    return kept, hidden
