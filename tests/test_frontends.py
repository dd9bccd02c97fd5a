"""The front ends agree on one multi-module package: the CLI's JSON, ``lint_project``, the codemod
(--diff, then a real fix whose result still imports and runs on CPU torch) and flake8."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest

from lints.options import Config

from .helpers import ROOT, as_set, expected_in_files, lint_run, run_module, write_package

# Runs on CPU torch. Before the fix, warmup leaves Layer._buf an inference tensor and serving crashes on
# its in-place update; after the fix it prints OK.
PACKAGE = {
    "app/layer.py":
        "import torch\n"
        "class Layer:\n"
        "    def __init__(self):\n"
        "        self._buf = None\n"
        "    def forward(self, x):\n"
        "        if self._buf is None or self._buf.shape[0] < x.shape[0]:\n"
        "            self._buf = torch.empty_like(x)  # expect: GM202:13\n"
        "        out = self._buf[: x.shape[0]]\n"
        "        out.copy_(x)\n"
        "        return out * 2\n",
    "app/warm.py":
        "import torch\n"
        "from app.layer import Layer\n"
        "def prepare(layer: Layer, x):\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        return layer.forward(x)\n"
        "def warmup(layer: Layer, x):\n"
        "    prepare(layer, x)\n"
        "    with torch.inference_mode():  # expect: GM101:10\n"
        "        layer.forward(x)\n",
    "app/server.py":
        "import torch\n"
        "from app import warm\n"
        "from app.layer import Layer\n"
        "class Server:\n"
        "    def __init__(self):\n"
        "        self.layer = Layer()\n"
        "    def start(self, x):\n"
        "        with torch.inference_mode():\n"
        "            warm.warmup(self.layer, x)  # expect: GM104:13\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.layer.forward(x)\n",
    "app/main.py":
        "import torch\n"
        "from app.server import Server\n"
        "server = Server()\n"
        "server.start(torch.ones(4))\n"
        "y = server.execute_model(torch.ones(4))\n"
        "print('OK', float(y.sum()))\n",
}
RUN_MAIN = "import runpy; runpy.run_module('app.main', run_name='__main__')"


@pytest.fixture
def package(tmp_path):
    write_package(tmp_path, PACKAGE)
    return tmp_path


def run_main(cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN_MAIN], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_lint_project_gives_the_expected_findings(tmp_path):
    run = lint_run(tmp_path, PACKAGE, Config())
    assert not run.errors, run.errors
    assert as_set(run.findings) == expected_in_files(PACKAGE)
    (gm202,) = [f for f in run.findings if f.code == "GM202"]
    assert "updated in place: `.copy_()` in `Layer.forward()` at app/layer.py:9" in gm202.notes
    assert run.analysis.serving.mode == "no_grad"


def test_cli_json_equals_lint_project(package):
    run = lint_run(package, PACKAGE, Config(), paths=["app"])
    proc = run_module("lints", "--format", "json", "--no-cache", "app", cwd=package)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["errors"] == []
    keys = ("path", "line", "code", "message", "severity", "fixable", "notes")
    assert [{k: f[k] for k in keys} for f in data["findings"]] == [
        {k: list(v) if k == "notes" else v for k, v in f.to_dict().items() if k in keys} for f in run.findings]
    assert [f["col"] for f in data["findings"]] == [f.col + 1 for f in run.findings]  # 1-based in JSON
    serving = run.analysis.serving
    assert data["serving_grad_mode"] == {"mode": serving.mode, "source": serving.source,
                                         "evidence": serving.evidence}
    # text output: one `path:line:col: CODE message` line per finding, its notes indented below it
    text = run_module("lints", "--no-cache", "app", cwd=package)
    heads = [line for line in text.stdout.splitlines() if not line.startswith("    ")]
    assert [h.split(": ", 2)[:2] for h in heads] == [[f"{f.path}:{f.line}:{f.col + 1}", f.code.split()[0]]
                                                     for f in run.findings] or \
        [re.match(r"(\S+:\d+:\d+): (GM\d+)", h).groups() for h in heads] == [
            (f"{f.path}:{f.line}:{f.col + 1}", f.code) for f in run.findings]
    for finding in run.findings:
        for note in finding.notes:
            assert f"    {note}" in text.stdout.splitlines()


def _removed_lines(diff: str) -> dict[str, set[int]]:
    """path -> the original line numbers a unified diff removes or changes."""
    out: dict[str, set[int]] = {}
    path, line = None, 0
    for row in diff.splitlines():
        if row.startswith("--- "):
            path = row[4:].split("a/", 1)[-1]
            continue
        if row.startswith("+++ "):
            continue
        hunk = re.match(r"@@ -(\d+)", row)
        if hunk:
            line = int(hunk.group(1))
            continue
        if row.startswith("-"):
            out.setdefault(path, set()).add(line)
            line += 1
        elif row.startswith(" "):
            line += 1
    return out


@pytest.mark.slow
def test_codemod_diff_changes_the_gm1_lines_then_the_fix_is_clean_and_runs(package):
    before = {p: (package / p).read_text() for p in PACKAGE}
    crashed = run_main(package)
    assert crashed.returncode != 0 and "Inplace update to inference tensor outside InferenceMode" in crashed.stderr

    diff = run_module("lints.codemod", "--diff", "app", cwd=package)
    assert diff.returncode == 1, diff.stderr
    assert {p: (package / p).read_text() for p in PACKAGE} == before  # --diff writes nothing
    removed = _removed_lines(diff.stdout)
    gm1 = {(path, line) for path, code, line, _ in expected_in_files(PACKAGE) if code.startswith("GM1")}
    # the with-statements behind the GM1xx findings, and the lines they span (their bodies are dedented)
    blocks: dict[str, list[tuple[int, int]]] = {}
    for path, line in gm1:
        withs = [n for n in ast.walk(ast.parse(before[path])) if isinstance(n, ast.With)
                 and n.lineno <= line <= n.end_lineno]
        head = max(withs, key=lambda n: n.lineno)
        blocks.setdefault(path, []).append((head.lineno, head.end_lineno))
    assert set(removed) == set(blocks), diff.stdout
    for path, spans in blocks.items():
        assert {start for start, _ in spans} <= removed[path], (path, diff.stdout)
        assert all(any(s <= n <= e for s, e in spans) for n in removed[path]), (path, diff.stdout)

    fix = run_module("lints.codemod", "app", cwd=package)
    assert fix.returncode == 0, fix.stdout + fix.stderr  # nothing left: GM202 goes with its GM1xx cause
    assert "2 changed" in fix.stderr
    relint = run_module("lints", "--format", "json", "--no-cache", "--extend-select", "GM201", "app", cwd=package)
    left = json.loads(relint.stdout)["findings"]
    assert not [f for f in left if f["code"].startswith("GM1") or f["code"] == "GM202"], left
    assert [f["code"] for f in left] == ["GM201"]  # the opt-in design smell stays: the buffer is still lazy
    assert (package / "app" / "layer.py").read_text() == before["app/layer.py"]
    assert "inference_mode" not in (package / "app" / "warm.py").read_text()
    ran = run_main(package)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "OK 8.0"


def _flake8_agrees(package):
    run = lint_run(package, PACKAGE, Config(extend_select=("GM",)), paths=["app"])
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "app"], cwd=package,
                          capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = set()
    for line in proc.stdout.splitlines():
        match = re.match(r"(.+?):(\d+):(\d+): (GM\d+) ", line)
        assert match, line
        got.add((match.group(1).removeprefix("./"), int(match.group(2)), int(match.group(3)), match.group(4)))
    cli = run_module("lints", "--select", "GM", "--no-cache", "app", cwd=package)
    cli_set = {(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)) for m in
               (re.match(r"(\S+?):(\d+):(\d+): (GM\d+) ", line) for line in cli.stdout.splitlines()) if m}
    assert cli_set == {(f.path, f.line, f.col + 1, f.code) for f in run.findings}
    assert got == cli_set, (proc.stdout, proc.stderr)


def test_flake8_gives_the_same_findings_as_the_cli(package):
    _flake8_agrees(package)
