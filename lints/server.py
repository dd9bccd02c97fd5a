"""``python -m lints server`` (``gradmode-lint server``): a language server over stdio, on pygls.

One warm project per workspace folder: on open, change (debounced) and save, the whole project is
analysed again with the open documents' texts in place of their files (nothing is written), and the
diagnostics of every file with findings are published (a caller's finding that an edit of its callee
makes or clears included), an empty list for a file whose findings went away. Each diagnostic carries
its why-chain, in the message and, where a step names a place, as related information. Code actions:
each finding's fix (the safe ones as preferred quick fixes, the unsafe ones marked so), as edits of
the document's text as analysed, and ``# noqa: CODE`` for the line.

Summaries are kept in memory between runs (``MemorySummaries``): an edit re-summarises the edited
file alone, then the project analysis and the rules run again over all of them.

A front end: it imports the engine and what the front ends share, no other front end.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import difflib
import os
import sys
import time
import traceback
import uuid
from typing import Any, Optional, Sequence

from .command_line import EXIT_ERROR, add_config_options, configs_for_paths, errors_of
from .engine import lint_project
from .model import FileError, Finding
from .options import Config, ConfigError
from .output import chain_of
from .sources import read_source, source_from_text, source_lines
from .spans import end_positions
from .summary_cache import SummaryCache
from .walk import excluded_below
from .workers import default_jobs

SOURCE = "gradmode-lint"
DEBOUNCE_SECONDS = 0.05
# what each fix does, for the code action's title
FIX_TITLES = {
    "unwrap_with": "drop the inference_mode block",
    "drop_with_item": "drop the inference_mode item",
    "null_context": "replace the switch with contextlib.nullcontext()",
    "decorator_no_grad": "use @torch.no_grad()",
    "unwrap_callable": "call the function without torch.inference_mode()",
    "add_inference_decorator": "add @torch.inference_mode()",
}


class MemorySummaries(SummaryCache):
    """A ``SummaryCache`` with no folder: the summaries of one project's files, by path and content
    key, kept in the server's memory from one run to the next (nothing is read from or written to
    the checkout's ``.gradmode_cache``). The engine re-summarises only the files whose key changed."""

    def __init__(self) -> None:
        super().__init__(None)

    def is_empty(self) -> bool:
        return not self._load()


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
    _imported: Any = None

    def imported(self) -> dict:
        if self._imported is None:
            from .fix_inputs import names_imported_across  # the analysis' summaries: only for a fix

            self._imported = names_imported_across(self.runs, max_bytes=self.max_bytes)
        return self._imported


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def analyse_workspace(roots: Sequence[str], documents: dict[str, tuple[str, Optional[int]]],
                      args: argparse.Namespace, caches: dict[tuple, MemorySummaries],
                      jobs: int) -> Analysed:
    """Lint the projects of ``roots`` (absolute folders) and the ``documents`` (absolute path -> (text,
    version)) outside them, the documents' texts in place of their files. Raises ``ConfigError``
    when no settings can be read."""
    started = time.perf_counter()
    python_docs = {p: doc for p, doc in documents.items() if p.endswith(".py")}
    outside = sorted(p for p in python_docs if not any(_inside(p, r) for r in roots))
    groups, config_errors = configs_for_paths(args, list(roots) + outside)
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
        cache = caches.setdefault(tuple(absolute), MemorySummaries())
        run = lint_project(absolute, config, jobs, use_cache=True, max_bytes=args.max_file_size,
                           overrides=overrides, summary_cache=cache)
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


def _chars(line: str, units: int, encoding: str) -> int:
    """The characters of ``line`` that ``units`` code units of the client's encoding cover."""
    if encoding == "utf-32":
        return min(units, len(line))
    count = 0
    for n, char in enumerate(line):
        if count >= units:
            return n
        count += len(char.encode("utf-8", "surrogatepass")) if encoding == "utf-8" else (2 if ord(char) > 0xFFFF else 1)
    return len(line)


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

