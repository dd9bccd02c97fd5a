"""The language server's work, without its protocol plumbing (``lints/server.py``): the workspace analysed
with the open buffers in place of their files and the summaries kept in memory between runs, its
findings and file errors as LSP diagnostics, and each finding's fix and ``# noqa`` as code actions."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import gc
import os
import time
from typing import Any, Optional, Sequence

from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path

from .command_line import configs_for_paths
from .engine import lint_project
from .model import FileError, Finding
from .options import Config, default_cache_dir
from .output import chain_of
from .sources import read_source, source_from_text, source_lines
from .spans import end_positions
from .summary_cache import MemorySummaries
from .walk import excluded_below, walks_remembered

SOURCE = "gradmode-lint"
# what each fix does, for the code action's title
FIX_TITLES = {
    "unwrap_with": "drop the inference_mode block",
    "drop_with_item": "drop the inference_mode item",
    "null_context": "replace the switch with contextlib.nullcontext()",
    "decorator_no_grad": "use @torch.no_grad()",
    "unwrap_callable": "call the function without torch.inference_mode()",
    "add_inference_decorator": "add @torch.inference_mode()",
}


@dataclasses.dataclass
class Analysed:
    """One run over the workspace: findings and file errors by absolute path, what the fixes need."""

    findings: dict[str, list[tuple[Finding, Config]]]
    errors: dict[str, list[FileError]]
    texts: dict[str, str]  # absolute path -> the open document's text the run analysed
    versions: dict[str, Optional[int]]  # absolute path -> that document's version
    runs: list[tuple]  # (ProjectRun, Config): for the names other modules import (fixes keep them)
    roots: dict[str, str]  # absolute path with findings -> its run's root (relative places of the notes)
    max_bytes: int
    seconds: float = 0.0
    files: int = 0
    cold: bool = False  # most of some project's summaries came into memory since the last collection
    _imported: Any = None

    def imported(self) -> dict:
        if self._imported is None:
            from .fix_inputs import names_imported_across  # the analysis' summaries: only for a fix

            self._imported = names_imported_across(self.runs, max_bytes=self.max_bytes)
        return self._imported


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _as_saved(path: str, text: str, max_bytes: int) -> bool:
    source = read_source(path, max_bytes)
    return not isinstance(source, FileError) and source.text == text


def analyse_workspace(roots: Sequence[str], documents: dict[str, tuple[str, Optional[int]]],
                      args: argparse.Namespace, caches: dict[tuple, MemorySummaries],
                      jobs: int, walks: Optional[dict] = None) -> Analysed:
    """``_analysed``, with the walks of the run before reused while the folders are as they were (``walks``:
    the memo the server keeps, ``walk.walks_remembered``)."""
    with walks_remembered(walks) if walks is not None else contextlib.nullcontext():
        analysed = _analysed(roots, documents, args, caches, jobs)
    # A run that summarised a whole project leaves millions of objects (the summaries kept, 8 M on sglang): the
    # collector's first full pass over them took 3.6 s, and fell in the next keystroke's run. It is made here,
    # before the results are published, and the later runs make few objects that last. (gc.freeze spared the
    # pass but slowed every later run twofold.)
    if analysed.cold:
        gc.collect()
        for cache in caches.values():
            cache.held_when_collected = cache.held()
    return analysed


def _analysed(roots: Sequence[str], documents: dict[str, tuple[str, Optional[int]]],
              args: argparse.Namespace, caches: dict[tuple, MemorySummaries], jobs: int) -> Analysed:
    """Lint the projects of ``roots`` (absolute folders) and the ``documents`` (absolute path -> (text,
    version)) outside them, the documents' texts in place of their files. Raises ``ConfigError``
    when no settings can be read."""
    started = time.perf_counter()
    python_docs = {p: doc for p, doc in documents.items() if p.endswith(".py")}
    outside = sorted(p for p in python_docs if not any(_inside(p, r) for r in roots))
    paths = list(roots) + outside
    # no folder and no Python buffer: nothing to analyse (an empty list would mean the current folder)
    groups, config_errors = configs_for_paths(args, paths) if paths else ([], [])
    members_of = [[os.path.abspath(m) for m in members] for _, members in groups]
    owner: dict[str, int] = {}  # each document goes to the group of the deepest member holding it
    for path in python_docs:
        best = max(((len(m), i) for i, members in enumerate(members_of) for m in members if _inside(path, m)),
                   default=None)
        if best is not None:
            owner[path] = best[1]
    result = Analysed({}, {}, {p: t for p, (t, _) in python_docs.items()},
                      {p: v for p, (_, v) in python_docs.items()}, [], {}, args.max_file_size)
    for error in config_errors:
        result.errors.setdefault(os.path.abspath(error.path), []).append(error)
    for index, ((config, members), absolute) in enumerate(zip(groups, members_of)):
        overrides = {p: python_docs[p][0] for p, i in owner.items() if i == index
                     and not any(os.path.isdir(m) and excluded_below(p, m, config.exclude, config.root,
                                                                     config.respect_gitignore)
                                 for m in absolute if _inside(p, m))}
        # a buffer that is its file as saved is the file: its cached summary serves (a text given in place
        # of a file is summarised afresh on every run)
        overrides = {p: text for p, text in overrides.items() if not _as_saved(p, text, args.max_file_size)}
        cache = caches.setdefault(tuple(absolute), MemorySummaries())
        run = lint_project(absolute, config, jobs, use_cache=True, max_bytes=args.max_file_size,
                           overrides=overrides, summary_cache=cache, cache_dir=default_cache_dir())
        # most of its summaries came into memory since the last collection (made, read from the folder by this run
        # or by a fix's actions after a hit)
        result.cold |= cache.held() > 2 * cache.held_when_collected
        result.runs.append((run, config))
        result.files += len(run.files)
        root = os.path.abspath(run.root)
        for finding in run.findings:
            path = os.path.abspath(finding.path)
            result.findings.setdefault(path, []).append((finding, config))
            result.roots[path] = root
        for error in run.errors:
            result.errors.setdefault(os.path.abspath(error.path), []).append(error)
    live = {tuple(a) for a in members_of}
    for key in [k for k in caches if k not in live]:  # a folder no longer analysed
        del caches[key]
    result.seconds = time.perf_counter() - started
    return result


# -- positions -------------------------------------------------------------------------------------------

def _units(line: str, chars: int, encoding: str) -> int:
    """``chars`` characters of ``line`` in the client's position encoding."""
    head = line[:chars]
    if encoding == "utf-8":
        return len(head.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return len(head)
    return len(head.encode("utf-16-le", "surrogatepass")) // 2


def _line(lines: list[str], row: int) -> str:
    """0-based ``row`` of ``lines`` without its line end ("" past the end)."""
    return lines[row].rstrip("\r\n") if 0 <= row < len(lines) else ""


class Texts:
    """The text of each file a publication or an action needs: the open document's, else the file's."""

    def __init__(self, documents: dict[str, str]) -> None:
        self.documents = documents
        self._lines: dict[str, Optional[list[str]]] = {}

    def text(self, path: str) -> Optional[str]:
        if path in self.documents:
            return self.documents[path]
        source = read_source(path)
        return None if isinstance(source, FileError) else source.text

    def lines(self, path: str) -> list[str]:
        if path not in self._lines:
            text = self.text(path)
            self._lines[path] = source_lines(text) if text is not None else []
        return self._lines[path] or []


# -- diagnostics -----------------------------------------------------------------------------------------

def diagnostics_for(path: str, analysed: Analysed, texts: Texts, encoding: str) -> list:
    """The diagnostics of ``path``: one per finding, one per file error."""
    out = []
    lines = texts.lines(path)
    findings = analysed.findings.get(path, [])
    text = texts.text(path)
    ends = end_positions(text, {(f.line, f.col) for f, _ in findings}) if findings and text is not None else {}
    for finding, _ in findings:
        end_line, end_col = ends.get((finding.line, finding.col), (finding.line, finding.col))
        start = lsp.Position(line=finding.line - 1, character=_units(_line(lines, finding.line - 1), finding.col,
                                                                     encoding))
        end = lsp.Position(line=end_line - 1, character=_units(_line(lines, end_line - 1), end_col, encoding))
        related = []
        for step in chain_of(finding):
            where = os.path.join(analysed.roots.get(path, ""), step["path"])  # an absolute one stays
            row = step["line"] - 1
            column = (step["column"] or 1) - 1
            step_line = _line(texts.lines(os.path.normpath(where)), row) if step["column"] else ""
            at = lsp.Position(line=row, character=_units(step_line, column, encoding) if step["column"] else 0)
            related.append(lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=uri_of(os.path.normpath(where)),
                                      range=lsp.Range(start=at, end=lsp.Position(line=row + 1, character=0))),
                message=step["message"]))
        suffix = {"safe": " [fix available]", "unsafe": " [unsafe fix available]"}.get(finding.fixable, "")
        out.append(lsp.Diagnostic(
            range=lsp.Range(start=start, end=end),
            message="\n".join([finding.message + suffix, *finding.notes]),
            severity=lsp.DiagnosticSeverity.Error if finding.severity == "error" else lsp.DiagnosticSeverity.Warning,
            code=finding.code,
            source=SOURCE,
            related_information=related or None,
            data={"line": finding.line, "col": finding.col, "code": finding.code}))
    for error in analysed.errors.get(path, []):
        line, col = error.position
        row = (line or 1) - 1
        at = lsp.Position(line=row, character=_units(_line(lines, row), (col or 1) - 1, encoding) if col else 0)
        out.append(lsp.Diagnostic(range=lsp.Range(start=at, end=lsp.Position(line=row, character=at.character + 1)),
                                  message=error.message, severity=lsp.DiagnosticSeverity.Error, source=SOURCE))
    return out


