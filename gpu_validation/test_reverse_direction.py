"""The reverse direction (runner_reverse.py): warmup and serving under inference mode, capture outside it.

CPU (runs in CI): the linter reports GM106 at the capture entry, with the chain from the driver; the codemod
with ``--unsafe-fixes`` adds exactly ``@torch.inference_mode()`` above it. GPU: the capture of the buggy
runner raises torch's error; the codemod's output, imported from a temporary folder, warms up, captures
and replays, and matches the float32 reference and the eager path.
"""
from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_validation import checks, runner_reverse
from gpu_validation.checks import INFERENCE_TENSOR_ERROR, requires_cuda

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
CAPTURE_DEF = "    def capture(self) -> None:\n"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, GRADMODE_CACHE_DIR=str(cwd / ".cache"))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The two runner files as a project of their own (``gpu_validation`` is excluded from this repo's)."""
    root = tmp_path_factory.mktemp("reverse")
    (root / "gpu_validation").mkdir()
    (root / "gpu_validation" / "__init__.py").write_text("")
    for name in ("runner_buggy.py", "runner_reverse.py"):
        shutil.copy(HERE / name, root / "gpu_validation" / name)
    (root / "pyproject.toml").write_text("[tool.gradmode]\n")
    return root


@pytest.fixture(scope="module")
def fixed(project) -> Path:
    out = project.parent / "fixed"
    shutil.copytree(project, out)
    proc = _run(out, "-m", "lints.codemod", "--unsafe-fixes", "gpu_validation/runner_reverse.py")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return out / "gpu_validation" / "runner_reverse.py"


def test_gm106_at_the_capture_entry(project):
    proc = _run(project, "-m", "lints", "gpu_validation/runner_reverse.py", "--format", "json")
    report = json.loads(proc.stdout)
    assert report["errors"] == []
    line = (HERE / "runner_reverse.py").read_text().splitlines().index(CAPTURE_DEF.rstrip("\n")) + 1
    (gm106,) = [f for f in report["findings"] if f["code"] == "GM106"]
    assert (gm106["path"], gm106["line"], gm106["fixable"]) == ("gpu_validation/runner_reverse.py", line, "unsafe")
    assert "  `main()` calls `CudaGraphRunner.capture()` at gpu_validation/runner_reverse.py:" in "\n".join(
        gm106["notes"])


def test_unsafe_fix_adds_only_the_decorator(fixed):
    before = (HERE / "runner_reverse.py").read_text().splitlines()
    after = fixed.read_text().splitlines()
    changes = [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changes == ["+    @torch.inference_mode()"]
    assert "    @torch.inference_mode()\n" + CAPTURE_DEF in fixed.read_text()


@pytest.mark.gpu
@requires_cuda
def test_buggy_capture_raises_after_inference_mode_warmup():
    runner = runner_reverse.ModelRunner(runner_reverse.ToyMoELayer(device="cuda"), max(checks.GRAPH_BATCH_SIZES))
    runner.warmup()
    assert runner.layer._ws.is_inference() and runner.layer._topk_idx_out.is_inference()
    graphs = runner_reverse.CudaGraphRunner(runner, checks.GRAPH_BATCH_SIZES)
    with pytest.raises(RuntimeError, match=INFERENCE_TENSOR_ERROR):
        graphs.capture()
    torch.cuda.synchronize()
    assert torch.ones(4, device="cuda").sum().item() == 4.0  # the process stays usable


@pytest.mark.gpu
@requires_cuda
def test_fixed_capture_runs_and_matches_the_reference(fixed):
    spec = importlib.util.spec_from_file_location("runner_reverse_fixed", fixed)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graphs = module.main(checks.GRAPH_BATCH_SIZES)  # warmup, then the capture, now under inference mode
    layer = graphs.layer
    eager = module.ModelRunner(layer, max(checks.GRAPH_BATCH_SIZES))
    for x in checks.make_inputs(layer, checks.SERVE_BATCH_SIZES):
        replayed = graphs.execute_model(x)
        ref, _ = checks.reference_forward(layer, x)
        torch.testing.assert_close(replayed.float(), ref, **checks.tolerances(layer.dtype))
        torch.testing.assert_close(replayed, eager.execute_model(x), **checks.tolerances(layer.dtype))
    torch.cuda.synchronize()
