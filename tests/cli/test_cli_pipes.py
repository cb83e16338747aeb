"""A reader that closes the pipe early (``| head``) ends the command quietly, with exit code 0."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import Cli, cli_env

from snapstore import SnapStore

pytestmark = pytest.mark.skipif(shutil.which("head") is None, reason="needs head(1)")

LONG = 3000
"""Characters in each snapshot name, so that a listing is far larger than a pipe's buffer."""


def _big_store(root: Path) -> SnapStore:
    store = SnapStore(root, durable=False)
    for index in range(60):
        store.put_state("s", f"{index:03}-" + "x" * LONG, index)
    return store


def _into_head(cli: Cli, head: list[str], *args: str) -> tuple[int, bytes, str]:
    """Run ``snapstore --root ROOT ARGS | head HEAD`` in a shell; snapstore's exit code, what
    head printed, and snapstore's stderr."""
    script = '"$@" 2>"$ERRORS" | head ' + " ".join(head) + '; exit "${PIPESTATUS[0]}"'
    errors = cli.cwd / "stderr.txt"
    command = [sys.executable, "-m", "snapstore", "--root", str(cli.root), *args]
    completed = subprocess.run(
        ["bash", "-c", script, "snapstore", *command],
        env=cli_env({"ERRORS": str(errors)}),
        cwd=cli.cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    return completed.returncode, completed.stdout, errors.read_text()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_list_into_head(cli: Cli, json_flag: tuple[str, ...]) -> None:
    _big_store(cli.root)
    full = cli.run(*json_flag, "list")
    assert full.code == 0 and len(full.stdout_bytes) > 150_000
    # --json into a pipe is one line: the reader stops after its first bytes instead.
    code, head, errors = _into_head(cli, ["-c", "20"] if json_flag else ["-1"], *json_flag, "list")
    assert (code, errors) == (0, "")
    assert head == (b'{"snapshots":[{"sess' if json_flag else head.split(b"\n")[0] + b"\n")
    assert head.startswith(b"{" if json_flag else b"SESSION  NAME")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_cat_into_head(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    data = bytes(range(256)) * 8192
    (project / "big.bin").write_bytes(data)
    SnapStore(cli.root, durable=False).create("s", "n", ["big.bin"], base_dir=project)
    code, head, errors = _into_head(cli, ["-c", "10"], "cat", "s", "n", "big.bin")
    assert (code, errors) == (0, "")
    assert head == data[:10]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_show_into_head(cli: Cli) -> None:
    SnapStore(cli.root, durable=False).put_state("s", "n", list(range(40_000)))
    code, head, errors = _into_head(cli, ["-3"], "show", "s", "n")
    assert (code, errors) == (0, "")
    assert head.decode().splitlines()[0] == "snapshot: s/n"


def test_reader_closing_mid_output(cli: Cli) -> None:
    """The reader takes one chunk, then closes while the writer is blocked on a full pipe."""
    _big_store(cli.root)
    command = [sys.executable, "-m", "snapstore", "--root", str(cli.root), "list"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=cli.cwd
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.read(4096).startswith(b"SESSION")
        process.stdout.close()
        errors = process.stderr.read().decode()
    assert process.returncode == 0
    assert errors == ""


def test_reader_closing_before_any_output(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    command = [sys.executable, "-m", "snapstore", "--root", str(cli.root), "list"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=cli.cwd
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        errors = process.stderr.read().decode()
    assert process.returncode == 0
    assert errors == ""


BROKEN_PIPE_ELSEWHERE = """
import sys
from snapstore import SnapStore
from snapstore.cli import main

def list_through_a_broken_pipe(self, session=None):
    raise BrokenPipeError(32, "Broken pipe (another pipe than stdout)")

SnapStore.list = list_through_a_broken_pipe
main(sys.argv[1:])
"""


def test_a_broken_pipe_other_than_stdout_is_an_error(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    completed = subprocess.run(
        [sys.executable, "-c", BROKEN_PIPE_ELSEWHERE, "--root", str(cli.root), "list"],
        env=cli_env(),
        cwd=cli.cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr.decode().strip() == (
        "error: [Errno 32] Broken pipe (another pipe than stdout)"
    )
