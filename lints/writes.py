"""Writing files whole or not at all: a fixed source through a temp file renamed over it (or in place
where a rename would lose something), with SIGINT/SIGTERM/SIGHUP deferred until the file is whole,
abandoned temp files swept, and nothing written for a run that is gone; reports and baselines as a
shell's ``>`` would write them."""
from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import tempfile
import time
from typing import Iterator, Optional

from .child_processes import PARENT_GONE, STOP_SIGNALS, parent_gone, pid_alive
from .sources import NOT_REGULAR

_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def is_read_only(path: str) -> bool:
    """No write bit at all (root could still write it, but the owner asked us not to)."""
    try:
        return (os.stat(path).st_mode & 0o222) == 0 or not os.access(path, os.W_OK)
    except OSError:
        return True


class FileChangedError(OSError):
    """The file on disk is no longer the content the fix was computed from."""


# Temp files are named ``.gradmode-PID-RANDOM.tmp`` (older versions: ``.gradmode-RANDOM.tmp``).
_TEMP_PREFIX = ".gradmode-"
_TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"\.gradmode-(?:(?P<pid>\d+)-)?[A-Za-z0-9_]+\.tmp\Z")
STALE_TEMP_SECONDS = 600  # a write takes milliseconds: a temp file this old is abandoned, whoever made it
_in_flight: set[str] = set()  # temp files this process is writing now
_swept: set[str] = set()  # folders already cleaned of stale temp files by this process


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done (they are delivered right after it).

    A write is therefore never interrupted by them halfway; only SIGKILL (or a power cut) can.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def remove_in_flight_temps() -> None:
    """Remove the temp files this process is writing (for a signal handler that is about to exit)."""
    for tmp in list(_in_flight):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _in_flight.discard(tmp)


def sweep_stale_temps(folder: str) -> list[str]:
    """Remove our own abandoned temp files (a run killed by SIGKILL) from ``folder``; the removed paths.

    A temp file is abandoned when the process named in it is gone, or when it is older than
    ``STALE_TEMP_SECONDS``; one that another live run is writing now is left alone.
    """
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None or entry.path in _in_flight:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        pid = match.group("pid")
        if now - st.st_mtime > STALE_TEMP_SECONDS or (pid is not None and not pid_alive(int(pid))):
            try:
                os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass
    return removed


def write_file(path: str, data: bytes, expected: Optional[bytes] = None) -> str:
    """Replace the content of ``path`` with ``data``, keeping what makes the file itself; the method used.

    The file is written whole or not at all: ``data`` goes to a temp file in the same folder
    (fsynced, given the file's mode, owner and group) that is renamed over it ("replace"), so a kill
    at any moment leaves either the old or the new content, never half of it. A rename gives the
    file a new inode, so where it would lose something the file is instead rewritten in place
    ("in-place": open, write, truncate, fsync; the same inode) - when the file has other hard links,
    when its owner or group cannot be given to the temp file, or when the temp file cannot be
    created or renamed (a folder we may not write to, a bind-mounted file). This is vim's
    ``backupcopy=auto``. Both defer SIGINT/SIGTERM/SIGHUP until the write is done.

    With ``expected``, the file must still hold exactly those bytes (the content the fix was
    computed from), else ``FileChangedError`` is raised and nothing is written.
    Symlinks are written through, not replaced.
    """
    _end_if_orphaned()
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, NOT_REGULAR)
    folder = os.path.dirname(real) or "."
    if folder not in _swept:
        _swept.add(folder)
        sweep_stale_temps(folder)
    if st.st_nlink <= 1:
        try:
            if _write_by_rename(real, data, st, folder, expected):
                return "replace"
        except FileChangedError:
            raise
        except OSError:
            pass  # could not create, fill or rename the temp file: write in place instead
    _write_in_place(real, data, expected)
    return "in-place"


def _end_if_orphaned() -> None:
    """Nothing is written for a run that is gone: the worker ends, its temp files removed."""
    if parent_gone():
        remove_in_flight_temps()
        os._exit(PARENT_GONE)


def write_new_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` (a report, a baseline) as a shell's ``>`` would, but whole or not at
    all where that changes nothing else: a new file, or a regular file of ours that we may write in a
    folder we may write, is replaced through a temp file renamed over it, keeping its mode; through a
    symbolic link, the file it points to is (the link stays). Anything else is written in place, as
    ``>`` does: ``/dev/stdout``, a FIFO or a terminal (a regular file renamed over it would replace
    it), a file with other hard links (they keep seeing it), someone else's file (it stays theirs), a
    file in a folder we may not write; and a read-only file is refused, as ``>`` refuses it."""
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    folder = os.path.dirname(os.path.abspath(target))
    if st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_uid != os.geteuid()
                           or not os.access(target, os.W_OK) or not os.access(folder, os.W_OK)):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        with open(target, "wb") as handle:  # a FIFO blocks until read, as with `> fifo`
            handle.write(data)
        return
    fd, temp = tempfile.mkstemp(prefix=".gradmode-", suffix=".tmp", dir=folder)
    try:
        # mkstemp's 0600: the file gets the mode it had, or a new file's (0666 less the umask)
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def _same_content(fd: int, expected: bytes) -> bool:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    size = 0
    while size <= len(expected):
        chunk = os.read(fd, max(65536, len(expected) + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks) == expected


def _check_unchanged(real: str, expected: Optional[bytes]) -> None:
    if expected is None:
        return
    fd = os.open(real, os.O_RDONLY | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        same = _same_content(fd, expected)
    finally:
        os.close(fd)
    if not same:
        raise FileChangedError(errno.EAGAIN, "the file changed on disk while it was being fixed")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_by_rename(real: str, data: bytes, st: os.stat_result, folder: str, expected: Optional[bytes]) -> bool:
    """False when the temp file cannot get the file's owner and group (then write in place)."""
    with deferred_signals():
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f"{_TEMP_PREFIX}{os.getpid()}-", suffix=_TEMP_SUFFIX)
        _in_flight.add(tmp)
        try:
            try:
                mine = os.fstat(fd)
                if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid) and hasattr(os, "fchown"):
                    try:
                        os.fchown(fd, st.st_uid if mine.st_uid != st.st_uid else -1,
                                  st.st_gid if mine.st_gid != st.st_gid else -1)
                    except PermissionError:
                        return False
                os.fchmod(fd, stat.S_IMODE(st.st_mode))  # after chown, which clears set-id bits
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            _check_unchanged(real, expected)
            _end_if_orphaned()  # the run may have died while the temp file was written
            os.replace(tmp, real)
            _in_flight.discard(tmp)
        finally:
            if tmp in _in_flight:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                _in_flight.discard(tmp)
    _fsync_folder(folder)
    return True


def _write_in_place(real: str, data: bytes, expected: Optional[bytes]) -> None:
    with deferred_signals():
        fd = os.open(real, os.O_RDWR | _O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, NOT_REGULAR)
            if expected is not None and not _same_content(fd, expected):
                raise FileChangedError(errno.EAGAIN, "the file changed on disk while it was being fixed")
            _end_if_orphaned()
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort; not possible everywhere)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
