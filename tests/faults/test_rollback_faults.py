"""A restore fails, then its rollback fails too: the caller learns which, and nothing is lost.

The first fault hits call N of the restore; the second hits a call after it (during the
rollback). A RestoreError saying ``rolled_back=True`` must mean the target is exactly as it
was; ``rolled_back=False`` must name the undo backup, and the next open of the store puts
the target back exactly (its journal is still there). The store stays consistent either way.
When the second fault hits the removal of a temp file the first one left beside its
destination, that ``.snapstore-tmp-*`` file stays in the target until the store is opened
again (counted here; the consistency check, which reopens the store, finds none).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from helpers.consistency import check_consistent
from helpers.figures import LONG, record
from helpers.fork import call_trace
from helpers.scenarios import BY_NAME, expectation, template
from helpers.seam import FailingFileSystem
from helpers.trees import copy_tree, read_tree, remove_tree, temp_leftovers

from faults.test_fault_injection import injected_cause
from snapstore.errors import RestoreError, SnapstoreError


def _calls_with_one_fault(template_dir: Path, scratch: Path, fail_at: int) -> int | None:
    """How many calls the restore makes when call ``fail_at`` fails; None if that fault was
    tolerated (a hint such as a session's head not written: the restore completed)."""
    copy_tree(template_dir, scratch)
    failing = FailingFileSystem(fail_at)
    try:
        BY_NAME["restore"].run(scratch, failing)
    except (OSError, SnapstoreError):
        remove_tree(scratch)
        return failing.calls
    remove_tree(scratch)
    return None


def _second_faults(first: int, total: int) -> list[int]:
    later = list(range(first + 1, total + 1))
    if LONG or len(later) <= 3:
        return later
    return [later[0], later[len(later) // 2], later[-1]]


def test_rollback_that_fails_is_reported_and_recoverable(scratch: Path) -> None:
    scenario = BY_NAME["restore"]
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    trace = call_trace(scenario, template_dir, scratch / "count")
    runs = rolled_back = not_rolled_back = stray = 0
    for first in range(1, len(trace) + 1):
        total = _calls_with_one_fault(template_dir, scratch / "probe", first)
        if total is None:
            continue
        for second in _second_faults(first, total):
            work = scratch / f"double-{first}-{second}"
            copy_tree(template_dir, work)
            where = f"faults at calls {first} and {second}"
            with pytest.raises((OSError, SnapstoreError)) as caught:
                scenario.run(work, FailingFileSystem({first, second}, errno.EIO))
            error = caught.value
            assert injected_cause(error) is not None, f"{where}: {error!r}"
            if isinstance(error, RestoreError) and not error.rolled_back:
                assert "undo backup" in str(error), f"{where}: no hint of the backup: {error}"
                not_rolled_back += 1
            else:
                assert read_tree(work / "target") == expect.old_target, where
                rolled_back += isinstance(error, RestoreError)
            stray += len(temp_leftovers(work / "target"))
            try:
                check_consistent(work, expect)
            except AssertionError as failure:
                raise AssertionError(f"{where}: {failure}") from error
            remove_tree(work)
            runs += 1
    assert not_rolled_back > 0, "no second fault ever broke a rollback"
    record(
        "faults",
        operation="restore_rollback",
        errno="EIO",
        double_faults=runs,
        rolled_back=rolled_back,
        not_rolled_back=not_rolled_back,
        target_temp_leftovers=stray,
    )
