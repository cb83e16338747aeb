"""Selectors on the command line (``latest``, ``latest~N``, a unique prefix of a name), and
``diff`` of two snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import Cli

from snapstore.frontend.exitcodes import ExitCode

NAMES = ("before-edit", "before-refactor", "after")


@pytest.fixture
def three(cli: Cli, project: Path) -> Path:
    """Three checkpoints of s1, oldest first, with README.md changed before the last one."""
    for name in NAMES:
        if name == "after":
            (project / "README.md").write_bytes(b"# project, edited\n")
        cli.snapshot(project, name=name)
    return project


@pytest.mark.parametrize(
    ("selector", "name"),
    [
        ("latest", "after"),
        ("latest~1", "before-refactor"),
        ("latest~2", "before-edit"),
        ("af", "after"),
        ("before-r", "before-refactor"),
        ("before-edit", "before-edit"),
    ],
)
def test_show_takes_a_selector_and_names_what_it_chose(
    cli: Cli, three: Path, selector: str, name: str
) -> None:
    assert cli.json("show", "s1", selector)["snapshot"]["name"] == name
    assert cli.ok("show", "s1", selector).stdout.startswith(f"snapshot: s1/{name}\n")


def test_cat_diff_and_restore_take_selectors(cli: Cli, three: Path) -> None:
    assert cli.ok("cat", "s1", "before-e", "README.md").stdout == "# project\n"
    assert cli.json("cat", "s1", "latest", "README.md")["name"] == "after"
    document = cli.json("diff", "s1", "before-r")
    assert document["name"] == "before-refactor"
    assert document["modified"] == ["README.md"]
    assert cli.ok("diff", "s1", "before-r").stdout.startswith(
        f"from s1/before-refactor to {three}: "
    )
    restored = cli.json("restore", "s1", "latest~2", "--dry-run")
    assert restored["name"] == "before-edit" and restored["written"] == ["README.md"]
    out = cli.ok("restore", "s1", "before-e").stdout
    assert out.startswith(f"restore of s1/before-edit into {three}: wrote 1,")
    assert (three / "README.md").read_bytes() == b"# project\n"


@pytest.mark.parametrize(
    "command",
    [
        ("show", "s1", "before"),
        ("cat", "s1", "before", "README.md"),
        ("diff", "s1", "before"),
        ("diff", "s1", "after", "before"),
        ("restore", "s1", "before", "--dry-run"),
    ],
)
def test_an_ambiguous_prefix_is_a_usage_error(
    cli: Cli, three: Path, command: tuple[str, ...]
) -> None:
    error = cli.fails(*command, code=ExitCode.USAGE, error_type="InvalidNameError")
    assert error["message"] == (
        "'before' is the start of 2 snapshot names in session 's1' "
        "('before-edit', 'before-refactor'); give more of the name"
    )
    result = cli.run(*command)
    assert result.code == ExitCode.USAGE and result.stdout == ""
    assert result.stderr == f"error: {error['message']}\n"


def test_a_full_name_wins_over_a_longer_name_it_starts(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", name="ab")
    cli.snapshot(project, "src", name="abc")
    assert cli.json("show", "s1", "ab")["snapshot"]["name"] == "ab"
    assert cli.json("show", "s1", "abc")["snapshot"]["name"] == "abc"


def test_selectors_that_select_nothing(cli: Cli, three: Path) -> None:
    for selector in ("zzz", "latest~3", "after-all"):
        error = cli.fails("show", "s1", selector, code=ExitCode.NOT_FOUND)
        assert error == {
            "type": "SnapshotNotFound",
            "message": f"no snapshot {selector!r} in session 's1'",
        }
    cli.fails("show", "nobody", "latest", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")


def test_prefixes_and_latest_select_file_checkpoints_only(cli: Cli, three: Path) -> None:
    cli.store().put_state("s1", "cursor", 3)
    cli.fails("show", "s1", "curs", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")
    assert cli.json("show", "s1", "cursor")["value"] == 3
    assert cli.json("show", "s1", "latest")["snapshot"]["name"] == "after"
    backup = cli.json("restore", "s1", "before-e")["backup"]
    assert cli.json("show", "s1", "latest")["snapshot"]["name"] == "after"
    assert cli.json("show", "s1", backup)["snapshot"]["backup_of"] == "before-edit"
    cli.fails("show", "s1", backup[:8], code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")


def test_delete_takes_only_a_full_name(cli: Cli, three: Path) -> None:
    for selector, meant in (("af", "after"), ("latest", "after"), ("latest~1", "before-refactor")):
        result = cli.run("delete", "s1", selector, "--yes")
        assert result.code == ExitCode.NOT_FOUND, result
        hint, error = result.stderr.splitlines()
        assert hint == (
            f"hint: delete takes a full name only; in other commands {selector!r} selects "
            f"{meant!r} (snapstore delete s1 {meant})"
        )
        assert error == f"error: no snapshot {selector!r} in session 's1'"
    ambiguous = cli.run("delete", "s1", "before", "--yes")
    assert ambiguous.code == ExitCode.NOT_FOUND
    assert ambiguous.stderr == "error: no snapshot 'before' in session 's1'\n"
    missing_ok = cli.json("delete", "s1", "af", "--yes", "--missing-ok")
    assert missing_ok == {"session": "s1", "name": "af", "deleted": False}
    assert [i["name"] for i in cli.json("list", "s1")["snapshots"]] == list(NAMES)
    assert cli.json("delete", "s1", "after", "--yes")["deleted"] is True


def test_diff_of_two_snapshots(cli: Cli, project: Path) -> None:
    cli.snapshot(project, ".", name="old")
    (project / "README.md").write_bytes(b"changed\n")
    (project / "src" / "util.py").unlink()
    (project / "docs").mkdir()
    (project / "docs" / "a.md").write_bytes(b"a\n")
    cli.snapshot(project, ".", name="new")
    document = cli.json("diff", "s1", "old", "latest")
    assert document == {
        "session": "s1",
        "name": "old",
        "other": "new",
        "target": None,
        "added": ["docs", "docs/a.md"],
        "modified": ["README.md"],
        "removed": ["src/util.py"],
        "changed": True,
        "counts": {"added": 2, "modified": 1, "removed": 1},
    }
    out = cli.ok("diff", "s1", "old", "new").stdout.splitlines()
    assert out[0] == "from s1/old to s1/new: added 2, modified 1, removed 1"
    assert out[2].split() == ["CHANGE", "PATH"]
    assert [line.split() for line in out[3:]] == [
        ["added", "docs"],
        ["added", "docs/a.md"],
        ["modified", "README.md"],
        ["removed", "src/util.py"],
    ]
    backwards = cli.json("diff", "s1", "new", "old")
    assert backwards["added"] == ["src/util.py"] and backwards["removed"] == ["docs", "docs/a.md"]
    assert cli.ok("diff", "s1", "new", "latest").stdout == "s1/new matches s1/new\n"
    assert cli.json("diff", "s1", "old", "old")["changed"] is False


def test_diff_of_two_snapshots_lists_a_removed_directory_path_by_path(
    cli: Cli, project: Path
) -> None:
    many = project / "many"
    many.mkdir()
    for number in range(25):
        (many / f"f{number:02}.txt").write_bytes(b"%d\n" % number)
    cli.snapshot(project, "many", name="old")
    for child in many.iterdir():
        child.unlink()
    many.rmdir()
    cli.snapshot(project, "many", name="new")
    removed = cli.json("diff", "s1", "old", "new")["removed"]
    assert removed == ["many", *(f"many/f{number:02}.txt" for number in range(25))]
    out = cli.ok("diff", "s1", "old", "new").stdout.splitlines()
    assert out[0] == "from s1/old to s1/new: added 0, modified 0, removed 26"
    assert out[-1].split() == ["removed", "...", "and", "6", "more", "(use", "--list)"]
    assert len(cli.ok("diff", "s1", "old", "new", "--list").stdout.splitlines()) == 3 + 26


def test_diff_failures(cli: Cli, three: Path, tmp_path: Path) -> None:
    cli.fails("diff", "s1", "after", "nope", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")
    cli.fails("diff", "s1", "nope", "after", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")
    error = cli.fails(
        "diff", "s1", "after", "before-e", "--target", str(tmp_path), code=ExitCode.USAGE
    )
    assert error["type"] == "UsageError" and "--target" in error["message"]
    cli.store().put_state("s1", "cursor", 1)
    cli.fails("diff", "s1", "after", "cursor", error_type="NotAStateSnapshotError")
