"""``snapstore demo`` and the progress bar on a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import REPO, Cli, cli_env


def test_demo_runs_green_without_arguments(cli: Cli) -> None:
    result = cli.run("demo", root=False)
    assert result.code == 0, result
    out = result.stdout
    for step in (
        "[bridge A] checkpointed",
        "[bridge A] modified src/app.py",
        "[bridge A] deleted data/config.json",
        "[bridge A] added CHANGES.md",
        "killed bridge A",
        "[bridge B] found demo/before-edit",
        "[bridge B] restored demo/before-edit",
        "byte-for-byte back to the checkpoint",
        "verify --deep: ok",
        "demo passed",
    ):
        assert step in out, out
    assert out.index("killed bridge A") < out.index("[bridge B] found")
    assert not (cli.cwd / ".snapstore").exists()


def test_demo_json_into_an_explicit_root(cli: Cli) -> None:
    document = cli.json("demo")
    assert document["ok"] is True
    assert document["mismatches"] == [] and document["verify"]["ok"] is True
    assert document["root"] == str(cli.root.resolve())
    assert {step["actor"] for step in document["steps"]} == {"demo", "bridge A", "bridge B"}
    listed = cli.json("list", "demo")["snapshots"]
    assert "before-edit" in [info["name"] for info in listed]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_only_on_a_terminal(cli: Cli, project: Path) -> None:
    import pty

    primary, secondary = pty.openpty()
    command = [
        sys.executable,
        "-m",
        "snapstore",
        "--root",
        str(cli.root),
        "create",
        "s1",
        "--name",
        "n1",
        ".",
        "--base",
        str(project),
    ]
    try:
        completed = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=secondary,
            env=cli_env(),
            timeout=60,
            check=False,
        )
        os.close(secondary)
        shown = _drain(primary)
    finally:
        os.close(primary)
    assert completed.returncode == 0
    assert "snapshotting" in shown
    piped = cli.run("create", "s1", "--name", "n2", ".", "--base", str(project))
    assert piped.stderr == ""


def _drain(fd: int) -> str:
    """Everything written to a pseudo-terminal whose other end is closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def test_library_example_runs_green(tmp_path: Path) -> None:
    example = REPO / "examples" / "bridge_demo.py"
    completed = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed
    assert "project restored byte-for-byte: True; store verifies: True" in completed.stdout