def uri_of(path: str) -> str:
    return from_fs_path(path) or "file://" + path


def path_of(uri: str) -> Optional[str]:
    path = to_fs_path(uri)
    return os.path.abspath(path) if path else None


# -- code actions ----------------------------------------------------------------------------------------

def _text_edits(before: str, after: str, encoding: str) -> list:
    """The edits turning ``before`` into ``after``, whole lines each."""
    old, new = source_lines(before), source_lines(after)
    return [_edit(old, i1, i2, "".join(new[j1:j2]), encoding)
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
            if tag != "equal"]


def _edit(lines: list[str], first: int, last: int, content: str, encoding: str):
    """A ``TextEdit`` replacing the 0-based lines ``first`` to ``last`` (exclusive) of ``lines``."""
    def at(index: int):
        if index == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            return lsp.Position(line=index - 1, character=_units(lines[-1], len(lines[-1]), encoding))
        return lsp.Position(line=index, character=0)

    return lsp.TextEdit(range=lsp.Range(start=at(first), end=at(last)), new_text=content)


def _fix_text_edits(lines: list[str], edits: list[dict], encoding: str) -> list:
    """``editor_fixes.fix_edits``' edits (1-based rows and character columns) as ``TextEdit``s."""
    def at(place: dict):
        row = place["row"] - 1
        return lsp.Position(line=row, character=_units(_line(lines, row), place["column"] - 1, encoding))

    return [lsp.TextEdit(range=lsp.Range(start=at(e["location"]), end=at(e["end_location"])), new_text=e["content"])
            for e in edits]


