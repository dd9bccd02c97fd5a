"""Installed libraries (``lints/libraries.py``) on a small library written for the test and laid out in a
virtual environment as pip does: the buffer lives in the library, the finding is reported on the project's
file, the library is never run, and its summaries are cached per distribution only when its files match
the ``RECORD``."""
from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from lints.options import Config

from .helpers import as_set, lint_run, write_package

LIBRARY = {
    "kernels/__init__.py": "from kernels.layer import MoELayer\n",
    "kernels/pool.py":
        "_POOL = {}\n"
        "def acquire(key, factory):\n"
        "    ws = _POOL.get(key)\n"
        "    if ws is None:\n"
        "        ws = factory()\n"
        "        _POOL[key] = ws\n"
        "    return ws\n",
    "kernels/layer.py":
        "import torch\n"
        "from kernels.pool import acquire\n"
        "class MoELayer:\n"
        "    def _ensure_workspace(self, n):\n"
        "        return acquire(('topk', n), lambda: torch.zeros(n, dtype=torch.long))\n"
        "    def forward(self, x):\n"
        "        ws = self._ensure_workspace(8)\n"
        "        ws[x.shape[0]:].fill_(-1)\n"
        "        return x\n",
}
ENGINE = {
    "pyproject.toml": "[tool.gradmode]\n",
    "engine/__init__.py": "",
    "engine/runner.py":
        "import torch\n"
        "from kernels import MoELayer\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.layer = MoELayer()\n"
        "    def prime(self, x):\n"
        "        with WARM_MODE:\n"
        "            self.layer.forward(x)\n"
        "    @torch.no_grad()\n"
        "    def execute_model(self, x):\n"
        "        return self.layer.forward(x[:4])\n"
        "def main():\n"
        "    runner = Runner()\n"
        "    runner.prime(torch.ones(8))\n"
        "    runner.execute_model(torch.ones(8))\n"
        "    print('served')\n"
        "if __name__ == '__main__':\n"
        "    main()\n",
}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_library(venv: Path, files: dict[str, str], tamper: bool = False) -> Path:
    """``files`` as an installed distribution ``kernels-1.0`` (with a RECORD; ``tamper``: one hash wrong)."""
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    rows = []
    for name, text in files.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        rows.append(f"{name},{_record_hash(text.encode() + (b'#' if tamper else b''))},{len(text)}")
    info = site / "kernels-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernels\nVersion: 1.0\nRequires-Dist: torch>=2.1\n")
    (info / "top_level.txt").write_text("kernels\n")
    (info / "RECORD").write_text("\n".join(rows + ["kernels-1.0.dist-info/RECORD,,"]) + "\n")
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").write_text("")  # never run: site-packages are found beside it
    return venv / "bin" / "python"


def _engine(mode: str) -> dict[str, str]:
    return {name: text.replace("WARM_MODE", mode) for name, text in ENGINE.items()}


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    folder = tmp_path / "user-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder / "gradmode-lint" / "libraries"


def test_buffer_in_a_library_is_reported_on_the_project_site(tmp_path, user_cache):
    python = install_library(tmp_path / "venv", LIBRARY)
    run = lint_run(tmp_path / "buggy", _engine("torch.inference_mode()"), Config(python=str(python)))
    assert as_set(run.findings) == {("engine/runner.py", "GM202", 7, 9)}
    notes = "\n".join(run.findings[0].notes)
    assert "kernels/pool.py:5 (kernels)" in notes  # the allocation, by its place in site-packages
    assert "`torch.inference_mode()` in `Runner.prime()` at engine/runner.py:7" in notes
    assert "`.fill_()` in `MoELayer.forward()` at kernels/layer.py:8 (kernels)" in notes
    fixed = lint_run(tmp_path / "fixed", _engine("torch.no_grad()"), Config(python=str(python)))
    assert fixed.findings == []
    alone = lint_run(tmp_path / "alone", _engine("torch.inference_mode()"),
                     Config(python=str(python), libraries=False))
    assert alone.findings == []  # the engine's own files hold no buffer


@pytest.mark.e2e  # runs the engine under CPU torch in a process of its own
def test_the_engine_really_crashes_and_its_fixed_form_runs(tmp_path):
    pytest.importorskip("torch")
    for mode, crashes in (("torch.inference_mode()", True), ("torch.no_grad()", False)):
        folder = tmp_path / mode[6:12]
        write_package(folder, {**_engine(mode), **LIBRARY})
        proc = subprocess.run([sys.executable, "-m", "engine.runner"], cwd=folder, capture_output=True, text=True,
                              timeout=120)
        if crashes:
            assert proc.returncode != 0 and "Inplace update to inference tensor outside InferenceMode" in proc.stderr
        else:
            assert proc.returncode == 0 and "served" in proc.stdout, proc.stderr[-2000:]