def diagnostics_for(lsp, path: str, analysed: Analysed, texts: Texts, encoding: str) -> list:
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
            where = step["path"] if os.path.isabs(step["path"]) else os.path.join(analysed.roots.get(path, ""),
                                                                                    step["path"])
            row = step["line"] - 1
            column = (step["column"] or 1) - 1
            step_line = _line(texts.lines(os.path.normpath(where)), row) if step["column"] else ""
            at = lsp.Position(line=row, character=_units(step_line, column, encoding) if step["column"] else 0)
            related.append(lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=_uri(os.path.normpath(where)),
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


def _uri(path: str) -> str:
    from pygls.uris import from_fs_path

    return from_fs_path(path) or "file://" + path


def _path(uri: str) -> Optional[str]:
    from pygls.uris import to_fs_path

    path = to_fs_path(uri)
    return os.path.abspath(path) if path else None


# -- code actions ----------------------------------------------------------------------------------------

def _text_edits(lsp, before: str, after: str, encoding: str) -> list:
    """The edits turning ``before`` into ``after``, whole lines each."""
    old, new = source_lines(before), source_lines(after)
    return [_edit(lsp, old, i1, i2, "".join(new[j1:j2]), encoding)
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
            if tag != "equal"]


def _edit(lsp, lines: list[str], first: int, last: int, content: str, encoding: str):
    """A ``TextEdit`` replacing the 0-based lines ``first`` to ``last`` (exclusive) of ``lines``."""
    def at(index: int):
        if index == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            return lsp.Position(line=index - 1, character=_units(lines[-1], len(lines[-1]), encoding))
        return lsp.Position(line=index, character=0)

    return lsp.TextEdit(range=lsp.Range(start=at(first), end=at(last)), new_text=content)


def _fix_text_edits(lsp, lines: list[str], edits: list[dict], encoding: str) -> list:
    """``editor_fixes.fix_edits``' edits (1-based rows and character columns) as ``TextEdit``s."""
    def at(place: dict):
        row = place["row"] - 1
        return lsp.Position(line=row, character=_units(_line(lines, row), place["column"] - 1, encoding))

    return [lsp.TextEdit(range=lsp.Range(start=at(e["location"]), end=at(e["end_location"])), new_text=e["content"])
            for e in edits]


def code_actions(lsp, uri: str, path: str, wanted: tuple[int, int], analysed: Analysed, text: str,
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
                    edit=lsp.WorkspaceEdit(changes={uri: _fix_text_edits(lsp, lines, edits, encoding)})))
        marked, refused = add_noqa(text, {finding.line: {finding.code}})
        if marked != text and not refused:
            actions.append(lsp.CodeAction(
                title=f"Add `# noqa: {finding.code}` on line {finding.line}",
                kind=lsp.CodeActionKind.QuickFix, is_preferred=False,
                edit=lsp.WorkspaceEdit(changes={uri: _text_edits(lsp, text, marked, encoding)})))
    return actions


# -- the server ------------------------------------------------------------------------------------------

