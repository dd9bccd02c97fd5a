"""An environment with a real library installed, for the tests of installed-library analysis.

The wheel is downloaded from the package registry (``pip download --no-deps``, pinned by sha256) into
``tests/.downloads/`` (git-ignored; a wheel already there, or in ``.bench/corpus/dl/``, is reused),
and installed into a virtual-environment layout under the test's temporary folder: its Python
files and its ``.dist-info`` (``RECORD``, ``METADATA``, ``top_level.txt``), as pip lays them out.
Nothing of it is imported or run: the linter only reads it. Upstream code is never committed.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
DOWNLOADS = REPO / "tests" / ".downloads"
ALSO_LOOK_IN = (REPO / ".bench" / "corpus" / "dl",)

FLASHINFER = ("flashinfer-python==0.7.4", "flashinfer_python-0.7.4-py3-none-any.whl",
              "a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_wheel(requirement: str, filename: str, sha256: str) -> tuple[Optional[Path], str]:
    """The verified wheel, or None and why it could not be had."""
    for folder in (DOWNLOADS, *ALSO_LOOK_IN):
        candidate = folder / filename
        if candidate.is_file() and _sha256(candidate) == sha256:
            return candidate, ""
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--timeout", "20", "--retries", "1", "-d", str(DOWNLOADS), requirement],
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"pip download {requirement} failed: {exc}"
    wheel = DOWNLOADS / filename
    if proc.returncode != 0 or not wheel.is_file():
        return None, f"pip download {requirement} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}"
    if _sha256(wheel) != sha256:
        wheel.unlink()
        return None, f"{filename}: sha256 mismatch"
    return wheel, ""


def install(wheel: Path, venv: Path) -> Path:
    """Lay the wheel's Python files and dist-info out in ``venv`` (as pip does); the interpreter's path.
    The interpreter is an empty placeholder: the linter finds site-packages beside it and never runs it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / version / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            top = member.split("/", 1)[0]
            if member.endswith("/") or ".." in member.split("/"):
                continue
            if member.endswith(".py") or (top.endswith(".dist-info") and member.rsplit("/", 1)[-1] in
                                          ("RECORD", "METADATA", "top_level.txt", "WHEEL")):
                target = site / member
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
    (venv / "pyvenv.cfg").write_text(f"home = {os.path.dirname(sys.executable)}\n")
    interpreter = venv / "bin" / "python"
    interpreter.parent.mkdir(parents=True, exist_ok=True)
    interpreter.write_text("")
    return interpreter
