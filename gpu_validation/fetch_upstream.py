"""Fetch the pinned upstream SGLang files that gpu_validation's upstream tests run and lint.

    python gpu_validation/fetch_upstream.py            # download, verify, extract (idempotent)
    python gpu_validation/fetch_upstream.py --check    # exit 0 if the files are there and verified, else 1

For each pinned release it runs ``pip download --no-deps`` for the exact wheel (CPython 3.11,
manylinux_2_34 x86-64, the one the sha256 below belongs to, from any host Python), checks the
wheel's sha256, and extracts ONLY the files listed in ``FILES`` into
``gpu_validation/upstream/sglang-<version>/`` (ignored by git; nothing upstream is committed).
Each extracted file is checked twice: against the wheel's own RECORD and against the sha256 pinned
here. The wheels themselves are downloaded into a temporary directory and deleted afterwards
(``--keep-wheels DIR`` keeps them). A second run finds the verified files and does nothing.

sglang 0.5.15 ships the bug of upstream issue #33470 (``torch.inference_mode()`` in
``flashinfer_autotune_context`` and at the end of ``BaseRunner._dummy_run``); 0.5.23 has the fix.
"""
from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
UPSTREAM_DIR = HERE / "upstream"
MANIFEST = UPSTREAM_DIR / "MANIFEST.json"

RUNNER = "sglang/srt/model_executor/runner"
FILES = (f"{RUNNER}/flashinfer_autotune.py", f"{RUNNER}/base_runner.py")

# version -> wheel file name, wheel sha256, {member: sha256 of the extracted file}
PINS = {
    "0.5.15": {
        "wheel": "sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl",
        "sha256": "21492759b4b99e117bd81610f633422f3fdae2896c2cde6931eab886deccc44f",
        "files": {
            f"{RUNNER}/flashinfer_autotune.py": "54df3a1e7018790eba5fab6257f40aa6e8e0d8f54cbc008273dfd74eeec1d661",
            f"{RUNNER}/base_runner.py": "a1443eb9cfd1e5bd9d81066b2f14556fe9897d5666b851aa1b3b57b6726eb636",
        },
    },
    "0.5.23": {
        "wheel": "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
        "sha256": "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
        "files": {
            f"{RUNNER}/flashinfer_autotune.py": "9695cce0d73becb494a26272c5a8f1ad5ee000ba852cc297b2f1963f88fc0131",
            f"{RUNNER}/base_runner.py": "31f99235674a52e4c5fd1248e29e41468f8e1a55a15c3cd4c907028e69ffc707",
        },
    },
}

# The wheel the pinned sha256 belongs to, whatever Python runs this script.
PIP_TARGET = ["--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11", "--abi", "cp311",
              "--platform", "manylinux_2_34_x86_64"]

HOW_TO_GET = "python gpu_validation/fetch_upstream.py"


def version_dir(version: str) -> Path:
    return UPSTREAM_DIR / f"sglang-{version}"


def path_of(version: str, member: str) -> Path:
    """Where the extracted ``member`` (e.g. ``sglang/srt/.../base_runner.py``) of ``version`` lies."""
    return version_dir(version) / member


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def missing() -> list[str]:
    """Problems with the extracted files (absent or wrong hash); empty when all are present and verified."""
    problems = []
    for version, pin in PINS.items():
        for member, digest in pin["files"].items():
            path = path_of(version, member)
            if not path.is_file():
                problems.append(f"{path.relative_to(HERE.parent)}: absent")
            elif _sha256_file(path) != digest:
                problems.append(f"{path.relative_to(HERE.parent)}: sha256 differs from the pin")
    return problems


