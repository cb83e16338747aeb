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
