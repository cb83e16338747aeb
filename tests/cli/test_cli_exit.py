"""The command line ends its process without tearing the interpreter down, yet everything an
ordinary exit does outside the process still happens: atexit functions run, buffered output
is written, the exit code is the command's, and a thread still running is waited for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.cli import Cli, cli_env

PROGRAM = """
import atexit, sys, threading, time
from pathlib import Path

marker = Path(sys.argv[1])
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
sys.stdout.write("buffered before the command\\n")
if sys.argv[2] == "thread":
    def late_write():
        time.sleep(0.5)
        marker.write_text("written after the command")
    threading.Thread(target=late_write).start()
from snapstore.cli import main
main(sys.argv[3:])
"""


def _run(cli: Cli, tmp_path: Path, mode: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "marker"), mode, *args],
        cwd=cli.cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_atexit_functions_run_and_buffered_output_is_written(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    root = str(cli.root)
    done = _run(cli, tmp_path, "plain", "--root", root, "create", "s", ".", "--base", str(project))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("buffered before the command\n")
    assert "created s/" in done.stdout
    assert done.stderr.endswith("atexit ran\n")


def test_the_exit_code_is_the_commands(cli: Cli, tmp_path: Path, project: Path) -> None:
    cli.run("create", "s", ".", "--base", str(project))
    failed = _run(cli, tmp_path, "plain", "--root", str(cli.root), "show", "s", "nope")
    assert failed.returncode == cli.run("show", "s", "nope").code != 0
    assert "error: " in failed.stderr and failed.stderr.endswith("atexit ran\n")


def test_a_thread_still_running_is_waited_for(cli: Cli, project: Path, tmp_path: Path) -> None:
    cli.run("create", "s", ".", "--base", str(project))
    done = _run(cli, tmp_path, "thread", "--root", str(cli.root), "list")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "marker").read_text() == "written after the command"
    assert done.stderr.endswith("atexit ran\n")