def code_actions(uri: str, path: str, wanted: tuple[int, int], analysed: Analysed, text: str,
                 encoding: str, only: Optional[Sequence[str]] = None) -> list:
    """The fixes and ``# noqa`` of the findings of ``path`` on the 0-based lines ``wanted`` (first,
    last), from ``text``, the document as the run analysed it."""
    if only and not any(str(lsp.CodeActionKind.QuickFix).startswith(str(kind)) for kind in only):
        return []
    findings = [(f, config) for f, config in analysed.findings.get(path, [])
                if wanted[0] <= f.line - 1 <= wanted[1]]
    if not findings:
        return []
    from .editor_fixes import fix_edits  # libcst: only for a fix
    from .file_fixes import FixOptions, ParsedSource
    from .noqa import add_noqa

    source = source_from_text(findings[0][0].path, text)
    lines = source_lines(text)
    parsed = ParsedSource()
    actions = []
    for finding, config in findings:
        if finding.fixes:
            try:
                edits = fix_edits(source, finding, FixOptions(config, max_bytes=analysed.max_bytes, findings={},
                                                              imported=analysed.imported()), parsed)
            except Exception:  # noqa: BLE001 - a fix that cannot be derived is no action, never a crash
                edits = []
            if edits:
                what = ", ".join(dict.fromkeys(FIX_TITLES.get(fix.action, fix.action) for fix in finding.fixes))
                safe = finding.fixable == "safe"
                actions.append(lsp.CodeAction(
                    title=f"Fix {finding.code}: {what}" + ("" if safe else " (unsafe fix: review the change)"),
                    kind=lsp.CodeActionKind.QuickFix,
                    is_preferred=safe,
                    edit=lsp.WorkspaceEdit(changes={uri: _fix_text_edits(lines, edits, encoding)})))
        marked, refused = add_noqa(text, {finding.line: {finding.code}})
        if marked != text and not refused:
            actions.append(lsp.CodeAction(
                title=f"Add `# noqa: {finding.code}` on line {finding.line}",
                kind=lsp.CodeActionKind.QuickFix, is_preferred=False,
                edit=lsp.WorkspaceEdit(changes={uri: _text_edits(text, marked, encoding)})))
    return actions
