"""Progress reports at most ten times a second: what ``snapstore serve`` and ``snapstore mcp``
send for one call, however many files it counts."""

from __future__ import annotations

import time
from collections.abc import Callable

INTERVAL = 0.1
"""Seconds between two reports of one call (the first and the last are always sent), so a
50,000-file checkpoint does not send 50,000 messages."""


class Throttle:
    """A ``progress(done, total)`` callback that passes a report on to ``send`` only when
    ``INTERVAL`` has passed since the last one it passed, and always the final one
    (``done >= total``)."""

    def __init__(self, send: Callable[[int, int], None], interval: float = INTERVAL) -> None:
        self.send = send
        self.interval = interval
        self.last: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and self.last is not None and now - self.last < self.interval:
            return
        self.last = now
        self.send(done, total)