def create_server(args: argparse.Namespace):
    """The pygls ``LanguageServer`` with the features registered (pygls 2, or 1.3 and later)."""
    from lsprotocol import types as lsp

    try:
        from pygls.lsp.server import LanguageServer  # pygls >= 2
    except ImportError:  # pygls 1.x
        from pygls.server import LanguageServer

    from . import __version__

    class GradModeServer(LanguageServer):
        def __init__(self) -> None:
            super().__init__("gradmode-lint", __version__)
            self.roots: list[str] = []
            self.caches: dict[tuple, MemorySummaries] = {}
            self.analysis_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gradmode-analysis")
            self.action_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gradmode-actions")
            self.generation = 0
            self.lock: Optional[asyncio.Lock] = None
            self.analysed: Optional[Analysed] = None
            self.published: dict[str, tuple[Optional[int], list]] = {}  # uri -> (version, diagnostics)
            self.debounce = args.debounce
            self.first = True
            self.jobs = args.jobs if args.jobs and args.jobs > 0 else default_jobs()

        # pygls 1 and 2 name these differently
        def publish(self, uri: str, diagnostics: list, version: Optional[int]) -> None:
            if hasattr(self, "text_document_publish_diagnostics"):
                self.text_document_publish_diagnostics(
                    lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))
            else:
                self.publish_diagnostics(uri, diagnostics, version=version)

        def log(self, message: str, kind=lsp.MessageType.Log) -> None:
            try:
                if hasattr(self, "window_log_message"):
                    self.window_log_message(lsp.LogMessageParams(type=kind, message=message))
                else:
                    self.show_message_log(message, kind)
            except Exception:  # noqa: BLE001 - the log is no reason to fail
                print(f"gradmode-lint server: {message}", file=sys.stderr)

        def encoding(self) -> str:
            kind = getattr(self.workspace, "position_encoding", None) or "utf-16"
            return str(getattr(kind, "value", kind)).lower()

        def documents(self) -> dict[str, tuple[str, Optional[int]]]:
            """Absolute path -> (text, version) of every open document."""
            out = {}
            for uri, document in list(self.workspace.text_documents.items()):
                path = _path(uri)
                if path is not None:
                    out[path] = (document.source, document.version)
            return out

        def changed(self) -> None:
            """Something the analysis reads changed: a run after the debounce, if nothing newer comes."""
            self.generation += 1
            asyncio.ensure_future(self.run_later(self.generation)).add_done_callback(self.failed)

        def failed(self, task: asyncio.Future) -> None:
            """A run that raised past its own handlers (a bug of ours): logged, the session goes on."""
            if not task.cancelled() and task.exception() is not None:
                error = task.exception()
                self.log("gradmode-lint: internal error (a bug in gradmode-lint):\n"
                         + "".join(traceback.format_exception(type(error), error, error.__traceback__)),
                         lsp.MessageType.Error)

        async def run_later(self, generation: int) -> None:
            await asyncio.sleep(self.debounce)
            if self.lock is None:
                self.lock = asyncio.Lock()
            async with self.lock:  # one analysis at a time
                if generation != self.generation:
                    return  # a later change has a run of its own
                documents = self.documents()
                progress = await self.begin_progress() if self.first else None
                try:
                    analysed = await asyncio.get_running_loop().run_in_executor(
                        self.analysis_pool, analyse_workspace, list(self.roots), documents, args, self.caches,
                        self.jobs)
                except ConfigError as exc:
                    for each in errors_of(exc):
                        self.log(f"gradmode-lint: settings error: {each}", lsp.MessageType.Error)
                    return
                except Exception:  # noqa: BLE001 - a bug of ours must not end the session
                    self.log("gradmode-lint: internal error (a bug in gradmode-lint):\n" + traceback.format_exc(),
                             lsp.MessageType.Error)
                    return
                finally:
                    self.end_progress(progress)
                self.first = False
            if generation != self.generation:
                return  # the latest version wins: a run over newer texts comes
            self.analysed = analysed
            self.publish_all(analysed)
            self.log(f"gradmode-lint: {sum(len(v) for v in analysed.findings.values())} finding(s) in "
                     f"{analysed.files} file(s), analysed in {analysed.seconds:.2f} s")

        def publish_all(self, analysed: Analysed) -> None:
            texts = Texts(analysed.texts)
            encoding = self.encoding()
            paths = set(analysed.findings) | set(analysed.errors) | set(analysed.texts)
            paths |= {p for uri, (_, diagnostics) in self.published.items() if diagnostics
                      for p in [_path(uri)] if p is not None}
            for path in sorted(paths):
                uri = _uri(path)
                try:
                    diagnostics = diagnostics_for(lsp, path, analysed, texts, encoding)
                except Exception:  # noqa: BLE001 - one file's diagnostics must not stop the others'
                    self.log(f"gradmode-lint: cannot report {path}:\n{traceback.format_exc()}", lsp.MessageType.Error)
                    continue
                version = analysed.versions.get(path)
                if self.published.get(uri) == (version, diagnostics):
                    continue
                self.published[uri] = (version, diagnostics)
                self.publish(uri, diagnostics, version)

        async def begin_progress(self):
            """A work-done progress for the first analysis, where the client shows them."""
            capabilities = getattr(self, "client_capabilities", None)
            window = getattr(capabilities, "window", None)
            if not getattr(window, "work_done_progress", False):
                return None
            progress = getattr(self, "work_done_progress", None) or getattr(self, "progress", None)
            token = f"gradmode-lint-{uuid.uuid4()}"
            try:
                await progress.create_async(token)
                progress.begin(token, lsp.WorkDoneProgressBegin(title="gradmode-lint",
                                                                message="analysing the project"))
            except Exception:  # noqa: BLE001 - a client that refuses the token sees no progress
                return None
            return progress, token

        def end_progress(self, started) -> None:
            if started is not None:
                progress, token = started
                try:
                    progress.end(token, lsp.WorkDoneProgressEnd(message="done"))
                except Exception:  # noqa: BLE001
                    pass

    server = GradModeServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: GradModeServer, params: lsp.InitializeParams) -> None:
        folders = [f.uri for f in params.workspace_folders or []]
        if not folders and params.root_uri:
            folders = [params.root_uri]
        roots = [_path(uri) for uri in folders]
        if not folders and params.root_path:
            roots = [os.path.abspath(params.root_path)]
        ls.roots = [r for r in roots if r and os.path.isdir(r)]
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("debounce"), (int, float)):
            ls.debounce = max(0.0, float(options["debounce"]))

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: GradModeServer, params) -> None:
        if ls.roots:
            ls.changed()  # the first analysis, before any document is open

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GradModeServer, params) -> None:
        ls.changed()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GradModeServer, params) -> None:
        ls.changed()

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GradModeServer, params) -> None:
        ls.changed()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GradModeServer, params) -> None:
        ls.changed()  # the file's text on disk stands in for the buffer again

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: GradModeServer, params) -> None:
        ls.changed()  # a file changed on disk, or [tool.gradmode] in a pyproject.toml

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: GradModeServer, params) -> None:
        removed = {_path(f.uri) for f in params.event.removed}
        ls.roots = [r for r in ls.roots if r not in removed]
        ls.roots += [p for f in params.event.added for p in [_path(f.uri)] if p and os.path.isdir(p)]
        ls.changed()

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=False))
    async def code_action(ls: GradModeServer, params: lsp.CodeActionParams):
        analysed, path = ls.analysed, _path(params.text_document.uri)
        if analysed is None or path is None:
            return None
        document = ls.workspace.text_documents.get(params.text_document.uri)
        if document is not None:
            text = document.source
            if path in analysed.texts and analysed.texts[path] != text:
                return None  # edited since the run: its positions are stale, the next run's are not
        else:
            source = read_source(path, analysed.max_bytes)
            if isinstance(source, FileError):
                return None
            text = source.text
        wanted = (params.range.start.line, params.range.end.line)
        try:
            return await asyncio.get_running_loop().run_in_executor(
                ls.action_pool, code_actions, lsp, params.text_document.uri, path, wanted, analysed, text,
                ls.encoding(), params.context.only) or None
        except Exception:  # noqa: BLE001 - no action rather than an error for the editor to show
            ls.log(f"gradmode-lint: no code action for {path}:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return None

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: GradModeServer, params) -> None:
        ls.analysis_pool.shutdown(wait=False, cancel_futures=True)
        ls.action_pool.shutdown(wait=False, cancel_futures=True)

    return server


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradmode-lint server",
        description="A language server over stdio: diagnostics and quick fixes in the editor. The project "
                    "options below override [tool.gradmode], as on the command line.")
    parser.add_argument("--debounce", type=float, default=DEBOUNCE_SECONDS, metavar="SECONDS",
                        help=f"wait this long after a change before analysing (default {DEBOUNCE_SECONDS})")
    add_config_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        server = create_server(args)
    except ImportError as exc:
        print(f"gradmode-lint: error: the language server needs pygls and lsprotocol ({exc}): "
              "pip install 'gradmode-lint[server]'", file=sys.stderr)
        return EXIT_ERROR
    # stdin and stdout are the protocol's, on file objects of their own: whatever else writes to stdout
    # (a print, a worker process) goes to stderr, and sys.stdin is /dev/null. A worker process forked
    # while pygls' reader thread waits on sys.stdin would hang closing it (multiprocessing closes the
    # child's sys.stdin, whose lock that thread holds).
    protocol_in = os.fdopen(os.dup(sys.stdin.fileno()), "rb")  # buffered: read(n) returns n bytes
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")  # pygls flushes each message
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, sys.stdin.fileno())
    os.close(null)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdin, sys.stdout = open(os.devnull, encoding="utf-8"), sys.stderr
    server.start_io(protocol_in, protocol_out)
    return 0
