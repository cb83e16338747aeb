"""``create``, ``list``, ``show`` and ``cat``: output, JSON shapes and bad input."""

from __future__ import annotations

import base64
import os
import re
import socket
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers.cli import Cli

from snapstore.frontend.exitcodes import ExitCode

INFO_KEYS = {
    "session",
    "name",
    "kind",
    "created_at",
    "expires_at",
    "file_count",
    "total_bytes",
    "meta",
    "base_dir",
    "skipped",
}
ENTRY_KEYS = {"path", "kind", "mode", "size", "mtime_ns", "digest", "target", "extents", "link"}


def test_create_prints_a_summary(cli: Cli, project: Path) -> None:
    result = cli.ok("create", "s1", "--name", "n1", "README.md", "src", "--base", str(project))
    assert result.stdout.startswith("created s1/n1: 3 files, ")
    assert "expires never" in result.stdout


def test_create_json_shape(cli: Cli, project: Path) -> None:
    info = cli.json(
        "create",
        "s1",
        "--name",
        "n1",
        "src",
        "--base",
        str(project),
        "--meta",
        "tool=editor",
        "--meta",
        "note=a=b",
        "--ttl",
        "15m",
    )["snapshot"]
    assert set(info) >= INFO_KEYS
    assert info["session"] == "s1" and info["name"] == "n1" and info["kind"] == "files"
    assert info["file_count"] == 2
    assert info["meta"] == {"tool": "editor", "note": "a=b"}
    assert info["base_dir"] == str(project)
    created = datetime.fromisoformat(info["created_at"])
    expires = datetime.fromisoformat(info["expires_at"])
    assert abs((expires - created) - timedelta(minutes=15)) < timedelta(seconds=1)


def test_create_relative_to_cwd_by_default(cli: Cli, project: Path) -> None:
    result = cli.run("--json", "create", "s1", "--name", "n1", "project/README.md")
    assert result.code == 0, result
    assert result.json()["snapshot"]["base_dir"] == str(cli.cwd)


def test_quiet_create_prints_nothing(cli: Cli, project: Path) -> None:
    result = cli.ok("--quiet", "create", "s1", "--name", "n1", "src", "--base", str(project))
    assert result.stdout == "" and result.stderr == ""


def test_create_rejects_bad_duration(cli: Cli, project: Path) -> None:
    ttl = "5x"
    result = cli.run("create", "s1", "--name", "n1", "src", "--base", str(project), "--ttl", ttl)
    assert result.code == 2
    assert "invalid duration" in result.stderr
    error = cli.fails(
        "create", "s1", "--name", "n1", "src", "--ttl", ttl, code=2, error_type="UsageError"
    )
    assert "invalid duration" in error["message"]
    assert not cli.root.exists()


def test_create_rejects_bad_meta(cli: Cli, project: Path) -> None:
    cli.fails(
        "create", "s1", "--name", "n1", "src", "--meta", "novalue", code=2, error_type="UsageError"
    )


def test_create_rejects_missing_base(cli: Cli) -> None:
    cli.fails(
        "create", "s1", "--name", "n1", "x", "--base", "nowhere", code=2, error_type="UsageError"
    )


def test_create_needs_a_path(cli: Cli) -> None:
    cli.fails("create", "s1", "--name", "n1", code=2, error_type="UsageError")


def test_create_rejects_a_path_outside_the_base(cli: Cli, project: Path) -> None:
    error = cli.fails("create", "s1", "--name", "n1", "../x", "--base", str(project))
    assert error["type"] == "UnsafePathError"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX special files")
def test_create_refuses_an_unreadable_path(cli: Cli, project: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(project / "control.sock"))
        error = cli.fails("create", "s1", "--name", "n1", ".", "--base", str(project))
        assert "control.sock" in error["message"]
        skipped = cli.run(
            "create", "s1", "--name", "n1", ".", "--base", str(project), "--skip-unreadable"
        )
    assert skipped.code == ExitCode.PARTIAL, skipped
    assert skipped.stdout.startswith("created s1/n1: ")
    assert "warning: skipped control.sock" in skipped.stderr
    info = cli.json("show", "s1", "n1")["snapshot"]
    assert [item["path"] for item in info["skipped"]] == ["control.sock"] or info["skipped"] == []


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="needs POSIX permissions, not root"
)
def test_create_refuses_a_file_without_read_permission(cli: Cli, project: Path) -> None:
    secret = project / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    try:
        error = cli.fails("create", "s1", "--name", "n1", "secret.txt", "--base", str(project))
    finally:
        secret.chmod(0o600)
    assert "secret.txt" in error["message"]


