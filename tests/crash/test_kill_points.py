"""Kill a child at every mutating filesystem call of each operation; the store must survive.

For N = 1, 2, ... the operation runs in a forked child that ``os._exit``\\ s just before its
Nth call through the I/O seam (and, for writes, once more after writing half the bytes),
until a run completes. After every kill a fresh store must pass the full consistency check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.consistency import check_consistent
from helpers.figures import record
from helpers.fork import run_killed
from helpers.scenarios import SCENARIOS, Scenario, expectation, template
from helpers.seam import CountingFileSystem
from helpers.trees import copy_tree, remove_tree


def _call_trace(scenario: Scenario, template_dir: Path, scratch: Path) -> list[str]:
    copy_tree(template_dir, scratch)
    counting = CountingFileSystem()
    scenario.run(scratch, counting)
    remove_tree(scratch)
    return counting.trace


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_kill_at_every_call(scenario: Scenario, scratch: Path) -> None:
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    trace = _call_trace(scenario, template_dir, scratch / "count")
    points = [(n, False) for n in range(1, len(trace) + 2)]
    points += [(n, True) for n, op in enumerate(trace, 1) if op == "write"]
    kills = torn_kills = mixed = 0
    for kill_at, torn in points:
        work = scratch / f"kill-{kill_at}-{int(torn)}"
        copy_tree(template_dir, work)
        completed = run_killed(scenario, work, kill_at, torn=torn)
        assert completed == (kill_at > len(trace)), f"call count changed at {kill_at}"
        try:
            result = check_consistent(work, expect)
        except AssertionError as error:
            raise AssertionError(
                f"{scenario.name}: killed before call {kill_at} ({'torn ' if torn else ''}"
                f"{trace[kill_at - 1] if kill_at <= len(trace) else 'none'}): {error}"
            ) from error
        kills += not completed
        torn_kills += torn
        mixed += result.mixed_target
        remove_tree(work)
    record(
        "crash",
        operation=scenario.name,
        crash_points=kills,
        torn_writes=torn_kills,
        mixed_targets=mixed,
    )
