"""The language server (``python -m lints server``), driven over stdio by pytest-lsp's client, as an editor
drives it: a three-module engine whose finding lands in the caller's file (worker.py's
``current_platform.inference_mode()``, a switch only the callee, platform.py, makes one), cleared by an
edit of the callee, and fixed by the code action, after which the engine runs under torch.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

pytest.importorskip("pygls", reason="the language server needs pygls (pip install 'gradmode-lint[lsp]')")
pytest.importorskip("lsprotocol", reason="the language server needs lsprotocol (it comes with pygls)")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="the server's test drives it with pytest-lsp")

from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from .helpers import ROOT, write_package  # noqa: E402

MODEL = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self._out = None\n"
    "    def forward(self, x):\n"
    "        if self._out is None:\n"
    "            self._out = torch.empty_like(x)\n"
    "        self._out.copy_(x)\n"
    "        return self._out\n"
)
PLATFORM = (
    "import torch\n"
    "class Platform:\n"
    "    @classmethod\n"
    "    def inference_mode(cls):\n"
    "        return torch.inference_mode(mode=True)\n"
    "current_platform = Platform()\n"
)
WORKER = (
    "import torch\n"
    "from engine.model import Model\n"
    "from engine.platform import current_platform\n"
    "class Worker:\n"
    "    def __init__(self):\n"
    "        self.model = Model().to('cpu').eval()\n"
    "    def warmup(self, x):\n"
    "        with current_platform.inference_mode():\n"
    "            self.model(x)\n"
    "    @torch.no_grad()\n"
    "    def execute_model(self, x):\n"
    "        return self.model(x)\n"
    "def main():\n"
    "    worker = Worker()\n"
    "    worker.warmup(torch.ones(4))\n"
    "    print(worker.execute_model(torch.ones(4)).tolist())\n"
    "if __name__ == '__main__':\n"
    "    main()\n"
)
FILES = {"engine/__init__.py": "", "engine/model.py": MODEL, "engine/platform.py": PLATFORM,
         "engine/worker.py": WORKER}
TIMEOUT = 60  # seconds for one analysis to be published (a few tenths on this project)

# the whole text as one change (lsprotocol before 2024 names the class by its place in the union)
WHOLE = getattr(lsp, "TextDocumentContentChangeWholeDocument", None) or getattr(
    lsp, "TextDocumentContentChangeEvent_Type2")

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "lints", "server", "--debounce", "0.02"],
                            server_env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep
                                        + os.environ.get("PYTHONPATH", "")})


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path):
    folder = write_package(tmp_path / "project", FILES)
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=folder.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name="project")]))
    yield
    await lsp_client.shutdown_session()


async def published(client: LanguageClient, uri: str, wanted) -> list:
    """Wait for the diagnostics of ``uri`` that satisfy ``wanted`` (the server may publish several times)."""
    async def wait() -> list:
        while True:
            if uri in client.diagnostics and wanted(client.diagnostics[uri]):
                return list(client.diagnostics[uri])
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    return await asyncio.wait_for(wait(), TIMEOUT)


def apply(text: str, edits: list) -> str:
    """``edits`` (LSP ``TextEdit``s, UTF-16 positions: this text is ASCII) applied to ``text``."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position) -> int:
        return starts[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


@pytest.mark.asyncio(loop_scope="function")
async def test_diagnostic_in_the_caller_follows_the_callee_and_the_code_action_fixes_it(client, tmp_path):
    folder = tmp_path / "project"
    worker, platform = folder / "engine/worker.py", folder / "engine/platform.py"
    worker_uri, platform_uri = worker.as_uri(), platform.as_uri()

    # the first analysis: the finding is in the caller's file, with its why-chain
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=platform_uri, language_id="python", version=1, text=PLATFORM)))
    found = await published(client, worker_uri, lambda ds: any(d.code == "GM101" for d in ds))
    (gm101,) = [d for d in found if d.code == "GM101"]
    assert gm101.source == "gradmode-lint"
    assert (gm101.range.start.line, gm101.range.start.character) == (7, 13)  # line 8, col 14: the with item
    assert gm101.range.end.line == 7 and gm101.range.end.character > 13
    assert gm101.message.splitlines()[1:], "the why-chain follows the message"
    # the step that names a place: the callee's switch
    assert [(r.location.uri, r.location.range.start.line) for r in gm101.related_information] == [
        (platform_uri, 3)]

    # the callee's unsaved edit (no longer a switch) clears the caller's finding: an empty list
    fixed_platform = PLATFORM.replace("torch.inference_mode(mode=True)", "torch.no_grad()")
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=platform_uri, version=2),
        content_changes=[WHOLE(text=fixed_platform)]))
    assert await published(client, worker_uri, lambda ds: not ds) == []
    assert platform.read_text() == PLATFORM  # the server never writes

    # the bug back, the caller open: a code action at the finding fixes it
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=platform_uri, version=3),
        content_changes=[WHOLE(text=PLATFORM)]))
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=worker_uri, language_id="python", version=1, text=WORKER)))
    found = await published(client, worker_uri, lambda ds: any(d.code == "GM101" for d in ds))
    (gm101,) = [d for d in found if d.code == "GM101"]

    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=worker_uri), range=gm101.range,
        context=lsp.CodeActionContext(diagnostics=[gm101])))
    fixes = [a for a in actions or [] if a.title.startswith("Fix GM101")]
    assert len(fixes) == 1, [a.title for a in actions or []]
    (fix,) = fixes
    # a helper's switch may do more than switch: dropping it is the unsafe fix
    assert fix.kind == lsp.CodeActionKind.QuickFix and "unsafe" in fix.title and fix.is_preferred is False
    assert any(a.title == "Add `# noqa: GM101` on line 8" for a in actions)
    assert list(fix.edit.changes) == [worker_uri]
    fixed = apply(WORKER, fix.edit.changes[worker_uri])
    assert "current_platform.inference_mode()" not in fixed
    assert "    def warmup(self, x):\n        self.model(x)\n" in fixed

    # the fixed engine runs under torch (the buggy one crashes), and the fixed text is clean
    pytest.importorskip("torch")
    crash = subprocess.run([sys.executable, "-m", "engine.worker"], cwd=folder, capture_output=True, text=True,
                           timeout=120)
    assert crash.returncode != 0 and "Inplace update to inference tensor" in crash.stderr, crash.stderr[-2000:]
    worker.write_text(fixed)
    ok = subprocess.run([sys.executable, "-m", "engine.worker"], cwd=folder, capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip() == "[1.0, 1.0, 1.0, 1.0]", ok.stderr[-2000:]
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=worker_uri, version=2),
        content_changes=[WHOLE(text=fixed)]))
    assert await published(client, worker_uri, lambda ds: not ds) == []


@pytest.mark.asyncio(loop_scope="function")
async def test_a_buffer_that_does_not_parse_is_one_diagnostic_and_the_server_goes_on(client, tmp_path):
    model_uri = (tmp_path / "project/engine/model.py").as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=model_uri, language_id="python", version=1, text="import torch\ndef forward(:\n")))
    errors = await published(client, model_uri, lambda ds: any(d.severity == lsp.DiagnosticSeverity.Error for d in ds))
    (error,) = errors
    assert error.source == "gradmode-lint" and "syntax error" in error.message and error.range.start.line == 1
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=model_uri, version=2),
        content_changes=[WHOLE(text=MODEL)]))
    (gm202,) = await published(client, model_uri, lambda ds: [d.code for d in ds] == ["GM202"])
    assert gm202.range.start.line == 7  # the lazy allocation, line 8
