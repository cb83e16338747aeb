"""Record an operation through the seam, then check every disk a power cut could leave."""

from __future__ import annotations

from pathlib import Path

from helpers.consistency import Expectation, check_consistent
from helpers.powerloss import PowerLossModel, capture, carry_identities, materialize
from helpers.scenarios import Scenario
from helpers.seam import RecordingFileSystem
from helpers.trees import copy_tree, remove_tree


def recorded_model(scenario: Scenario, template_dir: Path, work: Path) -> PowerLossModel:
    """Run the scenario once on ``work`` through a recording seam."""
    copy_tree(template_dir, work)
    image = capture(work)
    recorder = RecordingFileSystem()
    scenario.run(work, recorder)
    return PowerLossModel(work, image, recorder.recording.events, recorder.recording.inode_keys)


def check_every_power_cut(
    scenario: Scenario,
    model: PowerLossModel,
    expect: Expectation,
    scratch: Path,
    *,
    random_per_prefix: int,
    omit_each: bool = False,
) -> int:
    """Materialize each crash state of ``model`` and run the consistency check on it; once the
    whole operation is on disk only its new state passes. Returns how many states were checked.

    Each state is materialized where the operation ran: what the store records holds absolute
    paths (the base directory of a snapshot, the target of an interrupted restore), so a crash
    state only means the same thing at the same place."""
    checked = 0
    disk = Path(model.base_dir)
    for state in model.states(random_per_prefix=random_per_prefix, omit_each=omit_each):
        remove_tree(disk)
        materialize(state, disk)
        carry_identities(model, state, disk)
        try:
            completed = state.prefix == len(model.events)
            check_consistent(disk, expect, dir_modes=False, completed=completed)
        except AssertionError as error:
            event = model.events[state.prefix - 1] if state.prefix else ("start",)
            raise AssertionError(
                f"{scenario.name}: power cut after {state.prefix}/{len(model.events)} events "
                f"(last {event[:3]!r:.120}), policy {state.policy}: {error}"
            ) from error
        checked += 1
    return checked
