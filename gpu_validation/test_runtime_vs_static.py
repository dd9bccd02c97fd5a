"""The runtime check and the static rules side by side: what ``runtime.watch()`` sees kept after a warmup,
against what ``python -m lints`` reports on the same code, with the known misses named.

* ``runner_buggy.py``: each workspace the runtime finds kept (allocation line) is a GM202 of the linter at
  that line, and each GM202 is a kept workspace; the runtime's inference-mode entries are the GM101/GM103
  sites of the linter.
* ``runner_reverse.py``: the runtime finds the workspaces kept after the decorated warmup; the linter reports
  the capture that runs outside it (GM106) and the workspace (GM202) at the same allocation lines.
* Known misses, printed: FlashInfer's process-wide ``_cache_buf`` workspace (``flashinfer.utils``) is kept
  after an autotune under inference mode (``test_runtime_check.py``, GPU); the static rules do not report it,
  rightly: FlashInfer's kernels write it through a raw pointer, never with a torch in-place update, so it
  never raises.

Runs on CPU (CI) and on CUDA.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpu_validation import checks, runner_buggy, runner_reverse  # noqa: E402
from lints import runtime  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KNOWN_MISSES = (
    "flashinfer.utils._cache_buf (FlashInfer's mm_bf16 workspace): kept after an autotune under inference mode, "
    "not reported by the static rules: its kernels write it through a raw pointer, no torch in-place update "
    "(it never raises)",
)


def lint(tmp_path: Path, *names: str) -> list[dict]:
    for name in names:
        shutil.copy(HERE / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("[tool.gradmode]\n")
    proc = subprocess.run([sys.executable, "-m", "lints", *names, "--format", "json", "--no-cache", "--no-libraries"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["findings"]


def side_by_side(title: str, runtime_lines: dict, static_lines: dict, capsys) -> None:
    with capsys.disabled():
        print(f"\n[runtime vs static: {title}]")
        for line in sorted(set(runtime_lines) | set(static_lines)):
            print(f"  line {line}: runtime {runtime_lines.get(line, '-')} | static {static_lines.get(line, '-')}")
        for miss in KNOWN_MISSES:
            print(f"  known miss: {miss}")
        print("[end]")


@pytest.mark.parametrize("device", checks.devices())
def test_buggy_runner_runtime_and_static_agree(device, tmp_path, capsys):
    runner = checks.new_runner(runner_buggy, device)
    with runtime.watch() as recorder:
        runner.warmup()
    report = recorder.kept(named={"runner": runner}, modules=[runner_buggy])
    kept = {r.allocation_site.lineno: r.path for r in report if r.allocation_site is not None}
    entries = {e.site.lineno for r in report for e in r.inference_mode_entries}
    findings = lint(tmp_path, "runner_buggy.py")
    gm202 = {f["line"]: f["message"].split("`")[1] for f in findings if f["code"] == "GM202"}
    switches = {f["line"] for f in findings if f["code"] in ("GM101", "GM102", "GM103")}
    side_by_side(f"runner_buggy warmup on {device}", kept, gm202, capsys)
    assert set(kept) == set(gm202) and len(kept) == 2
    assert {path.rsplit(".", 1)[1] for path in kept.values()} == {key.rsplit(".", 1)[1] for key in gm202.values()}
    # each inference-mode entry the runtime saw is a switch the linter reports (a with spanning lines: its first)
    assert all(any(abs(line - site) <= 1 for site in switches) for line in entries), (entries, switches)


@pytest.mark.parametrize("device", checks.devices())
def test_reverse_runner_runtime_and_static_agree(device, tmp_path, capsys):
    runner = checks.new_runner(runner_reverse, device)
    with runtime.watch() as recorder:
        runner.warmup()
    report = recorder.kept(named={"runner": runner}, modules=[runner_reverse, runner_buggy])
    kept = {r.allocation_site.lineno: r.path for r in report if r.allocation_site is not None
            and r.allocation_site.filename.endswith("runner_buggy.py")}
    findings = lint(tmp_path, "runner_reverse.py", "runner_buggy.py")
    gm202 = {f["line"]: f["message"].split("`")[1] for f in findings
             if f["code"] == "GM202" and f["path"].endswith("runner_buggy.py")}
    side_by_side(f"runner_reverse warmup on {device}", kept, gm202, capsys)
    assert set(kept) == set(gm202) and len(kept) == 2
    assert any(f["code"] == "GM106" and f["path"] == "runner_reverse.py" for f in findings), findings
