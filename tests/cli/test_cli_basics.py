"""Global behaviour of the command line: help, usage errors, exit codes, root and output helpers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.cli import REPO, Cli, cli_env

from snapstore import (
    CorruptBlobError,
    CorruptManifestError,
    LockTimeout,
    MissingBlobError,
    PathNotInSnapshotError,
    SnapshotNotFound,
    UnsafePathError,
)
from snapstore.checkpoint.errors import CheckpointNotFound, CorruptCheckpointError
from snapstore.cli.output import align_rows
from snapstore.cli.params import parse_duration
from snapstore.errors import (
    InvalidNameError,
    InvalidValueError,
    MissingPathError,
    SnapshotExistsError,
)
from snapstore.frontend.exitcodes import ExitCode, exit_code_for
from snapstore.frontend.words import human_age, human_expiry, human_size


def test_help_lists_every_command_but_not_the_hidden_ones(cli: Cli) -> None:
    result = cli.ok("--help")
    for command in (
        "create",
        "list",
        "show",
        "cat",
        "diff",
        "log",
        "restore",
        "delete",
        "delete-session",
        "sweep",
        "gc",
        "verify",
        "state",
        "demo",
    ):
        assert f"  {command} " in result.stdout
    assert "_demo" not in result.stdout


def test_no_command_is_a_usage_error(cli: Cli) -> None:
    assert cli.run().code == 2


def test_unknown_command_is_a_usage_error_with_json_document(cli: Cli) -> None:
    result = cli.run("bogus")
    assert result.code == 2
    assert "No such command" in result.stderr
    error = cli.fails("bogus", code=2, error_type="UsageError")
    assert "bogus" in error["message"]


def test_version(cli: Cli) -> None:
    result = cli.ok("--version")
    assert result.stdout.startswith("snapstore, version")


def test_json_flag_also_works_after_the_command(cli: Cli, project: Path) -> None:
    cli.snapshot(project)
    result = cli.run("list", "--json")
    assert result.code == 0
    assert [info["name"] for info in result.json()["snapshots"]] == ["n1"]


def test_root_defaults_to_dot_snapstore_in_cwd(cli: Cli, project: Path) -> None:
    result = cli.run("create", "s", "--name", "n", "README.md", "--base", str(project), root=False)
    assert result.code == 0, result
    assert (cli.cwd / ".snapstore").is_dir()


def test_root_comes_from_environment(cli: Cli, project: Path) -> None:
    elsewhere = cli.cwd / "from-env"
    env = {"SNAPSTORE_ROOT": str(elsewhere)}
    created = cli.run(
        "create", "s", "--name", "n", "README.md", "--base", str(project), root=False, env=env
    )
    assert created.code == 0, created
    listed = cli.run("--json", "list", root=False, env=env)
    assert [info["session"] for info in listed.json()["snapshots"]] == ["s"]
    assert not (cli.cwd / ".snapstore").exists()


def test_read_commands_do_not_create_a_missing_store(cli: Cli) -> None:
    error = cli.fails("list", code=ExitCode.NO_STORE, error_type="StoreNotFound")
    assert str(cli.root) in error["message"]
    assert not cli.root.exists()


def test_errors_are_one_line_without_traceback(cli: Cli, project: Path) -> None:
    cli.snapshot(project)
    result = cli.run("show", "s1", "missing")
    assert result.code == ExitCode.NOT_FOUND
    assert result.stdout == ""
    assert result.stderr.strip() == "error: no snapshot 'missing' in session 's1'"


def test_debug_shows_the_traceback(cli: Cli, project: Path) -> None:
    cli.snapshot(project)
    result = cli.run("--debug", "show", "s1", "missing")
    assert result.code == ExitCode.NOT_FOUND
    assert "Traceback" in result.stderr
    assert "SnapshotNotFound" in result.stderr


def test_import_snapstore_does_not_import_click() -> None:
    code = "import sys, snapstore; assert 'click' not in sys.modules, 'click imported'"
    subprocess.run([sys.executable, "-c", code], env=cli_env(), check=True, cwd=REPO)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("0.5", 0.5),
        ("90s", 90.0),
        ("15m", 900.0),
        ("24h", 86400.0),
        ("7d", 604800.0),
        ("1w", 604800.0),
        ("1h30m", 5400.0),
        (" 2H ", 7200.0),
        ("0", 0.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "x", "5x", "-5", "-5m", "m", "1.m", "nan", "inf", "5 m s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 1024**2, "5.0 MiB"),
        (3 * 1024**3, "3.0 GiB"),
        (2 * 1024**6, "2048.0 PiB"),
    ],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


def test_human_age_and_expiry() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert human_age(now, now) == "just now"
    assert human_age(now - timedelta(seconds=45), now) == "45s ago"
    assert human_age(now - timedelta(minutes=3, seconds=10), now) == "3m ago"
    assert human_age(now - timedelta(days=2, hours=5), now) == "2d ago"
    assert human_age(now + timedelta(seconds=3599.6), now) == "in 1h"
    assert human_age(now - timedelta(minutes=59, seconds=40), now) == "1h ago"
    assert human_age(now - timedelta(minutes=44, seconds=40), now) == "45m ago"
    assert human_age(now + timedelta(days=6, hours=23), now) == "in 1w"
    assert human_age(now - timedelta(days=400), now) == "1y ago"
    assert human_expiry(None, now) == "never"
    assert human_expiry(now + timedelta(hours=2), now) == "in 2h"
    assert human_expiry(now - timedelta(minutes=5), now) == "expired 5m ago"


def test_align_rows_pads_columns() -> None:
    lines = align_rows([["a", "1"], ["long", "1000"]], right=(1,))
    assert lines == ["a        1", "long  1000"]


def test_module_entry_point_matches_console_script() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'snapstore = "snapstore.cli:main"' in text
    assert os.path.exists(REPO / "snapstore" / "__main__.py")


def test_exit_code_table_in_the_docs_matches_the_code() -> None:
    text = (REPO / "docs" / "cli.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", text, re.M)
    assert [(int(number), name) for number, name in rows] == [
        (code.value, code.name) for code in ExitCode
    ]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (LockTimeout("gc", 1.0), ExitCode.LOCKED),
        (SnapshotNotFound("s", "n"), ExitCode.NOT_FOUND),
        (PathNotInSnapshotError("nope"), ExitCode.NOT_FOUND),
        (CheckpointNotFound("key"), ExitCode.NOT_FOUND),
        (CorruptManifestError("bad"), ExitCode.DAMAGED),
        (CorruptBlobError("bad"), ExitCode.DAMAGED),
        (MissingBlobError("gone"), ExitCode.DAMAGED),
        (CorruptCheckpointError("key", "bad"), ExitCode.DAMAGED),
        (PermissionError(13, "Permission denied"), ExitCode.PERMISSION),
        (OSError(5, "Input/output error"), ExitCode.ERROR),
        (UnsafePathError("../x"), ExitCode.ERROR),
        (InvalidNameError("'a' is the start of 2 snapshot names"), ExitCode.USAGE),
        (InvalidValueError("ttl must be a positive number of seconds"), ExitCode.USAGE),
        (MissingPathError("no such path under /p: x"), ExitCode.NOT_FOUND),
        (SnapshotExistsError("s", "n"), ExitCode.EXISTS),
    ],
)
def test_exit_code_for_each_error_type(error: BaseException, code: ExitCode) -> None:
    assert exit_code_for(error) is code


def test_a_restore_that_failed_on_damage_exits_damaged() -> None:
    """A restore wraps what stopped it in RestoreError; a corrupt blob is still damage (13),
    as when ``cat`` meets it."""
    from snapstore.errors import RestoreError

    def failed(cause: BaseException) -> RestoreError:
        try:
            raise RestoreError("the restore failed", rolled_back=True) from cause
        except RestoreError as error:
            return error

    assert exit_code_for(failed(CorruptBlobError("bad"))) is ExitCode.DAMAGED
    assert exit_code_for(failed(OSError(5, "Input/output error"))) is ExitCode.ERROR
