"""gc's steps and sweep's holds are sized by the time a deletion takes on the disk now, not
by a fixed count: fewer deletions per hold when the disk is slow, more when it is fast."""

from __future__ import annotations

from snapstore.maintenance.pace import FIRST_ITEM_SECONDS, Pace


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_hold_fits_as_many_deletions_as_the_measured_pace_allows() -> None:
    clock = Clock()
    pace = Pace(4096, clock)
    assert pace.fitting(clock.now + 0.02, 0) == int(0.02 / FIRST_ITEM_SECONDS)
    for _ in range(20):
        pace.took(10, 0.05)  # a slow disk: 5 ms a deletion
    assert pace.fitting(clock.now + 0.02, 0) in (3, 4)
    for _ in range(20):
        pace.took(1000, 0.001)  # a fast one: 1 us
    assert pace.fitting(clock.now + 0.02, 0) == 4096  # capped


def test_a_hold_always_makes_progress_and_never_passes_its_cap() -> None:
    clock = Clock()
    pace = Pace(8, clock)
    pace.took(1, 1.0)
    assert pace.fitting(clock.now + 0.02, 0) == 1  # late already: still one
    assert pace.fitting(clock.now + 0.02, 1) == 0
    assert pace.fitting(clock.now - 1.0, 0) == 1
    fast = Pace(8, clock)
    assert fast.fitting(clock.now + 10.0, 5) == 3
    assert fast.fitting(clock.now + 10.0, 8) == 0
