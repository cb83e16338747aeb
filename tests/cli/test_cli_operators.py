"""What operators meet: usage errors on one line, and a sweep that would empty a session
needing --yes (the same in ``serve``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import Cli
from helpers.service import RpcFailed, Server


@pytest.mark.parametrize(
    "args, words",
    [
        (("create",), "Missing argument 'SESSION'"),
        (("list", "--frob"), "No such option '--frob'"),
        (("frob",), "No such command 'frob'"),
        (("sweep", "--ttl", "7 days"), "7 days"),
    ],
)
def test_a_usage_error_is_one_error_line(cli: Cli, args: tuple[str, ...], words: str) -> None:
    result = cli.run(*args)
    assert result.code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and words in lines[0]
    assert "--help" in lines[0]
    assert result.stdout == ""


def _names(cli: Cli) -> list[str]:
    return sorted(f"{info.session}/{info.name}" for info in cli.store().list())


@pytest.mark.parametrize("option", [("--ttl", "0"), ("--keep-last", "0")])
def test_a_sweep_that_empties_a_session_needs_yes(
    cli: Cli, project: Path, option: tuple[str, str]
) -> None:
    cli.snapshot(project, "README.md", name="one")
    cli.snapshot(project, "README.md", name="two")
    before = _names(cli)
    result = cli.run("sweep", *option)
    assert result.code == 2
    assert "every file checkpoint of session 's1'" in result.stderr
    assert "--yes" in result.stderr and len(result.stderr.splitlines()) == 1
    assert _names(cli) == before
    dry = cli.json("sweep", *option, "--dry-run")
    assert len(dry["deleted"]) == 2 and _names(cli) == before
    cli.fails("sweep", *option, code=2, error_type="UsageError")
    assert cli.json("sweep", *option, "--yes")["deleted"] == [
        {"session": "s1", "name": "one"},
        {"session": "s1", "name": "two"},
    ]
    assert _names(cli) == []


def test_a_sweep_that_keeps_one_checkpoint_per_session_needs_no_yes(
    cli: Cli, project: Path
) -> None:
    cli.snapshot(project, "README.md", name="one")
    cli.snapshot(project, "README.md", name="two")
    assert cli.json("sweep", "--keep-last", "1")["deleted"] == [{"session": "s1", "name": "one"}]
    assert cli.json("sweep")["deleted"] == []


def test_serve_sweep_that_empties_a_session_needs_yes(tmp_path: Path, project: Path) -> None:
    with Server(tmp_path / "store") as server:
        server.call("create", {"session": "s", "paths": ["README.md"], "base_dir": str(project)})
        with pytest.raises(RpcFailed) as failed:
            server.call("sweep", {"ttl": 0})
        assert failed.value.code == 1002
        assert failed.value.data["type"] == "SweepRefusedError"
        assert len(server.call("list")["snapshots"]) == 1
        assert len(server.call("sweep", {"ttl": 0, "yes": True})["deleted"]) == 1
