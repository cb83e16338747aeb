"""``log SESSION PATH``: the checkpoints in which a path changed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.cli import Cli

from snapstore.frontend.exitcodes import ExitCode


def history_of(cli: Cli, path: str) -> list[tuple[str, str | None]]:
    """``(checkpoint, kind or None)`` for each row of ``log s1 PATH --json``."""
    document = cli.json("log", "s1", path)
    assert document["session"] == "s1" and document["path"] == path.removeprefix("./")
    return [
        (row["snapshot"]["name"], row["entry"]["kind"] if row["entry"] else None)
        for row in document["history"]
    ]


def test_log_lists_the_checkpoints_where_a_path_changed(cli: Cli, project: Path) -> None:
    readme = project / "README.md"
    cli.snapshot(project, "README.md", "src", name="n1")
    (project / "src" / "app.py").write_bytes(b"print('changed')\n")
    cli.snapshot(project, "README.md", "src", name="n2")
    readme.write_bytes(b"# changed\n")
    cli.snapshot(project, "README.md", "src", name="n3")
    readme.unlink()
    cli.snapshot(project, "README.md", "src", name="n4")
    readme.write_bytes(b"# back\n")
    cli.snapshot(project, "README.md", "src", name="n5")
    readme.chmod(0o600)
    cli.snapshot(project, "README.md", "src", name="n6")
    assert history_of(cli, "README.md") == [
        ("n1", "file"),
        ("n3", "file"),
        ("n4", None),
        ("n5", "file"),
        ("n6", "file"),
    ]
    assert history_of(cli, "./src/app.py") == [("n1", "file"), ("n2", "file")]
    assert history_of(cli, "src") == [("n1", "dir")]
    lines = cli.ok("log", "s1", "README.md").stdout.splitlines()
    assert lines[0].split() == ["NAME", "CREATED", "KIND", "MODE", "SIZE", "CONTENT"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == ["n1", "n3", "n4", "n5", "n6"]
    assert rows[0][-5:] == ["file", "0644", "10", "B", rows[0][-1]]
    assert len(rows[0][-1]) == 12 and rows[0][-1] != rows[1][-1]
    assert rows[2][-4:] == ["removed", "-", "-", "-"]
    assert rows[4][-5:-3] == ["file", "0600"] and rows[4][-1] == rows[3][-1]


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_log_shows_a_link_target(cli: Cli, project: Path) -> None:
    (project / "link").symlink_to("README.md")
    cli.snapshot(project, "link", name="n1")
    (project / "link").unlink()
    (project / "link").symlink_to("src")
    cli.snapshot(project, "link", name="n2")
    lines = cli.ok("log", "s1", "link").stdout.splitlines()
    assert lines[1].endswith("symlink  0777     -  -> README.md")
    assert lines[2].endswith("symlink  0777     -  -> src")


def test_log_of_a_path_never_recorded(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", "NEW.md", name="n1")
    for path in ("nope.txt", "NEW.md"):
        error = cli.fails("log", "s1", path, code=ExitCode.NOT_FOUND)
        assert error == {
            "type": "PathNotInSnapshotError",
            "message": f"{path!r} is in no checkpoint of session 's1'",
        }
    result = cli.run("log", "s1", "nope.txt")
    assert result.stdout == "" and result.stderr.startswith("error: 'nope.txt' is in no")


def test_log_of_a_session_without_checkpoints(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", session="other")
    cli.store().put_state("s1", "cursor", 1)
    for session in ("s1", "nobody"):
        error = cli.fails("log", session, "README.md", code=ExitCode.NOT_FOUND)
        assert error == {
            "type": "SessionNotFound",
            "message": f"no checkpoints in session {session!r}",
        }


def test_log_refuses_a_path_outside_the_base(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", name="n1")
    cli.fails("log", "s1", "/etc/passwd", error_type="UnsafePathError")
    cli.fails("log", "s1", "../x", error_type="UnsafePathError")
    cli.fails("log", "s1", code=ExitCode.USAGE, error_type="UsageError")


def test_log_needs_a_store(cli: Cli) -> None:
    cli.fails("log", "s1", "README.md", code=ExitCode.NO_STORE, error_type="StoreNotFound")
