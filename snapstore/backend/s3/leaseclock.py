"""The clock a lease holder times its own lease with: one that keeps counting while the
machine is suspended.

A holder trusts its lease for a while after it last renewed it; another host breaks the lease
once the server's clock says it ran out. A laptop that sleeps through its lease must, when it
wakes, see that the lease ran out, or it would go on writing under a lock another host has
since taken. ``time.monotonic`` does not do that everywhere: on Linux it is
``CLOCK_MONOTONIC``, which stops during suspend, and on macOS it is ``mach_absolute_time``,
which stops during sleep too. So:

- Linux: ``CLOCK_BOOTTIME`` (``CLOCK_MONOTONIC`` plus the time spent suspended);
- macOS: ``CLOCK_MONOTONIC``, which Apple's ``clock_gettime(3)`` documents as continuing to
  increment while the system is asleep (unlike ``CLOCK_UPTIME_RAW``, the clock behind
  ``mach_absolute_time`` and so behind ``time.monotonic``);
- elsewhere: ``time.monotonic``, which may not count a suspension; there a sleep longer than
  a quarter of the lease, at the wrong moment, can leave a holder trusting a lease that
  another host already broke (docs/object-storage.md, "Fencing").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def _choose() -> tuple[str, Callable[[], float]]:
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return "CLOCK_BOOTTIME", lambda: time.clock_gettime(boottime)
    if sys.platform == "darwin":
        monotonic = time.CLOCK_MONOTONIC
        return "CLOCK_MONOTONIC", lambda: time.clock_gettime(monotonic)
    return "time.monotonic", time.monotonic


CLOCK_NAME, lease_clock = _choose()
"""The name of the clock leases are timed with, and the clock (seconds, from an arbitrary
start, counting while suspended where the platform allows)."""
