"""``state get|set|reset``: resume values given and printed as JSON."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from helpers.cli import Cli

from snapstore.frontend.exitcodes import ExitCode


def test_set_then_get_round_trips_json(cli: Cli) -> None:
    value = '{"cursor": "abc", "row": 42, "done": [1, 2.5, null, true]}'
    assert cli.ok("state", "set", "etl", "orders", value).stdout.startswith("saved etl/orders")
    document = cli.json("state", "get", "etl", "orders")
    assert document == {
        "session": "etl",
        "name": "orders",
        "found": True,
        "value": {"cursor": "abc", "row": 42, "done": [1, 2.5, None, True]},
    }
    human = cli.ok("state", "get", "etl", "orders").stdout
    assert human.startswith("{") and '"row": 42' in human


def test_set_replaces_and_accepts_scalars(cli: Cli) -> None:
    cli.ok("state", "set", "etl", "etag", '"W/1"')
    cli.ok("state", "set", "etl", "etag", '"W/2"')
    assert cli.ok("state", "get", "etl", "etag").stdout.strip() == '"W/2"'
    cli.ok("state", "set", "etl", "none", "null")
    assert cli.json("state", "get", "etl", "none") == {
        "session": "etl",
        "name": "none",
        "found": True,
        "value": None,
    }


def test_set_json_shape_and_ttl(cli: Cli) -> None:
    document = cli.json("state", "set", "etl", "cursor", "7", "--ttl", "1h")
    assert document["value"] == 7
    info = document["snapshot"]
    assert info["kind"] == "state"
    created = datetime.fromisoformat(info["created_at"])
    assert datetime.fromisoformat(info["expires_at"]) - created == timedelta(hours=1)


def test_get_missing_value(cli: Cli) -> None:
    cli.fails("state", "get", "etl", "cursor", code=ExitCode.NO_STORE)
    assert not cli.root.exists()
    cli.store().put_state("etl", "other", 1)
    cli.fails(
        "state", "get", "etl", "cursor", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound"
    )
    document = cli.json("state", "get", "etl", "cursor", "--default", '{"row": 0}')
    assert document["found"] is False and document["value"] == {"row": 0}
    assert cli.ok("state", "get", "etl", "cursor", "--default", "0").stdout.strip() == "0"


def test_set_rejects_invalid_json(cli: Cli) -> None:
    error = cli.fails("state", "set", "etl", "cursor", "{bad", code=2, error_type="UsageError")
    assert "not valid JSON" in error["message"]
    result = cli.run("state", "set", "etl", "cursor", "text")
    assert result.code == 2 and "quote strings" in result.stderr


def test_reset(cli: Cli) -> None:
    cli.store().put_state("etl", "cursor", 5)
    assert cli.run("state", "reset", "etl", "cursor").code == 2
    assert cli.json("state", "reset", "etl", "cursor", "--yes")["deleted"] is True
    cli.fails(
        "state", "get", "etl", "cursor", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound"
    )
    cli.fails(
        "state",
        "reset",
        "etl",
        "cursor",
        "--yes",
        code=ExitCode.NOT_FOUND,
        error_type="SnapshotNotFound",
    )


def test_state_commands_refuse_file_snapshots(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    cli.fails("state", "get", "s1", "n1", error_type="NotAStateSnapshotError")
    cli.fails("state", "reset", "s1", "n1", "--yes", error_type="NotAStateSnapshotError")
    assert [info["name"] for info in cli.json("list")["snapshots"]] == ["n1"]


def test_nan_is_neither_taken_nor_printed_as_json(cli: Cli) -> None:
    """NaN has no JSON form: ``state set`` refuses it as a value, and a NaN stored through
    the library is an error to print with ``--json`` (a strict parser would reject it)."""
    cli.fails("state", "set", "etl", "x", "NaN", code=ExitCode.USAGE)
    cli.store().put_state("etl", "nan", float("nan"))
    error = cli.fails(
        "state", "get", "etl", "nan", code=ExitCode.USAGE, error_type="InvalidValueError"
    )
    assert "NaN" in error["message"]


def test_a_number_no_float_holds_is_refused_when_set(cli: Cli) -> None:
    cli.fails("state", "set", "etl", "big", "1e999", code=ExitCode.USAGE)
    cli.fails("state", "set", "etl", "big", "--", "-1e999", code=ExitCode.USAGE)


def test_get_without_a_default_on_a_missing_store_is_store_not_found(cli: Cli) -> None:
    """A mistyped root must not look like an empty store; with --default it may."""
    cli.fails("state", "get", "s", "a", code=ExitCode.NO_STORE)
    assert cli.json("state", "get", "s", "a", "--default", "7")["value"] == 7
