"""The global options work before and after the command name, on commands and subcommands."""

from __future__ import annotations

import time
from pathlib import Path

import click
import portalocker
import pytest
from helpers.cli import Cli
from helpers.locks import session_lock_path

from snapstore.checkpoint import FileCheckpointStore
from snapstore.cli.app import cli as snapstore_group
from snapstore.frontend.exitcodes import ExitCode

GLOBAL_OPTIONS = {
    "--root",
    "--json",
    "--lock-timeout",
    "--quiet",
    "-q",
    "--verbose",
    "-v",
    "--debug",
}


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        found.append((prefix + name, command))
        if isinstance(command, click.Group):
            found += _commands(command, prefix + name + " ")
    return found


@pytest.mark.parametrize(("name", "command"), _commands(snapstore_group))
def test_every_command_takes_every_global_option(name: str, command: click.Command) -> None:
    options = {opt for param in command.params for opt in param.opts}
    assert options >= GLOBAL_OPTIONS, name


def test_root_json_and_quiet_after_the_command(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    result = cli.run("list", "--root", str(cli.root), "--json", root=False)
    assert result.code == 0, result
    assert [info["name"] for info in result.json()["snapshots"]] == ["n1"]
    quiet = cli.run(
        "create",
        "s1",
        "--name",
        "n2",
        "README.md",
        "--base",
        str(project),
        "--root",
        str(cli.root),
        "-q",
    )
    assert quiet.code == 0 and quiet.stdout == "" and quiet.stderr == "", quiet


def test_a_root_after_the_command_overrides_the_one_before(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    elsewhere = cli.cwd / "elsewhere"
    result = cli.run("--root", str(elsewhere), "list", "--root", str(cli.root), "-q", root=False)
    assert result.code == 0, result
    assert "n1" in result.stdout
    missing = cli.run("--root", str(cli.root), "list", "--root", str(elsewhere), root=False)
    assert missing.code == ExitCode.NO_STORE
    assert str(elsewhere) in missing.stderr


def test_global_options_after_a_subcommand_of_a_group(cli: Cli, project: Path) -> None:
    cli.store().put_state("etl", "cursor", {"page": 3})
    result = cli.run("state", "get", "etl", "cursor", "--root", str(cli.root), "--json", root=False)
    assert result.code == 0, result
    assert result.json()["value"] == {"page": 3}
    before_subcommand = cli.run("state", "--json", "get", "etl", "cursor")
    assert before_subcommand.json()["found"] is True
    FileCheckpointStore(cli.root).save("feed", {"offset": 10})
    listed = cli.run("checkpoint", "list", "--json", "--root", str(cli.root), root=False)
    assert listed.code == 0, listed
    assert [item["key"] for item in listed.json()["checkpoints"]] == ["feed"]


def test_lock_timeout_after_the_command(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    lock_path = session_lock_path(cli.root, "s1")
    with portalocker.Lock(str(lock_path), mode="a", flags=portalocker.LockFlags.EXCLUSIVE):
        started = time.monotonic()
        result = cli.run("delete", "s1", "n1", "-y", "--lock-timeout", "0.2")
        assert time.monotonic() - started < 10
    assert result.code == ExitCode.LOCKED, result
    assert "within 0.2s" in result.stderr


def test_debug_after_the_command_shows_the_traceback(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    result = cli.run("show", "s1", "missing", "--debug")
    assert result.code == ExitCode.NOT_FOUND
    assert "Traceback" in result.stderr and "SnapshotNotFound" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--lock-timeout", "soon"),
        ("list", "--root"),
        ("state", "get", "s", "n", "--lock-timeout", "-1"),
        ("checkpoint", "list", "--bogus"),
    ],
)
def test_bad_global_options_after_the_command_are_usage_errors(
    cli: Cli, args: tuple[str, ...]
) -> None:
    result = cli.run(*args)
    assert result.code == ExitCode.USAGE, result
    assert "Traceback" not in result.stderr
    error = cli.fails(*args, code=ExitCode.USAGE, error_type="UsageError")
    assert error["message"]


def test_demo_counts_a_root_after_the_command_as_explicit(cli: Cli) -> None:
    result = cli.run("demo", "--json", "--root", str(cli.root), root=False)
    assert result.code == 0, result
    assert result.json()["root"] == str(cli.root.resolve())
    assert (cli.root / "FORMAT").is_file()
