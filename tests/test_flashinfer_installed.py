"""The crash that was reported: SGLang with FlashInfer's MegaMoE, with ``flashinfer-python==0.7.4`` installed
from the package registry at test time (``tests/installed_library.py``; skipped with the reason when it
cannot be downloaded). A small engine written for the test warms the real ``MoEEpMegaLayer`` up under
inference mode and serves under no_grad: the workspace is allocated in the library
(``_ensure_workspace``), filled in place in the library (``quant_stage.py``'s ``fill_(-1)`` among others),
and the finding is reported at the engine's inference-mode site. The library is only read, never run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from lints.options import Config

from .helpers import as_set, lint_run, write_package
from .installed_library import FLASHINFER, fetch_wheel, install

pytestmark = pytest.mark.slow  # reads ~1,700 modules of flashinfer; the full suite (CI) runs it

ENGINE = {
    "pyproject.toml": "[tool.gradmode]\n",
    "engine/__init__.py": "",
    "engine/runner.py":
        "import torch\n"
        "from flashinfer.moe_ep import MoEEpMegaLayer\n"
        "class Runner:\n"
        "    def __init__(self, layer: MoEEpMegaLayer):\n"
        "        self.layer = layer\n"
        "    def warmup(self):\n"
        "        with WARM_MODE:\n"
        "            self.layer.warmup()\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, batch):\n"
        "        return self.layer(batch)\n"
        "def main(layer):\n"
        "    runner = Runner(layer)\n"
        "    runner.warmup()\n"
        "    runner.execute_model(None)\n"
        "if __name__ == '__main__':\n"
        "    main(None)\n",
}
SITE = ("engine/runner.py", "GM202", 7, 9)


def _engine(mode: str) -> dict[str, str]:
    return {name: text.replace("WARM_MODE", mode) for name, text in ENGINE.items()}


@pytest.fixture(scope="module")
def flashinfer_python(tmp_path_factory):
    wheel, why = fetch_wheel(*FLASHINFER)
    if wheel is None:
        pytest.skip(f"flashinfer-python 0.7.4 cannot be had: {why}")
    return install(wheel, tmp_path_factory.mktemp("flashinfer") / "venv")


@pytest.fixture(scope="module")
def user_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture
def env(user_cache, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
    return dict(os.environ, XDG_CACHE_HOME=str(user_cache))


def test_megamoe_workspace_is_found_at_the_engine_inference_mode_site(tmp_path, flashinfer_python, env):
    # the first run of the module reads flashinfer's ~1,700 modules: on both cores, into the user cache
    run = lint_run(tmp_path / "buggy", _engine("torch.inference_mode()"), Config(python=str(flashinfer_python)),
                   use_cache=True, jobs=2)
    assert SITE in as_set(run.findings)
    (finding,) = [f for f in run.findings if f.code == "GM202"]
    notes = "\n".join(finding.notes)
    assert "`MoEEpMegaLayer._workspace` allocated under inference mode" in finding.message
    assert "allocated under a check of `self._workspace`, flashinfer/moe_ep/modes/mega_layer.py:196" in notes
    assert "`MoEEpMegaLayer._ensure_workspace()` at flashinfer/moe_ep/modes/mega_layer.py:340" in notes
    assert "`torch.inference_mode()` in `Runner.warmup()` at engine/runner.py:7" in notes
    assert "`Runner.execute_model()` calls `MoEEpMegaLayer.forward()` at engine/runner.py:11" in notes
    # every update of that workspace outside inference mode is known, the reported `fill_(-1)` among them
    analysis = lint_run(tmp_path / "again", _engine("torch.inference_mode()"),  # a new project: analysed again,
                        Config(python=str(flashinfer_python)), use_cache=True).analysis  # the library from the cache
    (updates,) = [m for a, m in analysis.kept_buffers.updated if a.key.text() == "MoEEpMegaLayer._workspace" and a.lazy]
    sites = {analysis.project.where(m.fid, m.line) for m in updates if m.how.startswith("`.fill_()`")}
    assert ("flashinfer/moe_ep/kernel_src/sm100/cutedsl_megamoe/shim/quant_stage.py:614 (flashinfer_python)"
            in sites)


def test_without_the_inference_mode_nothing(tmp_path, flashinfer_python, env):
    run = lint_run(tmp_path, _engine("torch.no_grad()"), Config(python=str(flashinfer_python)), use_cache=True)
    assert run.findings == [] and run.errors == []


def test_cli_and_flake8(tmp_path, flashinfer_python, env):
    folder = write_package(tmp_path, _engine("torch.inference_mode()"))
    proc = subprocess.run([sys.executable, "-m", "lints", "--format", "json", "--python", str(flashinfer_python),
                           "engine"], cwd=folder, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stderr
    found = {(f["path"], f["code"], f["line"], f["col"]) for f in json.loads(proc.stdout)["findings"]}
    assert SITE in found
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "--gradmode-python",
                           str(flashinfer_python), "engine/runner.py"], cwd=folder, capture_output=True, text=True,
                          timeout=600, env=env)
    assert "engine/runner.py:7:9: GM202" in proc.stdout, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "GM", "--gradmode-python",
                           str(flashinfer_python), "--gradmode-no-libraries", "engine/runner.py"], cwd=folder,
                          capture_output=True, text=True, timeout=600, env=env)
    assert "GM202" not in proc.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_pre_commit(tmp_path, flashinfer_python, env):
    pytest.importorskip("pre_commit")
    from .test_precommit import sh

    hooks = tmp_path / "hooks"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ("lints", "codemods"):
        shutil.copytree(os.path.join(root, name), hooks / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", ".pre-commit-hooks.yaml", "README.md"):
        shutil.copy(os.path.join(root, name), hooks / name)
    for args in (("init", "-q"), ("add", "."), ("-c", "user.email=t@example.com", "-c", "user.name=t", "-c",
                                                  "commit.gpgsign=false", "commit", "-qm", "hooks")):
        sh("git", *args, cwd=hooks)
    files = _engine("torch.inference_mode()")
    # the hook runs in pre-commit's own environment: the engine says where its libraries are installed
    files["pyproject.toml"] = f'[tool.gradmode]\npython = "{flashinfer_python}"\n'
    repo = write_package(tmp_path / "repo", files)
    sh("git", "init", "-q", cwd=repo)
    sh("git", "add", ".", cwd=repo)
    proc = sh(sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "gradmode-lint", "--all-files", cwd=repo,
              check=False, env=dict(env, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home")))
    assert proc.returncode == 1 and "engine/runner.py:7:9: GM202" in proc.stdout, proc.stdout + proc.stderr
