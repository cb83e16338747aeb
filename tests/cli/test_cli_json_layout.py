"""How ``--json`` lays its document out: on one line for a program reading a pipe or a file,
indented by two spaces for a person at a terminal; the same document either way, and the
same one the library's results give."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from helpers.cli import Cli, cli_env

from snapstore import SnapStore
from snapstore.cli.output import to_json
from snapstore.frontend import shapes


def _on_a_terminal(cli: Cli, *args: str) -> tuple[int, str]:
    """Run the command line with stdout on a pseudo-terminal; its exit code and output."""
    leader, follower = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "snapstore", "--root", str(cli.root), *args],
            cwd=cli.cwd,
            env=cli_env(),
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = child.wait(timeout=60)
        assert child.stderr is not None
        child.stderr.close()
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    return code, b"".join(chunks).decode("ascii").replace("\r\n", "\n")


def _store_with_snapshots(cli: Cli, project: Path) -> SnapStore:
    store = SnapStore(cli.root, durable=False)
    store.create("s1", "first", ["."], base_dir=project, meta={"tool": "vim"})
    store.create("s2", "sécond", ["README.md"], base_dir=project)
    return store


def test_json_into_a_pipe_is_one_line(cli: Cli, project: Path) -> None:
    store = _store_with_snapshots(cli, project)
    for args in (("list",), ("show", "s1", "first"), ("log", "s1", "README.md")):
        result = cli.run("--json", *args)
        assert result.code == 0, result.stderr
        assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1
        document = result.json()
        assert result.stdout == to_json(document, pretty=False) + "\n"
    listed = cli.run("--json", "list").json()
    assert listed == json.loads(to_json(shapes.snapshots_document(store.list())))
    assert listed["snapshots"][1]["name"] == "sécond"
    assert cli.run("--json", "list").stdout.isascii()


def test_json_on_a_terminal_is_indented(cli: Cli, project: Path) -> None:
    _store_with_snapshots(cli, project)
    code, shown = _on_a_terminal(cli, "--json", "list")
    assert code == 0
    assert shown.startswith('{\n  "snapshots": [\n    {\n      "session": "s1",\n')
    piped = cli.run("--json", "list")
    assert json.loads(shown) == piped.json()
    assert shown == to_json(piped.json()) + "\n"


def test_an_error_document_follows_the_same_layout(cli: Cli, project: Path) -> None:
    _store_with_snapshots(cli, project)
    result = cli.run("--json", "show", "s1", "nope")
    assert result.code != 0
    assert result.stdout.count("\n") == 1
    assert result.json()["error"]["type"] == "SnapshotNotFound"
    code, shown = _on_a_terminal(cli, "--json", "show", "s1", "nope")
    assert code == result.code
    assert shown.startswith('{\n  "error": {\n')
