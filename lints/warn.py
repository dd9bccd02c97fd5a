"""Warnings on stderr (``gradmode-lint: warning: ...``): neither findings nor errors, silenced by ``-q``."""
from __future__ import annotations

import sys


_warnings_quiet = False


def quiet_warnings(quiet: bool) -> bool:
    """``-q``: warnings are left out too, as in ruff (a run's findings and errors are not). Returns what
    it was: a run in a process that goes on (a test, a host) puts it back when it ends."""
    global _warnings_quiet
    previous, _warnings_quiet = _warnings_quiet, quiet
    return previous


def warn(message: str) -> None:
    """``gradmode-lint: warning: MESSAGE`` on stderr, unless the run is quiet."""
    if not _warnings_quiet:
        print(f"gradmode-lint: warning: {message}", file=sys.stderr)
