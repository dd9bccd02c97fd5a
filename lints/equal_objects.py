"""One object for equal values met many times in a run (names, constants, line numbers of decoded summaries; fids):
tables of shared objects, bounded, since a long-lived language server meets new values for ever (``sys.intern``
would keep every string for ever on Python 3.12). Only values nothing writes are shared."""
from __future__ import annotations


class SharedObjects(dict):
    """key -> the one object handed out for it: ``table.setdefault(key, value)`` in the hot loops (a C call), and
    ``bound()`` now and then, which empties the table past ``limit`` keys (what was handed out stays valid)."""
    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def bound(self) -> None:
        if len(self) > self.limit:
            self.clear()
