"""Kill a child at every mutating filesystem call of each operation; the store must survive.

For N = 1, 2, ... the operation runs in a forked child that ``os._exit``\\ s just before its
Nth call through the I/O seam (and, for writes, once more after writing half the bytes),
until a run completes. After every kill a fresh store must pass the full consistency check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.figures import record
from helpers.fork import call_trace, kill_at_every_call
from helpers.scenarios import SCENARIOS, Scenario, expectation, template


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_kill_at_every_call(scenario: Scenario, scratch: Path) -> None:
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    trace = call_trace(scenario, template_dir, scratch / "count")
    kills = kill_at_every_call(scenario, template_dir, expect, scratch, trace)
    record(
        "crash",
        operation=scenario.name,
        crash_points=kills.kills,
        torn_writes=kills.torn,
        mixed_targets=kills.mixed_targets,
    )
