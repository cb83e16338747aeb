"""Run one scenario in a forked child that a seam wrapper may kill part-way."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from helpers.scenarios import Scenario
from helpers.seam import KILLED_EXIT, KillingFileSystem

COMPLETED_EXIT = 0
FAILED_EXIT = 3


def run_killed(scenario: Scenario, scenario_dir: Path, kill_at: int, *, torn: bool = False) -> bool:
    """Run the scenario in a child killed just before mutating call ``kill_at``.

    Returns True if the operation completed before that call (the kill never came), False if
    the child was killed; an exception in the child fails the test with its traceback.
    """
    error_file = scenario_dir / "child-error.txt"
    pid = os.fork()
    if pid == 0:
        code = FAILED_EXIT
        try:
            scenario.run(scenario_dir, KillingFileSystem(kill_at, torn=torn))
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