def _record_hashes(zf: zipfile.ZipFile, version: str) -> dict[str, str]:
    """member -> hex sha256 from the wheel's RECORD."""
    record = zf.read(f"sglang-{version}.dist-info/RECORD").decode()
    out = {}
    for row in csv.reader(io.StringIO(record)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            raw = base64.urlsafe_b64decode(row[1][len("sha256="):] + "==")
            out[row[0]] = raw.hex()
    return out


def _download(version: str, dest: Path, pip_args: tuple = ()) -> Path:
    pin = PINS[version]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *PIP_TARGET, *pip_args, "-d", str(dest),
           f"sglang=={version}"]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download sglang=={version} failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    wheel = dest / pin["wheel"]
    if not wheel.is_file():
        raise RuntimeError(f"pip download did not produce {pin['wheel']}; got {sorted(p.name for p in dest.iterdir())}")
    digest = _sha256_file(wheel)
    if digest != pin["sha256"]:
        raise RuntimeError(f"{wheel.name}: sha256 {digest}, expected {pin['sha256']}")
    print(f"  {wheel.name}: sha256 {digest} OK", flush=True)
    return wheel


def _extract(version: str, wheel: Path) -> None:
    pin = PINS[version]
    with zipfile.ZipFile(wheel) as zf:
        record = _record_hashes(zf, version)
        for member, digest in pin["files"].items():
            data = zf.read(member)
            got = _sha256_bytes(data)
            if record.get(member) != got:
                raise RuntimeError(f"{wheel.name}:{member}: sha256 {got} disagrees with the wheel's RECORD")
            if got != digest:
                raise RuntimeError(f"{wheel.name}:{member}: sha256 {got}, pinned {digest}")
            out = path_of(version, member)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, out)
            print(f"  extracted {out.relative_to(HERE.parent)} (sha256 {got})", flush=True)


def _write_manifest() -> None:
    manifest = {
        "how": HOW_TO_GET,
        "releases": {v: {"wheel": p["wheel"], "wheel_sha256": p["sha256"],
                         "files": {m: {"path": str(path_of(v, m).relative_to(HERE.parent)), "sha256": d}
                                   for m, d in p["files"].items()}}
                     for v, p in PINS.items()},
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")


def fetch(keep_wheels: Path | None = None, quiet: bool = False, pip_args: tuple = ()) -> list[Path]:
    """Make sure every pinned file is extracted and verified; download only what is missing.

    ``pip_args`` go to ``pip download`` (the tests pass a short ``--timeout`` and ``--retries``).
    Returns the extracted paths. Raises RuntimeError when a download or a check fails.
    """
    todo = [v for v, pin in PINS.items()
            if any(not path_of(v, m).is_file() or _sha256_file(path_of(v, m)) != d for m, d in pin["files"].items())]
    if not todo:
        if not quiet:
            print(f"upstream files present and verified under {UPSTREAM_DIR.relative_to(HERE.parent)}/ "
                  f"(sglang {', '.join(PINS)}); nothing to do")
    else:
        UPSTREAM_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="sglang-wheels-") as tmp:
            dest = keep_wheels if keep_wheels is not None else Path(tmp)
            dest.mkdir(parents=True, exist_ok=True)
            for version in todo:
                wheel = dest / PINS[version]["wheel"]
                if wheel.is_file() and _sha256_file(wheel) == PINS[version]["sha256"]:
                    print(f"  {wheel.name}: already downloaded, sha256 OK", flush=True)
                else:
                    wheel = _download(version, dest, pip_args)
                _extract(version, wheel)
    _write_manifest()
    left = missing()
    if left:
        raise RuntimeError("after fetching: " + "; ".join(left))
    return [path_of(v, m) for v, p in PINS.items() for m in p["files"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the extracted files; exit 1 if any is missing")
    parser.add_argument("--keep-wheels", type=Path, default=None, help="download the wheels into DIR and keep them")
    args = parser.parse_args(argv)
    if args.check:
        left = missing()
        for line in left:
            print(line)
        print("OK" if not left else f"missing: run `{HOW_TO_GET}`")
        return 1 if left else 0
    try:
        fetch(args.keep_wheels)
    except RuntimeError as exc:
        print(f"fetch_upstream: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
