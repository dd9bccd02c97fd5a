"""Part of the whole-project analysis done in a forked child while the parent goes on: the analysis runs in
one process after the summarising workers end, with a core idle. The child inherits what the parent built
(the index, its half of the call graph) without copying it. It finds the other half of the call graph and
sends it; the parent sends its own half back; then each holds the whole graph, and the child finds the kept
buffers while the parent labels phases and grad modes (``CallGraph.build``, ``ProjectAnalysis``).

Messages are JSON, length-prefixed, through two pipes between our process and its own child; each side's
reader rebuilds its records from the data (``lints/`` loads no Python objects from bytes, so that nothing a
checkout ships could ever be loaded that way). Only where a fork is safe and worth it: a POSIX fork, one thread in the
process (the language server runs threads), more than one job asked for, and as much memory available as the
process holds. A child that fails, dies or sends something unreadable is waited for, and the parent does its
work itself.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import threading
from typing import IO, Any, Callable, NamedTuple, Optional, TypeVar

from .child_processes import die_with_parent
from .summary_cache import encode_json

_LENGTH = struct.Struct("<Q")
T = TypeVar("T")


class Conversation(NamedTuple):
    pid: int
    inbox: IO[bytes]  # the child's messages
    outbox: IO[bytes]  # ours to it


def can_fork(jobs: int) -> bool:
    return jobs > 1 and hasattr(os, "fork") and threading.active_count() == 1 and _memory_to_spare()


def _memory_to_spare() -> bool:
    """Whether the machine has as much memory available as this process holds: the child's pages are shared
    until written, but reading an object writes its reference count, so the two sides come to copy most of
    them (on sglang 0.5.23 the run's peak over the whole machine went from about 1.2 to 2.0 GiB). Told from
    ``/proc`` (Linux); where it cannot be told, no child."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            resident = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/meminfo", "rb") as handle:
            available = next(int(line.split()[1]) * 1024 for line in handle if line.startswith(b"MemAvailable:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return available >= resident


def converse(first: Callable[[], Any], then: Callable[[Any], Any]) -> Optional[Conversation]:
    """Fork a child that sends ``first()``, waits for one message from us, and sends ``then(message)`` (each
    value JSON data); None if no child can be started."""
    try:
        from_child, to_parent = os.pipe()
        from_parent, to_child = os.pipe()
    except OSError:
        return None
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        for fd in (from_child, to_parent, from_parent, to_child):
            os.close(fd)
        return None
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(from_child)
            os.close(to_child)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us
            die_with_parent(parent)
            with open(to_parent, "wb") as out, open(from_parent, "rb") as inbox:
                _send(out, first())
                message = _receive(inbox)
                if message is not None:
                    _send(out, then(json.loads(message)))
                    status = 0
        finally:
            os._exit(status)  # no atexit handlers, no flushing of the parent's buffered output
    os.close(to_parent)
    os.close(from_parent)
    return Conversation(pid, open(from_child, "rb"), open(to_child, "wb"))


def first_answer(talk: Conversation, read: Callable[[Any], T], reply: Callable[[], Any]) -> Optional[T]:
    """The child's first message, as ``read`` rebuilds it from its JSON data, after which ``reply()`` is sent to
    it; None if the child failed or sent what ``read`` refuses (the child is then ended)."""
    found = _loaded(_receive(talk.inbox), read)
    if found is None:
        end(talk)
        return None
    try:
        _send(talk.outbox, reply())
        talk.outbox.close()
    except OSError:  # the child is gone: its second answer will be missing
        pass
    return found


def last_answer(talk: Conversation, read: Callable[[Any], T]) -> Optional[T]:
    """The child's second message, as ``read`` rebuilds it, once it is sent; the child is then waited for."""
    try:
        found = _loaded(_receive(talk.inbox), read)
    finally:
        end(talk)
    return found


def end(talk: Conversation) -> None:
    """Stop the child if it still runs (its answer is not wanted, or will not come) and wait for it."""
    try:
        os.kill(talk.pid, signal.SIGKILL)
    except OSError:
        pass
    for stream in (talk.inbox, talk.outbox):
        try:
            stream.close()
        except OSError:
            pass
    try:
        os.waitpid(talk.pid, 0)
    except ChildProcessError:
        pass


def _send(out: IO[bytes], value: Any) -> None:
    data = encode_json(value).encode("ascii")  # non-ASCII characters, lone surrogates too, come escaped
    out.write(_LENGTH.pack(len(data)))
    out.write(data)
    out.flush()


def _receive(inbox: IO[bytes]) -> Optional[bytes]:
    """One message's bytes; None at the end of the stream or a cut-off message."""
    try:
        head = inbox.read(_LENGTH.size)
        if len(head) != _LENGTH.size:
            return None
        size = _LENGTH.unpack(head)[0]
        data = inbox.read(size)
    except (OSError, ValueError):
        return None
    return data if len(data) == size else None


def _loaded(data: Optional[bytes], read: Callable[[Any], T]) -> Optional[T]:
    if data is None:
        return None
    try:
        return read(json.loads(data))
    except Exception:  # noqa: BLE001 - a message cut off or of another shape: the parent does the work itself
        return None
