"""The language server's latency: a one-line ``didChange`` to the ``publishDiagnostics`` of that file.

    python bench/server_latency.py                      # sglang 0.5.23 (fetched as bench/corpus.py does)
    python bench/server_latency.py --tree DIR --file DIR/pkg/model.py [--edits 20] [--debounce 0.05]
    python bench/server_latency.py --edit constant      # each edit appends a new constant instead
    python bench/server_latency.py --warm               # the CLI fills the cache first; the server reads it
    python bench/server_latency.py --warm above         # the same, the server started in the tree's parent folder

Starts ``python -m lints server`` on the tree (a pygls client over stdio, as an editor), opens one
model file and waits for the first analysis to be published, then sends ``--edits`` one-line edits
of that file (a comment line added at the top, one more each time, unsaved; with ``--edit constant``,
``_edit_N = N`` appended instead: a change the summaries see) and times each from the
``didChange`` to the diagnostics of that file for that version. Prints the first analysis' time,
the median and the max of the edits, and the server's own analysis times from its log. The time
includes the server's debounce (``--debounce``, the server's default unless given). The cache folder is a
new temporary one ($GRADMODE_CACHE_DIR), so the first analysis is cold; with ``--warm``, ``python -m lints .``
fills it first and the server starts in the tree's folder (as an editor starts it in its workspace), so it
reads what the CLI left there; with ``--warm above``, in the folder above the tree (the root spelt otherwise:
the rows serve, the results do not).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

DEFAULT_CORPUS = "sglang-0.5.23"
DEFAULT_FILE = "srt/models/llama.py"  # under the package folder


EDITS = {
    "comment": lambda text, n: f"# edit {n}\n" + text,
    "constant": lambda text, n: text + f"_edit_{n} = {n}\n",
}


async def measure(tree: Path, path: Path, edits: int, debounce: float | None, timeout: float,
                  edit: str = "comment", warm: str | None = None) -> int:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="server-latency-cache-") as caches:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   GRADMODE_CACHE_DIR=caches)
        if warm:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "lints", ".", "-q"], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                           check=False)
            print(f"the CLI filled the cache in {time.perf_counter() - started:.1f} s", flush=True)
        folder = {None: None, "here": tree, "above": tree.parent}[warm]
        return await _measure(tree, path, edits, debounce, timeout, edit, env, folder)


async def _measure(tree: Path, path: Path, edits: int, debounce: float | None, timeout: float, edit: str,
                   env: dict, cwd: Path | None) -> int:
    from lsprotocol import types as lsp
    from pygls.lsp.client import BaseLanguageClient

    client = BaseLanguageClient("server-latency", "1")
    published: list[tuple[float, str, int | None, int]] = []
    logs: list[str] = []
    arrived = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        published.append((time.perf_counter(), params.uri, params.version, len(params.diagnostics)))
        arrived.set()

    @client.feature(lsp.WINDOW_LOG_MESSAGE)
    def on_log(params: lsp.LogMessageParams) -> None:
        logs.append(params.message)

    async def wait_for(uri: str, version: int) -> float:
        while True:
            for at, got, got_version, _ in published:
                if got == uri and got_version == version:
                    return at
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), timeout)

    command = [sys.executable, "-m", "lints", "server"]
    command += ["--debounce", str(debounce)] if debounce is not None else []
    await client.start_io(*command, env=env, cwd=cwd)
    forward = asyncio.create_task(_forward(client._server.stderr))  # unread, the pipe would fill and block it
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    started = time.perf_counter()
    await client.initialize_async(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(), root_uri=tree.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=tree.as_uri(), name=tree.name)]))
    client.initialized(lsp.InitializedParams())
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    first = await wait_for(uri, 1) - started
    how = f"the CLI's cache read, started in {cwd}" if cwd is not None else "cold: every file summarised, in memory"
    print(f"first analysis published after {first:.1f} s ({how})", flush=True)
    times = []
    for n in range(1, edits + 1):
        text = EDITS[edit](text, n)
        sent = time.perf_counter()
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=n + 1),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))
        times.append(await wait_for(uri, n + 1) - sent)
        print(f"  edit {n:2d}: {times[-1] * 1000:7.0f} ms", flush=True)
    findings = [count for _, got, version, count in published if got == uri and version == edits + 1]
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    forward.cancel()
    analysed = [line for line in logs if "analysed in" in line]
    print(f"file: {path.relative_to(tree)} ({findings[0] if findings else '?'} diagnostic(s) in it), "
          f"{len({u for _, u, _, _ in published})} file(s) with diagnostics published")
    print("server log, each run: " + "; ".join(line.rpartition("analysed in ")[2] for line in analysed))
    print(f"server log, last run: {analysed[-1] if analysed else '(none)'}")
    print(f"didChange -> publishDiagnostics over {edits} one-line edits: "
          f"median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms, "
          f"min {min(times) * 1000:.0f} ms")
    return 0


async def _forward(stream) -> None:
    while line := await stream.readline():
        sys.stderr.write("server: " + line.decode("utf-8", "replace"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, help=f"the workspace folder (default: {DEFAULT_CORPUS}'s corpus folder)")
    parser.add_argument("--file", type=Path, help=f"the file to edit (default: {DEFAULT_FILE} of the package)")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--debounce", type=float, default=None, help="the server's --debounce (default: its own)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for one publication")
    parser.add_argument("--edit", choices=sorted(EDITS), default="comment", help="what each edit does")
    parser.add_argument("--warm", nargs="?", const="here", choices=("here", "above"), default=None,
                        help="the CLI fills the cache before the server starts, in the tree's folder or above it")
    args = parser.parse_args()
    if args.tree is None:
        from corpus import ensure, project_dir

        package = ensure(DEFAULT_CORPUS)
        args.tree = project_dir(DEFAULT_CORPUS)
        args.file = args.file or package / DEFAULT_FILE
    if args.file is None:
        parser.error("--file is needed with --tree")
    tree, path = args.tree.resolve(), args.file.resolve()
    return asyncio.run(measure(tree, path, args.edits, args.debounce, args.timeout, args.edit, args.warm))


if __name__ == "__main__":
    sys.exit(main())
