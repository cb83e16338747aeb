"""Maintenance steps sized by count instead of by time, for the suites that replay a
scenario's calls one by one (a fault, a kill or a power cut at every call): there the calls
of a run must be those of the run that counted them. gc's steps and sweep's holds are sized
by the time deletions take on the disk (``snapstore.maintenance.pace``), which on a loaded
machine splits one step into two between the counting run and the replay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from snapstore.maintenance.pace import Pace

ITEMS_PER_STEP = 3
"""Small enough that a scenario's maintenance takes several steps, so they are exercised."""


def _by_count(self: Pace, deadline: float, done: int) -> int:
    return max(0, min(self.most, ITEMS_PER_STEP) - done)


@pytest.fixture(autouse=True)
def steps_by_count(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every gc step and sweep hold of the test makes at most ``ITEMS_PER_STEP`` deletions."""
    monkeypatch.setattr(Pace, "fitting", _by_count)
    yield
