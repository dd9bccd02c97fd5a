"""Fetch the benchmark corpora: pinned wheels, checked by sha256, only their ``.py`` files unpacked.

    python bench/corpus.py                    # all of them
    python bench/corpus.py sglang-0.5.15      # one
    python bench/corpus.py --list             # print name and tree folder, fetch nothing

Everything goes under ``.bench/corpus/`` (git-ignored; upstream code is never committed):

* ``.bench/corpus/dl/``: the wheels, from ``pip download --no-deps`` with ``--require-hashes``
  (pip picks the one file with the pinned hash). A wheel already there with the right sha256 is
  reused, so copying the wheels in by hand works offline. A project with no wheel on the index
  (``SDISTS``) is pinned by its sdist instead (``.tar.gz``; pip prepares its metadata to download it).
  Some wheels are platform-specific (lmdeploy: cp311 manylinux_2_28 x86_64; vllm: abi3
  manylinux_2_28 x86_64): elsewhere, pass ``--pip-arg=--platform=...`` etc. or copy them in.
* ``.bench/corpus/<name>/<package>/**.py``: the Python files of the package, nothing else.
* ``.bench/corpus/<name>/pyproject.toml``: a marker written here, with an empty ``[tool.gradmode]``
  table. It makes ``<name>/`` the project root (the tree would otherwise belong to this
  repository's project, which has its own settings) and means "default settings" to the linter.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / ".bench" / "corpus"
DOWNLOADS = CORPUS / "dl"

# name -> (requirement, sha256 of the wheel (or sdist, see SDISTS), package folder inside the wheel)
CORPORA = {
    "sglang-0.5.15": ("sglang==0.5.15", "21492759b4b99e117bd81610f633422f3fdae2896c2cde6931eab886deccc44f", "sglang"),
    "sglang-0.5.23": ("sglang==0.5.23", "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937", "sglang"),
    "vllm-0.11.0": ("vllm==0.11.0", "3861c75ff2b12e24f6d179ff5c084d791b42ded8675d76c8706697c79f68cd62", "vllm"),
    # no serving engine: a precision check on a big PyTorch library
    "transformers-5.25.0": ("transformers==5.25.0", "8ca7a96cc329e5a053c9e770711e73d7bd9d77240ff62049fca6d253965cda52",
                            "transformers"),
    # newest releases on the index on the day these were added
    "vllm-0.34.0": ("vllm==0.34.0", "79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2", "vllm"),
    "lmdeploy-0.18.0": ("lmdeploy==0.18.0", "e6790a25dcdb0345c160567fdf2ac604fec319389523a8b806834c9d92c8ffe1",
                        "lmdeploy"),
    "exllamav2-0.3.2": ("exllamav2==0.3.2", "7cd61ae4bf1d8d12034595ab9731f0f43bac415d6394fbb273d4383293d6079e",
                        "exllamav2"),
    "flashinfer-0.7.4": ("flashinfer-python==0.7.4",
                         "a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32", "flashinfer"),
    "deepspeed-0.19.8": ("deepspeed==0.19.8", "9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af",
                         "deepspeed"),
}
# names pinned by an sdist (``<dist>-<version>.tar.gz``, members under ``<dist>-<version>/``): no wheel on the index
SDISTS = {"deepspeed-0.19.8"}
MARKER = ("# Written by bench/corpus.py: makes this folder the project root of the unpacked tree.\n"
          "# The table is empty: the linter runs with its default settings.\n[tool.gradmode]\n")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def project_dir(name: str) -> Path:
    """The folder to run the linter in (holds the marker and the package)."""
    return CORPUS / name


def tree(name: str) -> Path:
    """The package folder: ``.bench/corpus/<name>/<package>``."""
    return project_dir(name) / CORPORA[name][2]


def _wheel(name: str) -> Path | None:
    req, digest, _ = CORPORA[name]
    dist, version = req.split("==")
    patterns = ({f"{dist}-{version}.tar.gz", f"{dist.replace('-', '_')}-{version}.tar.gz"} if name in SDISTS
                else {f"{dist.replace('-', '_')}-{version}-*.whl"})
    for path in sorted(p for pattern in patterns for p in DOWNLOADS.glob(pattern)):
        if sha256(path) == digest:
            return path
    return None


def download(name: str, extra_pip: list[str]) -> Path:
    wheel = _wheel(name)
    if wheel is not None:
        return wheel
    req, digest, _ = CORPORA[name]
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text(f"{req} --hash=sha256:{digest}\n")
        binary = [] if name in SDISTS else ["--only-binary=:all:"]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *binary, "--require-hashes",
               "-r", str(reqs), "-d", str(DOWNLOADS), *extra_pip]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    wheel = _wheel(name)
    if wheel is None:
        raise SystemExit(f"corpus: {name}: no wheel (or sdist) with sha256 {digest} in {DOWNLOADS} after pip download")
    return wheel


def _members(name: str, archive: Path):
    """(path parts, read) of the regular files in the wheel, or the sdist less its top folder."""
    if name in SDISTS:
        with tarfile.open(archive, "r:gz") as tf:
            for info in tf:
                if info.isfile():
                    yield info.name.split("/")[1:], lambda info=info: tf.extractfile(info).read()
        return
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if not info.is_dir():
                yield info.filename.split("/"), lambda info=info: zf.read(info)


def extract(name: str, wheel: Path) -> tuple[int, int]:
    """Unpack ``<package>/**.py`` of ``wheel`` (or the sdist); (files, lines)."""
    package = CORPORA[name][2]
    dest = project_dir(name)
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text().split()[0] == sha256(wheel):
        files, lines = (int(x) for x in stamp.read_text().split()[1:3])
        return files, lines
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    files = lines = 0
    for parts, read in _members(name, wheel):
        if (not parts or parts[0] != package or not parts[-1].endswith(".py")
                or ".." in parts or "" in parts):
            continue
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = read()
        target.write_bytes(data)
        files += 1
        lines += data.count(b"\n")
    (dest / "pyproject.toml").write_text(MARKER)
    stamp.write_text(f"{sha256(wheel)} {files} {lines}\n")
    return files, lines


def ensure(name: str, extra_pip: list[str] = ()) -> Path:
    """Fetch and unpack ``name`` if needed; its package folder."""
    files, lines = extract(name, download(name, list(extra_pip)))
    print(f"corpus: {name}: {files} .py files, {lines} lines in {os.path.relpath(tree(name), REPO)}", flush=True)
    return tree(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(CORPORA) + " (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--pip-arg", action="append", default=[], help="extra argument for pip download "
                        "(e.g. --pip-arg=--find-links=DIR)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {', '.join(unknown)} (known: {', '.join(CORPORA)})")
    for name in args.names or CORPORA:
        if args.list:
            print(name, os.path.relpath(tree(name), REPO))
        else:
            ensure(name, args.pip_arg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