GENERATED_NAME = re.compile(r"\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{4}")


def test_create_without_a_name_generates_one_that_sorts_by_time(cli: Cli, project: Path) -> None:
    first = cli.ok("create", "s1", "README.md", "--base", str(project))
    match = re.fullmatch(r"created s1/(\S+): 1 file, 10 B, expires never\n", first.stdout)
    assert match and GENERATED_NAME.fullmatch(match[1]), first.stdout
    quiet = cli.ok("-q", "create", "s1", "src", "--base", str(project))
    assert GENERATED_NAME.fullmatch(quiet.stdout.strip()), quiet.stdout
    assert quiet.stderr == ""
    names = [info["name"] for info in cli.json("list", "s1")["snapshots"]]
    assert names == [match[1], quiet.stdout.strip()] == sorted(names)


def test_create_says_when_it_replaced_a_snapshot(cli: Cli, project: Path) -> None:
    created = cli.json("create", "s1", "README.md", "--name", "n1", "--base", str(project))
    assert created["replaced"] is False and created["snapshot"]["replaced"] is False
    replaced = cli.json("create", "s1", "src", "-n", "n1", "--base", str(project))
    assert replaced["replaced"] is True and replaced["snapshot"]["replaced"] is True
    again = cli.ok("create", "s1", "src", "-n", "n1", "--base", str(project))
    assert again.stdout.startswith("replaced s1/n1: 2 files, ")


def test_create_no_replace_refuses_an_existing_name(cli: Cli, project: Path) -> None:
    cli.ok("create", "s1", "README.md", "-n", "n1", "--base", str(project))
    error = cli.fails(
        "create",
        "s1",
        "src",
        "-n",
        "n1",
        "--no-replace",
        "--base",
        str(project),
        code=ExitCode.EXISTS,
        error_type="SnapshotExistsError",
    )
    assert error["message"] == "snapshot 'n1' already exists in session 's1'"
    assert [e["path"] for e in cli.json("show", "s1", "n1")["entries"]] == ["README.md"]
    fresh = cli.json("create", "s1", "src", "-n", "n2", "--no-replace", "--base", str(project))
    assert fresh["replaced"] is False


def test_create_warns_once_about_paths_that_do_not_exist(cli: Cli, project: Path) -> None:
    result = cli.run("create", "s1", "README.md", "NEW.md", "typo.md", "--base", str(project))
    assert result.code == 0, result
    warning = result.stderr.splitlines()
    assert len(warning) == 1 and warning[0].startswith(f"warning: not found in {project}, ")
    assert "recorded as absent: NEW.md, typo.md (" in warning[0]
    assert "mistyped" in warning[0] and "--missing error" in warning[0]
    assert "--name" not in warning[0]
    old_style = cli.run("create", "s1", "n1", "README.md", "--base", str(project))
    assert old_style.code == 0, old_style
    assert old_style.stderr.endswith(
        "recorded as absent: n1 (a restore removes them if they exist then; a mistyped path is "
        "recorded the same way: check the spelling, or pass --missing error to refuse paths "
        "that do not exist); to name the snapshot 'n1', pass --name n1\n"
    )
    named = cli.run("-q", "--json", "create", "s1", "-n", "n1", "gone", "--base", str(project))
    assert named.code == 0 and named.json()["absent"] == ["gone"]
    assert "recorded as absent: gone (" in named.stderr and "--name" not in named.stderr
    entries = {e["path"]: e["kind"] for e in cli.json("show", "s1", "n1")["entries"]}
    assert entries == {"gone": "absent"}
    present = cli.run("create", "s1", "README.md", "--base", str(project))
    assert present.stderr == ""


def test_create_missing_error_refuses_and_commits_nothing(cli: Cli, project: Path) -> None:
    error = cli.fails(
        "create",
        "s1",
        "README.md",
        "typo.md",
        "-n",
        "n1",
        "--missing",
        "error",
        "--base",
        str(project),
        code=ExitCode.NOT_FOUND,
        error_type="MissingPathError",
    )
    assert "typo.md" in error["message"]
    assert cli.json("list")["snapshots"] == []
    cli.fails("create", "s1", "x", "--missing", "maybe", code=2, error_type="UsageError")


