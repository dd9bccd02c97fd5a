"""Reading Python sources: regular files only, decoded as Python decodes them (BOM, PEP 263), split
into lines as Python splits them; and the bytes of our own files (a cache, a baseline)."""
from __future__ import annotations

import dataclasses
import errno
import io
import os
import re
import stat
import tokenize
from typing import Callable, Optional, Union

from .model import FileError


MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclasses.dataclass
class SourceFile:
    path: str
    text: str
    encoding: str  # as detected: "utf-8", "utf-8-sig" (BOM), or a PEP 263 cookie
    raw: bytes


def read_source(path: str, max_bytes: int = MAX_FILE_BYTES) -> Union[SourceFile, FileError]:
    """Read and decode a Python file, or say in one line why it cannot be.

    Only regular files are read: a FIFO, socket or device named ``*.py`` would block the run
    (or never end), so it is refused before it is opened, and opened non-blocking in case it
    was swapped in between.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    if stat.S_ISDIR(st.st_mode):
        return FileError(path, "is a directory, not a Python file")
    if not stat.S_ISREG(st.st_mode):
        return FileError(path, NOT_REGULAR)
    if st.st_size > max_bytes:
        return _too_big(path, st.st_size, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return FileError(path, NOT_REGULAR)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        return FileError(path, f"cannot read: {exc.strerror or exc}")
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > max_bytes:  # it grew since the stat
        return _too_big(path, len(raw), max_bytes)
    return decode_source(path, raw)


NOT_REGULAR = "not a regular file"
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _too_big(path: str, size: int, max_bytes: int) -> FileError:
    return FileError(path, f"skipped: {size} bytes is over the {max_bytes}-byte limit (--max-file-size)")


def is_regular_file(path: str) -> Optional[bool]:
    """True for a regular file (links followed), False for a FIFO, socket, device or folder, None if unknown."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return None


def source_from_text(path: str, text: str) -> SourceFile:
    """A file's text already decoded (stdin, an editor's buffer): never decoded again, since a coding
    cookie in it (``latin-1``) would then be applied to the UTF-8 it is held in."""
    return SourceFile(path, text, "utf-8", text.encode("utf-8", "surrogatepass"))


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


def text_reader(overrides: dict[str, str]) -> Callable[[str], str]:
    """``text_of(path)``: the text given for ``path`` (an editor's unsaved buffer), else the file's
    ("" when it cannot be read: the caller has reported that already)."""
    def text_of(path: str) -> str:
        if path in overrides:
            return overrides[path]
        source = read_source(path)
        return source.text if isinstance(source, SourceFile) else ""
    return text_of


def read_regular_bytes(path, max_bytes: Optional[int] = None, follow_links: bool = True) -> bytes:
    """The bytes of a regular file (a cache file, a baseline); raises OSError for anything else: a
    FIFO or device is refused before it is read (it would block or never end), as is a file over
    ``max_bytes`` and, without ``follow_links``, a symbolic link."""
    fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
                 | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0)))
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise OSError(f"over {max_bytes} bytes")
        return handle.read() if max_bytes is None else handle.read(max_bytes + 1)


_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+\Z")


def source_lines(text: str) -> list[str]:
    """Lines as Python sees them, with their ends: ended by LF, CRLF or CR only (``str.splitlines``
    also splits at form feeds and other characters, which are not line ends in source code)."""
    return _LINE.findall(text)
