"""Forked children that die part-way: one scenario killed at a chosen call (``run_killed``),
the loop that kills it at every call in turn and checks the store after each
(``kill_at_every_call``), and any piece of work run in a child that is expected to be
killed (``in_a_child``, ``in_a_killed_child``), or that runs beside the test
(``ChildProcess``)."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from helpers.consistency import Expectation, check_consistent
from helpers.scenarios import Scenario
from helpers.seam import (
    KILLED_EXIT,
    CountingFileSystem,
    KillingFileSystem,
    WholeFlushCountingFileSystem,
    WholeFlushKillingFileSystem,
)
from helpers.trees import copy_tree, remove_tree

COMPLETED_EXIT = 0
FAILED_EXIT = 3


def run_killed(
    scenario: Scenario,
    scenario_dir: Path,
    kill_at: int,
    *,
    torn: bool = False,
    by_filesystem: bool = False,
) -> bool:
    """Run the scenario in a child killed just before mutating call ``kill_at``.

    Returns True if the operation completed before that call (the kill never came), False if
    the child was killed; an exception in the child fails the test with its traceback.
    """
    error_file = scenario_dir / "child-error.txt"
    pid = os.fork()
    if pid == 0:
        code = FAILED_EXIT
        try:
            killing = WholeFlushKillingFileSystem if by_filesystem else KillingFileSystem
            scenario.run(scenario_dir, killing(kill_at, torn=torn))
            code = COMPLETED_EXIT
        except BaseException:
            error_file.write_text(traceback.format_exc())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == COMPLETED_EXIT:
        return True
    if code == KILLED_EXIT:
        return False
    detail = error_file.read_text() if error_file.exists() else f"exit status {code}"
    raise AssertionError(f"{scenario.name} failed in the child at kill point {kill_at}:\n{detail}")


def call_trace(
    scenario: Scenario,
    template_dir: Path,
    scratch: Path,
    *,
    check: Callable[[Path], None] | None = None,
    by_filesystem: bool = False,
) -> list[str]:
    """The mutating calls the scenario makes through the I/O seam, in order (run once on a
    copy of ``template_dir`` at ``scratch``, looked at by ``check``, then removed);
    ``by_filesystem``: with the stock seam's flush by filesystem kept."""
    copy_tree(template_dir, scratch)
    counting = WholeFlushCountingFileSystem() if by_filesystem else CountingFileSystem()
    scenario.run(scratch, counting)
    if check is not None:
        check(scratch)
    remove_tree(scratch)
    return counting.trace


@dataclass
class Kills:
    """What a kill loop did: the children killed, how many of the kills tore a write in
    half, and how many left a restore's target mixed (before a recovery put it back)."""

    kills: int = 0
    torn: int = 0
    mixed_targets: int = 0


def kill_at_every_call(
    scenario: Scenario,
    template_dir: Path,
    expect: Expectation,
    scratch: Path,
    trace: list[str],
    *,
    by_filesystem: bool = False,
) -> Kills:
    """Kill the scenario before each call of ``trace`` in turn (and once more halfway
    through each write), each time in a fresh copy of ``template_dir``, until a run
    completes; after every kill a fresh store must pass the full consistency check."""
    points = [(n, False) for n in range(1, len(trace) + 2)]
    points += [(n, True) for n, op in enumerate(trace, 1) if op == "write"]
    done = Kills()
    for kill_at, torn in points:
        work = scratch / f"kill-{kill_at}-{int(torn)}"
        copy_tree(template_dir, work)
        completed = run_killed(scenario, work, kill_at, torn=torn, by_filesystem=by_filesystem)
        assert completed == (kill_at > len(trace)), f"call count changed at {kill_at}"
        try:
            result = check_consistent(work, expect)
        except AssertionError as error:
            call = trace[kill_at - 1] if kill_at <= len(trace) else "none"
            raise AssertionError(
                f"{scenario.name}: killed before call {kill_at} ({'torn ' if torn else ''}"
                f"{call}): {error}"
            ) from error
        done.kills += not completed
        done.torn += torn
        done.mixed_targets += result.mixed_target
        remove_tree(work)
    return done


def _run_and_exit(work: Callable[[], object], before: Callable[[], None] | None) -> NoReturn:
    """In a forked child: run ``before`` and ``work``, then exit with COMPLETED_EXIT, or
    FAILED_EXIT after printing what they raised (never returning into the test's code)."""
    code = FAILED_EXIT
    try:
        if before is not None:
            before()
        work()
        code = COMPLETED_EXIT
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def in_a_child(work: Callable[[], object], *, before: Callable[[], None] | None = None) -> bool:
    """Run ``work`` in a forked child (after ``before``, there too: to patch what only the
    child should see); True if it completed, False if it was killed (``KILLED_EXIT``). A
    child that raised fails the test."""
    pid = os.fork()
    if pid == 0:
        _run_and_exit(work, before)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (COMPLETED_EXIT, KILLED_EXIT), f"the child failed (exit status {code})"
    return code == COMPLETED_EXIT


def in_a_killed_child(
    work: Callable[[], object], *, before: Callable[[], None] | None = None
) -> None:
    """Run ``work`` in a forked child that must be killed part-way (see ``in_a_child``)."""
    assert not in_a_child(work, before=before), "the child completed: the kill never came"


class ChildProcess:
    """``work`` run in a forked child beside the test (which goes on meanwhile; fork it
    before the test starts threads of its own); ``wait`` says whether it completed."""

    def __init__(self, work: Callable[[], object]) -> None:
        self.pid = os.fork()
        if self.pid == 0:
            _run_and_exit(work, None)

    def wait(self) -> bool:
        """Wait for the child; True if it completed, False if it raised or was killed."""
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status) == COMPLETED_EXIT
