"""The cyclic collector is paused while the command line starts (nothing it would find there
is garbage) and on again before the command runs (``snapstore.cli.startup``)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from helpers.cli import REPO, Cli, cli_env

from snapstore.cli import startup

SEEN_BY_THE_COMMAND = """
import gc, sys
passes = []
gc.callbacks.append(lambda phase, info: phase == "stop" and passes.append(info["generation"]))
from snapstore.cli import startup
real_resume = startup.resume_collector
def resume():
    print("passes while starting:", len(passes) - at_main)
    real_resume()
startup.resume_collector = resume
from snapstore.store import SnapStore
real_create = SnapStore.create
def create(self, *args, **kwargs):
    print("collector on for the command:", gc.isenabled())
    return real_create(self, *args, **kwargs)
SnapStore.create = create
import snapstore.cli
at_main = len(passes)
snapstore.cli.main(sys.argv[1:])
"""


def test_start_up_runs_no_collection_and_the_command_runs_with_the_collector_on(
    cli: Cli, project: Path
) -> None:
    command = [sys.executable, "-c", SEEN_BY_THE_COMMAND, "--root", str(cli.root)]
    done = subprocess.run(
        [*command, "create", "s", ".", "--base", str(project)],
        env=cli_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "passes while starting: 0\n" in done.stdout
    assert "collector on for the command: True\n" in done.stdout


def test_resume_leaves_a_collector_paused_by_someone_else_paused() -> None:
    was_enabled = gc.isenabled()
    try:
        gc.disable()
        startup.pause_collector()
        startup.resume_collector()
        assert not gc.isenabled()
        gc.enable()
        startup.pause_collector()
        assert not gc.isenabled()
        startup.resume_collector()
        assert gc.isenabled()
        startup.resume_collector()
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
        else:
            gc.disable()
