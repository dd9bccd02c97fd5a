"""The kept buffers and their in-place updates, found in a forked child while the parent labels phases and
grad modes. Both need the whole call graph, which the child inherits once it is built, and neither needs the
other: on sglang 0.5.23 the two take about 2.7 s and 1.7 s one after the other, and a core sits idle after
the summarising workers end.

Only where a fork is safe and worth it: a POSIX fork, one thread in the process (the language server runs
threads), and more than one job asked for. The result comes back pickled through a pipe from our own child
(as the summarising pool's results do); a child that fails, dies or sends something unreadable is waited for
and the parent finds the buffers itself.
"""
from __future__ import annotations

import os
import pickle
import signal
import threading
from typing import NamedTuple, Optional

from .buffers import Allocation, Mutation
from .child_processes import die_with_parent


class KeptBuffers(NamedTuple):
    allocations: list[Allocation]
    # each allocation with the in-place updates of its buffer after it (``rules/_buffers.lazy_buffers``)
    updated: list[tuple[Allocation, list[Mutation]]]


class Pending(NamedTuple):
    pid: int
    read_fd: int


def can_fork(jobs: int) -> bool:
    return jobs > 1 and hasattr(os, "fork") and threading.active_count() == 1


def start(find) -> Optional[Pending]:
    """Fork a child that runs ``find()`` (-> ``KeptBuffers``) and sends back its result; None if it cannot."""
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
            data = pickle.dumps(find(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)  # no atexit handlers, no flushing of the parent's buffered output
    os.close(write_fd)
    return Pending(pid, read_fd)


def finish(pending: Pending) -> Optional[KeptBuffers]:
    """The child's result, once it is done; None if it failed."""
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
    except Exception:  # noqa: BLE001 - a child that died mid-write: the parent finds the buffers itself
        return None
    return found if isinstance(found, KeptBuffers) else None


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
