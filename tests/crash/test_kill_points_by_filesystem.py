"""Kill a restore at every call while it flushes by filesystem (one ``syncfs`` per batch of
files and one for every directory, a new target's parent left to the last), as the stock seam
does on Linux 5.17+ and ext4, xfs, btrfs, tmpfs: the target must hold its old or its new
state once a fresh store has opened it, as when every file and directory gets an ``fsync``
(``test_kill_points``). The ``syncfs`` calls are kill points too."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fork import call_trace, kill_at_every_call
from helpers.scenarios import SCENARIOS, Scenario, expectation, template

from snapstore.fs import seam
from snapstore.fs.mounts import syncfs_flushes

RESTORES = [scenario for scenario in SCENARIOS if scenario.restores]

pytestmark = pytest.mark.skipif(not seam.SYNCFS, reason="no syncfs that reports its errors")


@pytest.mark.parametrize("scenario", RESTORES, ids=lambda s: s.name)
def test_kill_at_every_call_flushing_by_filesystem(scenario: Scenario, scratch: Path) -> None:
    if not syncfs_flushes(str(scratch)):
        pytest.skip(f"{scratch} is on a filesystem flushed file by file")
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    trace = call_trace(scenario, template_dir, scratch / "count", by_filesystem=True)
    assert "sync_filesystems" in trace
    kills = kill_at_every_call(scenario, template_dir, expect, scratch, trace, by_filesystem=True)
    assert kills.kills == len(trace) + kills.torn  # every call, and halfway through writes