def test_library_summaries_are_cached_per_distribution(tmp_path, user_cache):
    python = install_library(tmp_path / "venv", LIBRARY)
    first = lint_run(tmp_path / "a", _engine("torch.inference_mode()"), Config(python=str(python)), use_cache=True)
    (cached,) = user_cache.glob("kernels-1.0-*.json")
    # the cache holds summaries only (JSON), and a second project reads them instead of the files
    stamp = cached.stat().st_mtime_ns
    second = lint_run(tmp_path / "b", _engine("torch.inference_mode()"), Config(python=str(python)), use_cache=True)
    assert as_set(first.findings) == as_set(second.findings) == {("engine/runner.py", "GM202", 7, 9)}
    assert cached.stat().st_mtime_ns == stamp


def test_files_that_do_not_match_the_record_are_never_cached(tmp_path, user_cache):
    python = install_library(tmp_path / "venv", LIBRARY, tamper=True)
    run = lint_run(tmp_path / "a", _engine("torch.inference_mode()"), Config(python=str(python)), use_cache=True)
    assert as_set(run.findings) == {("engine/runner.py", "GM202", 7, 9)}  # still analysed
    assert not list(user_cache.glob("*.json"))


def test_python_setting_is_read_relative_to_the_settings_file(tmp_path, user_cache):
    install_library(tmp_path / "proj" / ".venv", LIBRARY)
    files = _engine("torch.inference_mode()")
    files["pyproject.toml"] = '[tool.gradmode]\npython = ".venv/bin/python"\n'
    proc = subprocess.run([sys.executable, "-m", "lints", "--format", "concise", "--no-cache", "engine"],
                          cwd=write_package(tmp_path / "proj", files), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "engine/runner.py:7:9: GM202" in proc.stdout, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "lints", "--format", "concise", "--no-cache", "--no-libraries",
                           "engine"], cwd=tmp_path / "proj", capture_output=True, text=True, timeout=300)
    assert "GM202" not in proc.stdout


def test_a_library_that_does_not_require_torch_is_not_read(tmp_path, user_cache):
    python = install_library(tmp_path / "venv", LIBRARY)
    metadata = next((tmp_path / "venv").rglob("kernels-1.0.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace("Requires-Dist: torch>=2.1\n", "Requires-Dist: torchvision\n"))
    run = lint_run(tmp_path / "a", _engine("torch.inference_mode()"), Config(python=str(python)))
    assert run.findings == []  # no tensor can be kept by a library without torch: it is not summarised


def test_bad_library_settings_are_one_clear_error(tmp_path, user_cache):
    files = _engine("torch.inference_mode()")
    for setting, why in (('python = 3', "python must be a string"), ('libraries = "yes"', "libraries must be true or false")):
        files["pyproject.toml"] = f"[tool.gradmode]\n{setting}\n"
        folder = write_package(tmp_path / setting.split()[0], files)
        before = (folder / "engine" / "runner.py").read_text()
        proc = subprocess.run([sys.executable, "-m", "lints", "--no-cache", "engine"], cwd=folder,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr
        assert (folder / "engine" / "runner.py").read_text() == before


def test_a_python_that_does_not_exist_means_no_libraries(tmp_path, user_cache):
    run = lint_run(tmp_path, _engine("torch.inference_mode()"), Config(python=str(tmp_path / "no" / "bin" / "python")))
    assert run.errors == [] and run.findings == []  # nothing to read there: the project alone, no crash


def test_a_library_summary_whose_records_do_not_decode_is_read_from_the_library_again(tmp_path, user_cache):
    import json

    python = install_library(tmp_path / "venv", LIBRARY)
    first = lint_run(tmp_path / "a", _engine("torch.inference_mode()"), Config(python=str(python)), use_cache=True)
    (cached,) = user_cache.glob("kernels-1.0-*.json")
    data = json.loads(cached.read_text(encoding="utf-8"))
    garbled = 0
    for summary in data["modules"].values():
        for fn in summary["functions"].values():
            if fn["calls"]:
                fn["calls"] = [[["n", "torch.empty"], [], {}]]  # a call record too short
                garbled += 1
    assert garbled
    cached.write_text(json.dumps(data), encoding="utf-8")
    second = lint_run(tmp_path / "b", _engine("torch.inference_mode()"), Config(python=str(python)), use_cache=True)
    assert as_set(second.findings) == as_set(first.findings) == {("engine/runner.py", "GM202", 7, 9)}
