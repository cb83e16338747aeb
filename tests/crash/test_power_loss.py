"""Replay every prefix of each operation's filesystem calls as the disks a power cut could
leave, and check each one; this is what proves the fsync order, which ``kill -9`` cannot.

The model of what survives a power cut is documented in ``helpers/powerloss.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.consistency import check_consistent
from helpers.figures import LONG, depth, record
from helpers.powerloss import PowerLossModel, capture, materialize
from helpers.scenarios import SCENARIOS, Scenario, expectation, template
from helpers.seam import RecordingFileSystem
from helpers.trees import copy_tree, remove_tree


def recorded_model(scenario: Scenario, template_dir: Path, work: Path) -> PowerLossModel:
    """Run the scenario once on ``work`` through a recording seam."""
    copy_tree(template_dir, work)
    image = capture(work)
    recorder = RecordingFileSystem()
    scenario.run(work, recorder)
    return PowerLossModel(work, image, recorder.recording.events)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_power_loss_at_every_prefix(scenario: Scenario, scratch: Path) -> None:
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    model = recorded_model(scenario, template_dir, scratch / "recorded")
    checked = 0
    for state in model.states(random_per_prefix=depth(2, 12), omit_each=LONG):
        disk = scratch / f"state-{checked}"
        materialize(state, disk)
        try:
            completed = state.prefix == len(model.events)
            check_consistent(disk, expect, dir_modes=False, completed=completed)
        except AssertionError as error:
            event = model.events[state.prefix - 1] if state.prefix else ("start",)
            raise AssertionError(
                f"{scenario.name}: power cut after {state.prefix}/{len(model.events)} events "
                f"(last {event[:3]!r:.120}), policy {state.policy}: {error}"
            ) from error
        remove_tree(disk)
        checked += 1
    record("power_loss", operation=scenario.name, events=len(model.events), states=checked)
