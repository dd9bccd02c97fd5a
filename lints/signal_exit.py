"""SIGTERM, SIGINT and SIGHUP during a run of fixes: the temp file being written removed, and exit
128+signal, however deep in library code the signal lands."""
from __future__ import annotations

import contextlib
import signal
import threading

from .writes import remove_in_flight_temps


# Signals taken so far: an exit raised inside library code can come out as another exception (libcst's
# context managers turn it into a KeyError); ``fix_file`` checks this before calling anything a file's fault.
SIGNALLED: list[int] = []


class SignalExit(SystemExit):
    """The exit a signal asks for (SIGTERM/SIGINT/SIGHUP), told apart from other exits."""


def _exit_on_signal(signum, frame) -> None:
    """SIGTERM/SIGINT/SIGHUP: remove the temp file being written (writes defer these signals, so
    there is none in practice) and exit 128+signal; workers are stopped by ``run_jobs``."""
    remove_in_flight_temps()
    SIGNALLED.append(signum)
    raise SignalExit(128 + signum)


@contextlib.contextmanager
def signals_exit_cleanly():
    """Install ``_exit_on_signal`` for the duration of a run (main thread only); restore afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) is signal.SIG_IGN:  # nohup, `cmd &`: leave ignored
            continue
        try:
            previous[signum] = signal.signal(signum, _exit_on_signal)
        except (OSError, ValueError):
            pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
