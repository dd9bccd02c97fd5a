"""``python -m lints server`` (``gradmode-lint server``): a language server over stdio, on pygls.

One warm project per workspace folder: on open, change (debounced) and save, the whole project is
analysed again with the open documents' texts in place of their files (nothing is written), and the
diagnostics of every file with findings are published (a caller's finding that an edit of its callee
makes or clears included), an empty list for a file whose findings went away. Each diagnostic carries
its why-chain, in the message and, where a step names a place, as related information. Code actions:
each finding's fix (the safe ones as preferred quick fixes, the unsafe ones marked so), as edits of
the document's text as analysed, and ``# noqa: CODE`` for the line. What is analysed and how findings
become diagnostics and actions: ``lints/server_workspace.py``; here, the protocol.

Summaries are kept in memory between runs (``MemorySummaries``): an edit re-summarises the edited
file alone, then the project analysis and the rules run again over all of them. What memory lacks is
read from the project's cache folder, never written: where the CLI or a hook left it warm, the first
analysis is a hit or a carry, not a cold run.

A front end: it imports the engine and what the front ends share, no other front end.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import sys
import traceback
import uuid
from typing import Optional, Sequence

from .command_line import EXIT_ERROR, add_config_options, errors_of
from .model import FileError
from .options import ConfigError
from .sources import read_source
from .workers import default_jobs

DEBOUNCE_SECONDS = 0.05


# -- the server ------------------------------------------------------------------------------------------

def create_server(args: argparse.Namespace):
    """The pygls ``LanguageServer`` with the features registered (pygls 2, or 1.3 and later)."""
    from lsprotocol import types as lsp

    try:
        from pygls.lsp.server import LanguageServer  # pygls >= 2
    except ImportError:  # pygls 1.x
        from pygls.server import LanguageServer

    from . import __version__
    from .server_workspace import (Analysed, MemorySummaries, Texts, analyse_workspace, code_actions,
                                   diagnostics_for, path_of, uri_of)

    class GradModeServer(LanguageServer):
        def __init__(self) -> None:
            super().__init__("gradmode-lint", __version__)
            self.roots: list[str] = []
            self.caches: dict[tuple, MemorySummaries] = {}
            self.walks: dict = {}  # the folders' walks, kept while they are as they were
            self.analysis_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gradmode-analysis")
            self.action_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gradmode-actions")
            self.generation = 0
            self.lock: Optional[asyncio.Lock] = None
            self.analysed: Optional[Analysed] = None
            self.published: dict[str, tuple[Optional[int], list]] = {}  # uri -> (version, diagnostics)
            # path -> (what its diagnostics are made from, they): a file whose text and findings are as they
            # were is not parsed again for its end positions (dozens of files on an engine, every run)
            self.made: dict[str, tuple[tuple, list]] = {}
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
                path = path_of(uri)
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
                        self.jobs, self.walks)
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
                      for p in [path_of(uri)] if p is not None}
            made: dict[str, tuple[tuple, list]] = {}
            for path in sorted(paths):
                uri = uri_of(path)
                findings = analysed.findings.get(path, [])
                if not findings and not analysed.errors.get(path):
                    diagnostics = []
                else:
                    basis = (encoding, texts.text(path), analysed.roots.get(path),
                             tuple((f, f.notes, f.fixable) for f, _ in findings), tuple(analysed.errors.get(path, ())))
                    if path in self.made and self.made[path][0] == basis:
                        diagnostics = self.made[path][1]
                    else:
                        try:
                            diagnostics = diagnostics_for(path, analysed, texts, encoding)
                        except Exception:  # noqa: BLE001 - one file's diagnostics must not stop the others'
                            self.log(f"gradmode-lint: cannot report {path}:\n{traceback.format_exc()}",
                                     lsp.MessageType.Error)
                            continue
                    made[path] = (basis, diagnostics)
                version = analysed.versions.get(path)
                if self.published.get(uri) == (version, diagnostics):
                    continue
                self.published[uri] = (version, diagnostics)
                self.publish(uri, diagnostics, version)
            self.made = made

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
        roots = [path_of(uri) for uri in folders]
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
        removed = {path_of(f.uri) for f in params.event.removed}
        ls.roots = [r for r in ls.roots if r not in removed]
        ls.roots += [p for f in params.event.added for p in [path_of(f.uri)] if p and os.path.isdir(p)]
        ls.changed()

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix], resolve_provider=False))
    async def code_action(ls: GradModeServer, params: lsp.CodeActionParams):
        analysed, path = ls.analysed, path_of(params.text_document.uri)
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
                ls.action_pool, code_actions, params.text_document.uri, path, wanted, analysed, text,
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
              "pip install 'gradmode-lint[lsp]'", file=sys.stderr)
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
