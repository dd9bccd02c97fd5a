"""The processes a run starts (pool workers, a forked cache writer) end with it, even when it is killed
with SIGKILL; a forked child does one piece of work while the run goes on."""
from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from typing import Callable, Optional

from .warn import warn

# The signals a user stops a run with: a forked child turns them into KeyboardInterrupt (so that its work
# cleans up), a write defers them until the file is whole (``writes.deferred_signals``).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_parent_pid: Optional[int] = None  # in a worker: the process it was started by; None elsewhere
PARENT_GONE = 70  # a worker's exit status when it ends because the run that started it is gone
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int, on_death: int = signal.SIGTERM) -> None:
    """In a process that the run ``parent_pid`` started (a worker, a cache writer): end when that run
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


def in_forked_child(work: Callable[[], None]) -> Optional[Callable[[], None]]:
    """Run ``work`` in a forked child while this process goes on (Redis's BGSAVE: a forked copy of
    memory writes a snapshot); returns the wait for it, or None where this cannot fork safely (no
    ``fork``, other Python threads that may hold locks the child would need, or fork fails).

    In the child, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (so ``work`` cleans up after
    itself) unless the parent ignores them; the wait warns when the child did not end well.
    """
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None where the descriptor is closed
            try:
                stream.flush()  # else the child's exit could write the parent's pending output twice
            except (OSError, ValueError):
                pass
    parent_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError:  # EAGAIN (process limits), ENOMEM: do the work in this process instead
        return None
    if pid == 0:
        code = 1
        try:
            for number in STOP_SIGNALS:
                if signal.getsignal(number) is not signal.SIG_IGN:
                    signal.signal(number, _interrupt)
            die_with_parent(parent_pid)  # SIGTERM: `work` removes its temp file
            work()
            code = 0
        except KeyboardInterrupt:
            code = _INTERRUPTED
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)  # no atexit handlers or buffers of the parent's
    return lambda: _reap(pid)


_INTERRUPTED = 130  # the child was stopped by a signal the user sent: nothing to warn about


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _reap(pid: int) -> None:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, _INTERRUPTED):
        why = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
            else f"exit status {code}"
        warn(f"the background cache writer failed ({why})")
