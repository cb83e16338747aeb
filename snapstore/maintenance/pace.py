"""How much deletion fits in one short hold of a lock, measured on the store as it goes: gc's
steps and sweep's holds each take about a fixed time, whatever the disk's speed at the moment
(an unlink takes microseconds on an idle disk and milliseconds beside a busy one), instead of
a fixed count that is too much on a slow disk and too little on a fast one."""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST_ITEM_SECONDS = 0.001
"""What one deletion is assumed to take until one was measured."""


class Pace:
    """How long one deletion of a kind takes now: a moving average over the batches so far."""

    def __init__(self, most: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = FIRST_ITEM_SECONDS
        self.most = most
        """At most this many deletions per hold, however fast the disk."""
        self.clock = clock

    def fitting(self, deadline: float, done: int) -> int:
        """How many more deletions fit before ``deadline`` in a hold that made ``done`` (at
        least one in all: a hold always makes progress; ``most`` in all at most)."""
        fit = int((deadline - self.clock()) / self.seconds)
        return max(0, min(self.most - done, max(fit, 1 - done)))

    def took(self, items: int, seconds: float) -> None:
        """Note that ``items`` deletions took ``seconds``."""
        if items:
            self.seconds = (self.seconds + seconds / items) / 2


class HoldTimes:
    """Where one hold of a lock went: how long it was waited for, then each part's seconds
    and item counts (``lap``), so that a report can say which part of the longest hold was
    long (the bench prints it)."""

    def __init__(self, clock: Callable[[], float], asked: float) -> None:
        self.clock = clock
        self.started = clock()
        self.waited = self.started - asked
        """Seconds from asking for the lock to holding it."""
        self._last = self.started
        self.parts: dict[str, float] = {}

    def lap(self, part: str, items: int | None = None) -> None:
        """The time since the last lap (or the start) went to ``part``, which handled
        ``items``."""
        now = self.clock()
        self.parts[part] = self.parts.get(part, 0.0) + now - self._last
        if items is not None:
            self.parts[f"{part}_items"] = self.parts.get(f"{part}_items", 0.0) + items
        self._last = now

    @property
    def held(self) -> float:
        """Seconds from taking the lock to the last lap."""
        return self._last - self.started
