"""Part of the whole-project analysis done in a forked child while the parent goes on: the analysis runs in
one process after the summarising workers end, with a core idle. The child inherits what the parent built
(the index, the call graph) without copying it; its result comes back pickled through a pipe from our own
child, as the summarising pool's results do. Used for half of the call graph (``lints/callgraph.py``) and
for the kept buffers (``ProjectAnalysis.kept_buffers``).

Only where a fork is safe and worth it: a POSIX fork, one thread in the process (the language server runs
threads), and more than one job asked for. A child that fails, dies or sends something unreadable is
waited for, and the parent does its work itself.
"""
from __future__ import annotations

import os
import pickle
import signal
import threading
from typing import Any, Callable, NamedTuple, Optional

from .child_processes import die_with_parent


class Pending(NamedTuple):
    pid: int
    read_fd: int


def can_fork(jobs: int) -> bool:
    return jobs > 1 and hasattr(os, "fork") and threading.active_count() == 1


def start(work: Callable[[], Any]) -> Optional[Pending]:
    """Fork a child that runs ``work()`` and sends back its result; None if it cannot."""
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(read_fd)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us
            die_with_parent(parent)
            data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)  # no atexit handlers, no flushing of the parent's buffered output
    os.close(write_fd)
    return Pending(pid, read_fd)


def finish(pending: Pending, kind: type) -> Optional[Any]:
    """The child's result, once it is done, if it is a ``kind``; None if it failed."""
    chunks = []
    try:
        with os.fdopen(pending.read_fd, "rb") as source:
            while chunk := source.read(1 << 20):
                chunks.append(chunk)
    except OSError:
        chunks = []
    finally:
        status = _reap(pending.pid)
    if status != 0 or not chunks:
        return None
    try:
        found = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - a child that died mid-write: the parent does the work itself
        return None
    return found if isinstance(found, kind) else None


def cancel(pending: Pending) -> None:
    """Stop a child whose result is not wanted (the run failed or ended first)."""
    try:
        os.kill(pending.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.close(pending.read_fd)
    except OSError:
        pass
    _reap(pending.pid)


def _reap(pid: int) -> int:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status)
