"""Finding files, running a per-file job over them (serially or in processes), and the result cache."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import fnmatch
import hashlib
import io
import os
import pickle
import sys
import tempfile
import tokenize
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence, TypeVar, Union

from . import __version__
from .model import FileError

T = TypeVar("T")

MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclasses.dataclass
class SourceFile:
    path: str
    text: str
    encoding: str  # as detected: "utf-8", "utf-8-sig" (BOM), or a PEP 263 cookie
    raw: bytes


def read_source(path: str, max_bytes: int = MAX_FILE_BYTES) -> Union[SourceFile, FileError]:
    """Read and decode a Python file, or say in one line why it cannot be."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    if os.path.isdir(path):
        return FileError(path, "is a directory, not a Python file")
    if st.st_size > max_bytes:
        return FileError(path, f"skipped: {st.st_size} bytes is over the {max_bytes}-byte limit (--max-file-size)")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    return decode_source(path, raw)


def decode_source(path: str, raw: bytes) -> Union[SourceFile, FileError]:
    if b"\x00" in raw:
        return FileError(path, "skipped: binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except SyntaxError as exc:  # raised by detect_encoding for undecodable first lines or a bad cookie
        return FileError(path, f"cannot decode: not valid UTF-8 and no usable PEP 263 coding declaration "
                               f"({getattr(exc, 'msg', exc)})")
    except (UnicodeDecodeError, LookupError) as exc:
        where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
        return FileError(path, f"cannot decode as {encoding}{where}: not valid UTF-8 and no usable PEP 263 "
                               f"coding declaration")
    return SourceFile(path, text, encoding, raw)




def discover(paths: Sequence[str], exclude: Iterable[str]) -> tuple[list[str], list[FileError]]:
    """Python files under ``paths``; explicitly named files are taken as they are.

    Directory walks do not follow symlinked folders (no loops) and skip excluded names.
    """
    exclude = tuple(exclude)
    files: list[str] = []
    errors: list[FileError] = []

    def excluded(name: str, full: str) -> bool:
        full = full.replace(os.sep, "/")
        return any(fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(full, pat) or fnmatch.fnmatch(full, f"*/{pat}")
                   for pat in exclude)

    for given in paths:
        if os.path.isdir(given):
            for root, dirs, names in os.walk(given, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not excluded(d, os.path.join(root, d)))
                for name in sorted(names):
                    full = os.path.join(root, name)
                    if name.endswith(".py") and not excluded(name, full):
                        files.append(full)
        elif os.path.lexists(given):
            files.append(given)  # a broken link or unreadable file reports its own error
        else:
            errors.append(FileError(given, "no such file or directory"))
    return sorted(dict.fromkeys(files)), errors


def run_jobs(func: Callable[[str], T], items: Sequence[str], jobs: int,
             progress: Optional[Callable[[int], None]] = None) -> list[T]:
    """``[func(i) for i in items]``, in ``jobs`` processes when that pays; order is kept."""
    if jobs <= 1 or len(items) < 2:
        out = []
        for item in items:
            out.append(func(item))
            if progress:
                progress(1)
        return out
    chunk = max(1, min(64, len(items) // (jobs * 8)))
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(items))) as pool:
        out = []
        for result in pool.map(func, items, chunksize=chunk):
            out.append(result)
            if progress:
                progress(1)
        return out


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


class ResultCache:
    """Per-file results keyed by content hash, tool version and config (like ruff's cache).

    Stored as one pickle per cache namespace under ``cache_dir``; written atomically.
    """

    def __init__(self, cache_dir: Path, namespace: str) -> None:
        self.path = Path(cache_dir) / f"{__version__}-{namespace}.pickle"
        self._entries: dict[str, object] = {}
        self._dirty = False
        try:
            with open(self.path, "rb") as handle:
                data = pickle.load(handle)
            if isinstance(data, dict):
                self._entries = data
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError):
            self._entries = {}

    @staticmethod
    def key(raw: bytes) -> str:
        return hashlib.blake2b(raw, digest_size=16).hexdigest()

    def get(self, key: str) -> Optional[object]:
        return self._entries.get(key)

    def put(self, key: str, value: object) -> None:
        if self._entries.get(key) != value:
            self._entries[key] = value
            self._dirty = True

    def prune(self, live: Iterable[str]) -> None:
        live = set(live)
        stale = [k for k in self._entries if k not in live]
        if len(stale) > len(live):  # keep caches of other checkouts small, not empty
            for k in stale:
                del self._entries[k]
            self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.path.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Created by gradmode-lint\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(self._entries, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only checkout still lints
            print(f"gradmode-lint: warning: cannot write cache {self.path}: {exc.strerror or exc}", file=sys.stderr)


def chunks(seq: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(seq), size):
        yield seq[start:start + size]


def is_read_only(path: str) -> bool:
    """No write bit at all (root could still write it, but the owner asked us not to)."""
    try:
        return (os.stat(path).st_mode & 0o222) == 0 or not os.access(path, os.W_OK)
    except OSError:
        return True


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` via a temp file in the same folder; keep its mode."""
    real = os.path.realpath(path)  # write through a symlink, not over it
    mode = os.stat(real).st_mode & 0o7777
    folder = os.path.dirname(real) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gradmode-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
