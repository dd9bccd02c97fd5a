"""A one-line progress bar on stderr for long runs, on a terminal only.

Built in rather than tqdm or rich on purpose: the linter runs in pre-commit hooks and CI, where an
optional dependency that changes the output depending on what else is installed is a surprise,
and a bar needs twenty lines.
"""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

MIN_ITEMS = 20  # fewer files finish before a bar would be read
WIDTH = 24


class Progress:
    def __init__(self, label: str, stream: Optional[TextIO] = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.total = self.done = 0
        self.shown = False
        self._last = 0.0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        self.shown = total >= MIN_ITEMS and _is_terminal(self.stream)
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._draw(force=self.done >= self.total)

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")  # leave the line as it was: the report follows
            self.stream.flush()
            self.shown = False

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.shown or (not force and now - self._last < 0.1):
            return
        self._last = now
        filled = WIDTH * self.done // max(self.total, 1)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} files")
        self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
