"""Replay every prefix of each operation's filesystem calls as the disks a power cut could
leave, and check each one; this is what proves the fsync order, which ``kill -9`` cannot.

The model of what survives a power cut is documented in ``helpers/powerloss.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.figures import LONG, depth, record
from helpers.replay import check_every_power_cut, recorded_model
from helpers.scenarios import SCENARIOS, Scenario, expectation, template


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_power_loss_at_every_prefix(scenario: Scenario, scratch: Path) -> None:
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    model = recorded_model(scenario, template_dir, scratch / "recorded")
    checked = check_every_power_cut(
        scenario, model, expect, scratch, random_per_prefix=depth(2, 12), omit_each=LONG
    )
    record("power_loss", operation=scenario.name, events=len(model.events), states=checked)
