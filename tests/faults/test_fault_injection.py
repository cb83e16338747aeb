"""Fail each mutating filesystem call of every operation with ENOSPC, EIO, EDQUOT and EACCES.

Each failure must reach the caller as the OSError itself or a SnapstoreError chaining it
(never a silent success), leave every snapshot as it was or as the operation makes it, leave
no new temp file in ``<root>/tmp``, and leave a restore target exactly as it was (the restore
rolls back and says so). A fault snapstore deliberately tolerates (tidying an empty
directory, dropping a temp file) is allowed only if the operation's full effect is on disk.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.consistency import Expectation, check_consistent
from helpers.figures import record
from helpers.fork import call_trace
from helpers.scenarios import BY_NAME, SCENARIOS, Scenario, expectation, template
from helpers.seam import FailingFileSystem, InjectedFault
from helpers.trees import copy_tree, read_tree, remove_tree

from snapstore.errors import RestoreError, SnapstoreError
from snapstore.maintenance import gcsteps, sweep

ERRNOS = {
    "ENOSPC": errno.ENOSPC,
    "EIO": errno.EIO,
    "EDQUOT": errno.EDQUOT,
    "EACCES": errno.EACCES,
}


def injected_cause(error: BaseException) -> InjectedFault | None:
    """The injected fault in ``error``'s cause/context chain, if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, InjectedFault):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def check_raised(error: BaseException, code: int, work: Path, stale: set[str]) -> None:
    """A failed operation: a clear error, no new temp file, a restore that rolled back."""
    assert isinstance(error, OSError | SnapstoreError), f"unclear error type: {error!r}"
    fault = injected_cause(error)
    assert fault is not None, f"the injected fault is not in the error chain: {error!r}"
    assert fault.errno == code
    leftovers = set(_temp_files(work)) - stale
    assert not leftovers, f"temp files left after the failed operation: {leftovers}"
    if isinstance(error, RestoreError):
        assert error.rolled_back, f"restore did not roll back: {error}"


def check_target_unchanged(expect: Expectation, work: Path) -> None:
    """After a failed restore the target holds exactly what it held before, no temp file."""
    if not expect.target_existed:
        assert not (work / "target").exists(), "a failed restore left the new target behind"
        return
    actual = read_tree(work / "target", with_temps=True)
    assert actual == expect.old_target, "a failed restore changed the target"


def _temp_files(scenario_dir: Path) -> list[str]:
    tmp = scenario_dir / "root" / "tmp"
    return os.listdir(tmp) if tmp.is_dir() else []


@pytest.mark.parametrize("errno_name", sorted(ERRNOS))
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_fault_at_every_call(scenario: Scenario, errno_name: str, scratch: Path) -> None:
    code = ERRNOS[errno_name]
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    trace = call_trace(scenario, template_dir, scratch / "count")
    stale = set(_temp_files(template_dir))
    raised = tolerated = 0
    for fail_at in range(1, len(trace) + 1):
        work = scratch / f"fault-{fail_at}"
        copy_tree(template_dir, work)
        failing = FailingFileSystem(fail_at, code)
        where = f"{scenario.name}: {errno_name} at call {fail_at} ({trace[fail_at - 1]})"
        try:
            scenario.run(work, failing)
        except Exception as error:
            assert failing.fired == trace[fail_at - 1], f"{where}: call order changed"
            try:
                check_raised(error, code, work, stale)
                if scenario.restores:
                    check_target_unchanged(expect, work)
                check_consistent(work, expect)
            except AssertionError as failure:
                raise AssertionError(f"{where}: {failure}") from error
            raised += 1
        else:
            assert failing.fired == trace[fail_at - 1], f"{where}: call order changed"
            try:
                check_consistent(work, expect, completed=True)
            except AssertionError as failure:
                raise AssertionError(f"{where} was swallowed, yet: {failure}") from None
            tolerated += 1
        remove_tree(work)
    record(
        "faults",
        operation=scenario.name,
        errno=errno_name,
        faults=len(trace),
        raised=raised,
        tolerated=tolerated,
    )


def _running_out() -> Callable[[], float]:
    """A clock that moves 25 ms at each read: every hold of gc and sweep runs out of time
    after its first deletion (as on a loaded machine), yet settles within the longest hold."""
    reads = itertools.count()
    return lambda: next(reads) * 0.025


@pytest.mark.parametrize(
    "name",
    ["upgrade", "gc", "sweep", "sweep_old_layout", "sweep_mixed_layouts", "create_gc_create"],
)
def test_calls_do_not_depend_on_the_clock(
    name: str, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario makes the same calls whatever the time its holds take, so a faulted run
    meets the counting run's call order on a loaded machine too."""
    scenario = BY_NAME[name]
    template_dir = template(scenario, scratch / "template")
    trace = call_trace(scenario, template_dir, scratch / "quiet")
    monkeypatch.setattr(gcsteps, "monotonic", _running_out())
    monkeypatch.setattr(sweep, "monotonic", _running_out())
    assert call_trace(scenario, template_dir, scratch / "loaded") == trace
    work = scratch / "fault"
    copy_tree(template_dir, work)
    failing = FailingFileSystem(len(trace), errno.ENOSPC)
    with contextlib.suppress(Exception):
        scenario.run(work, failing)
    assert failing.fired == trace[-1]
