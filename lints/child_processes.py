"""The processes a run starts (pool workers, the analysis's forked child: ``lints/forked_work.py``) end with
it, even when it is killed with SIGKILL."""
from __future__ import annotations

import os
import signal
import sys
from typing import Optional

# The signals a user stops a run with: a write defers them until the file is whole (``writes.deferred_signals``).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_parent_pid: Optional[int] = None  # in a worker: the process it was started by; None elsewhere
PARENT_GONE = 70  # a worker's exit status when it ends because the run that started it is gone
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int, on_death: int = signal.SIGTERM) -> None:
    """In a process that the run ``parent_pid`` started (a worker, the analysis's child): end when that run
    ends, even by SIGKILL, which no handler of its sees. Left running, a worker goes on summarising or
    writing fixed files for a run that is gone, then waits forever for work, holding the run's stdout
    and stderr pipes (``gradmode-fix . | tee log`` never ends). On Linux the kernel sends ``on_death``
    when the parent dies (``PR_SET_PDEATHSIG``); SIGTERM, so that a write under way finishes whole
    (``writes.deferred_signals``). Everywhere, ``writes.write_file`` first checks that the parent is still there."""
    global _parent_pid
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(on_death), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the check before each write still holds
    _parent_pid = os.getppid()  # a fork server's child has that server as its parent, not the run
    if _parent_pid != parent_pid and not pid_alive(parent_pid):
        os._exit(PARENT_GONE)  # the run died before the signal was asked for: nothing will send it


def parent_gone() -> bool:
    """In a worker: whether the run that started it is gone (then it was re-parented)."""
    return _parent_pid is not None and os.getppid() != _parent_pid


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: not a zombie, and not this process (a pid read from a temp
    file's name that is ours now belonged to a killed process)."""
    if pid == os.getpid():  # ours, and not in flight: left by a killed process whose pid we now have
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's), or cannot tell
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A process killed but not yet reaped (its parent died too: init reaps it later) still answers
    ``kill(pid, 0)``; it writes nothing more. Linux only; elsewhere: not known to be one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat_line = handle.read()
    except OSError:
        return False
    return stat_line[stat_line.rfind(b")") + 2:][:1] == b"Z"