def test_create_excludes(cli: Cli, project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: main\n")
    (project / "src" / "app.pyc").write_bytes(b"\x00")
    (project / ".snapstoreignore").write_text("# compiled\n*.pyc\n")
    (project / "data" / ".gitignore").write_text("*.bin\n")
    base = ["--base", str(project)]

    def paths(*options: str) -> set[str]:
        info = cli.json("create", "s1", ".", "-n", "n1", *base, *options)["snapshot"]
        entries = cli.json("show", "s1", "n1")["entries"]
        assert info["file_count"] == sum(e["kind"] == "file" for e in entries)
        return {entry["path"] for entry in entries if entry["kind"] == "file"}

    default = paths()
    assert ".git/HEAD" not in default and "src/app.pyc" not in default
    assert "data/blob.bin" not in default, "git's rules are honoured by default"
    assert {"README.md", ".snapstoreignore"} <= default
    assert cli.json("show", "s1", "n1")["snapshot"]["excludes"] == [
        "data/**/*.bin",
        ".git",
        ".hg",
        ".svn",
        ".jj",
        "*.pyc",
    ]
    assert ".git/HEAD" in paths("--no-default-excludes")
    assert "data/blob.bin" not in paths("--gitignore")
    assert "data/blob.bin" in paths("--no-gitignore")
    kept = paths("--exclude", "src/", "--exclude", "*.md", "--no-gitignore")
    assert not any(p.startswith("src/") or p.endswith(".md") for p in kept)
    excludes = cli.json("show", "s1", "n1")["snapshot"]["excludes"]
    assert excludes == [".git", ".hg", ".svn", ".jj", "src/", "*.md", "*.pyc"]


def test_list_table(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "src", session="alpha", name="first")
    cli.store().put_state("beta", "cursor", 7)
    lines = cli.ok("list").stdout.splitlines()
    assert lines[0].split() == [
        "SESSION",
        "NAME",
        "KIND",
        "FILES",
        "SIZE",
        "STORED",
        "CREATED",
        "EXPIRES",
    ]
    assert lines[1].split()[:4] == ["alpha", "first", "files", "2"]
    assert "just now" in lines[1] or "s ago" in lines[1]
    assert lines[2].split()[:4] == ["beta", "cursor", "state", "-"]
    assert lines[1].index("files") == lines[2].index("state") == lines[0].index("KIND")


def test_list_json_oldest_first_and_session_filter(cli: Cli, project: Path) -> None:
    for session, name in [("a", "one"), ("b", "two"), ("a", "three")]:
        cli.snapshot(project, "README.md", session=session, name=name)
    every = cli.json("list")["snapshots"]
    assert [info["name"] for info in every] == ["one", "two", "three"]
    assert all(set(info) >= INFO_KEYS for info in every)
    only_a = cli.json("list", "a")["snapshots"]
    assert [info["name"] for info in only_a] == ["one", "three"]
    assert cli.json("list", "nobody") == {"snapshots": []}


def test_list_of_an_empty_store(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    cli.store().delete("s1", "n1")
    result = cli.ok("list")
    assert result.stdout == ""
    assert "no snapshots" in result.stderr


def test_show_human(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", "src", "NEW.md")
    out = cli.ok("show", "s1", "n1").stdout
    assert "snapshot: s1/n1" in out
    assert f"base dir: {project}" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("KIND"))
    assert header.split() == ["KIND", "MODE", "SIZE", "DIGEST", "PATH"]
    assert any(line.startswith("absent") and line.endswith("NEW.md") for line in lines)
    assert any(line.startswith("dir") and line.endswith("src") for line in lines)


def test_show_prints_the_exclude_rules(cli: Cli, project: Path) -> None:
    cli.snapshot(project, exclude=["*.log", "build/"])
    out = cli.ok("show", "s1", "n1").stdout.splitlines()
    assert "excludes: .git, .hg, .svn, .jj, *.log, build/" in out
    assert cli.json("show", "s1", "n1")["snapshot"]["excludes"][-2:] == ["*.log", "build/"]
    cli.snapshot(project, name="n2", default_excludes=False)
    assert "excludes: none" in cli.ok("show", "s1", "n2").stdout.splitlines()
    cli.store().put_state("s1", "cursor", 1)
    assert "excludes:" not in cli.ok("show", "s1", "cursor").stdout


def test_show_of_an_undo_backup_says_what_it_was_taken_before(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    (project / "README.md").write_bytes(b"edited\n")
    backup = cli.json("restore", "s1", "n1")["backup"]
    out = cli.ok("show", "s1", backup).stdout.splitlines()
    assert out[:3] == [
        f"snapshot: s1/{backup}",
        "kind:     files",
        "backup:   undo backup taken before restoring s1/n1",
    ]
    assert cli.json("show", "s1", backup)["snapshot"]["backup_of"] == "n1"
    assert "backup:" not in cli.ok("show", "s1", "n1").stdout


def test_show_json_shape(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", "NEW.md")
    document = cli.json("show", "s1", "n1")
    assert set(document) == {"snapshot", "entries"}
    entries = {entry["path"]: entry for entry in document["entries"]}
    assert all(set(entry) == ENTRY_KEYS for entry in entries.values())
    assert entries["README.md"]["kind"] == "file"
    assert entries["README.md"]["size"] == len(b"# project\n")
    assert len(entries["README.md"]["digest"]) == 64
    assert entries["NEW.md"]["kind"] == "absent" and entries["NEW.md"]["digest"] is None


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_show_symlink(cli: Cli, project: Path) -> None:
    (project / "link").symlink_to("README.md")
    cli.snapshot(project, "link")
    assert "link -> README.md" in cli.ok("show", "s1", "n1").stdout


def test_show_state_value(cli: Cli) -> None:
    cli.store().put_state("pipe", "cursor", {"row": 3})
    document = cli.json("show", "pipe", "cursor")
    assert document["snapshot"]["kind"] == "state"
    assert document["value"] == {"row": 3}
    assert '"row": 3' in cli.ok("show", "pipe", "cursor").stdout


def test_show_missing_snapshot(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    error = cli.fails("show", "s1", "nope", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")
    assert error["message"] == "no snapshot 'nope' in session 's1'"


def test_cat_writes_raw_bytes(cli: Cli, project: Path) -> None:
    cli.snapshot(project)
    (project / "data/blob.bin").write_bytes(b"changed")
    result = cli.ok("cat", "s1", "n1", "data/blob.bin")
    assert result.stdout_bytes == bytes(range(256)) * 8


def test_cat_json_is_base64(cli: Cli, project: Path) -> None:
    cli.snapshot(project)
    document = cli.json("cat", "s1", "n1", "src/app.py")
    assert document["path"] == "src/app.py" and document["size"] == 15
    assert base64.b64decode(document["base64"]) == b"print('hello')\n"


def test_cat_missing_path(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    result = cli.run("cat", "s1", "n1", "nope.txt")
    assert result.code == ExitCode.NOT_FOUND
    assert result.stdout == ""
    assert "nope.txt" in result.stderr and "Traceback" not in result.stderr


def test_show_marks_hard_links_files_with_holes_and_chunked_files(cli: Cli, project: Path) -> None:
    os.link(project / "README.md", project / "src" / "README-link.md")
    with open(project / "disk.img", "wb") as image:
        image.truncate(512 << 10)
        image.write(b"data")
    (project / "large.bin").write_bytes(os.urandom(3 << 20))
    cli.run("create", "s1", ".", "--name", "n1", "--base", str(project))
    lines = cli.run("show", "s1", "n1").stdout.splitlines()
    assert any(line.endswith("src/README-link.md (hard link of README.md)") for line in lines)
    [image_line] = [line for line in lines if "disk.img" in line]
    kept_holes = os.lstat(project / "disk.img").st_blocks * 512 < 512 << 10
    assert image_line.endswith("(holes)") == kept_holes
    assert "512.0 KiB" in image_line
    [large_line] = [line for line in lines if "large.bin" in line]
    assert large_line.endswith("large.bin (chunked)")


def test_names_holding_control_characters_cannot_drive_the_terminal(
    cli: Cli, project: Path
) -> None:
    """Names may hold any character; what a person's terminal is shown has its control
    characters escaped (``--json`` keeps the name exact, escaped as JSON escapes)."""
    hostile = "s\x1b[2J\x07"
    cli.snapshot(project, session=hostile, name="n\rx")
    listed = cli.ok("list").stdout
    assert "\x1b" not in listed and "\x07" not in listed and "\r" not in listed
    assert "s\\x1b[2J\\x07" in listed and "n\\x0dx" in listed
    assert {item["session"] for item in cli.json("list")["snapshots"]} == {hostile}


def test_columns_stay_aligned_around_escaped_names(cli: Cli, project: Path) -> None:
    cli.snapshot(project, session="a\x1bb", name="n1")
    cli.snapshot(project, session="plain", name="n2")
    lines = cli.ok("list").stdout.splitlines()
    assert len({line.index("files") for line in lines[1:]}) == 1
