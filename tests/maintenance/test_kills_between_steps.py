"""gc and sweep killed at every mutating call, between their steps included (one item per
step, so every deletion is a step of its own): each snapshot is its old or its new self,
nothing is damaged, and the next gc cleans up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.consistency import check_consistent
from helpers.fork import run_killed
from helpers.scenarios import SESSION, Scenario, expectation, open_store, template
from helpers.seam import CountingFileSystem
from helpers.trees import copy_tree, remove_tree, write_tree

from snapstore import SnapStore
from snapstore.fs.seam import FileSystem
from snapstore.maintenance import gcsteps, sweep


def _prepare(scenario_dir: Path) -> None:
    """Six snapshots, each with a pack of its own; three of them deleted (their packs and a
    loose blob are garbage), and the content of one deleted snapshot kept by another."""
    (scenario_dir / "target").mkdir(parents=True, exist_ok=True)
    store = SnapStore(scenario_dir / "root", durable=False, fold_threshold=0)
    src = scenario_dir / "src"
    for n in range(6):
        remove_tree(src)
        big = bytes([n]) * (300_000 if n == 1 else 10)
        write_tree(src, {"a.txt": f"version {n % 4}\n".encode(), "big.bin": big})
        store.create(SESSION, f"n{n}", ["."], base_dir=src)
    for n in (0, 1, 3):
        store.delete(SESSION, f"n{n}")
    store.close()


def _one_item_per_step(run: object) -> object:
    def stepped(scenario_dir: Path, fs: FileSystem) -> object:
        saved = gcsteps.STEP_ITEMS, sweep.STEP_ITEMS
        gcsteps.STEP_ITEMS = sweep.STEP_ITEMS = 1
        try:
            return run(scenario_dir, fs)  # type: ignore[operator]
        finally:
            gcsteps.STEP_ITEMS, sweep.STEP_ITEMS = saved

    return stepped


def _run_gc(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).gc()


def _run_sweep(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).sweep(keep_last=1, now=datetime.now(UTC) + timedelta(1))


STEPPED = [
    Scenario("gc_in_steps", _prepare, _one_item_per_step(_run_gc)),  # type: ignore[arg-type]
    Scenario("sweep_in_steps", _prepare, _one_item_per_step(_run_sweep)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("scenario", STEPPED, ids=lambda s: s.name)
def test_killed_between_steps_the_store_is_whole(scenario: Scenario, tmp_path: Path) -> None:
    template_dir = template(scenario, tmp_path / "template")
    expect = expectation(scenario, template_dir, tmp_path / "reference")
    copy_tree(template_dir, tmp_path / "count")
    counting = CountingFileSystem()
    scenario.run(tmp_path / "count", counting)
    calls = len(counting.trace)
    assert calls > 5  # several steps, so kills fall between them
    for kill_at in range(1, calls + 2):
        work = tmp_path / f"kill-{kill_at}"
        copy_tree(template_dir, work)
        completed = run_killed(scenario, work, kill_at)
        assert completed == (kill_at > calls)
        try:
            check_consistent(work, expect, completed=completed)
        except AssertionError as error:
            raise AssertionError(
                f"{scenario.name}: killed before call {kill_at}: {error}"
            ) from error
        remove_tree(work)
