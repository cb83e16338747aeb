"""``diff`` and ``restore``: what would change, putting files back, and their JSON shapes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clitools import Cli

from snapstore.cli.exitcodes import ExitCode

Tree = Callable[[Path], dict[str, bytes]]


def edit(project: Path) -> None:
    """Modify one file, delete one, add one (recorded as absent in the snapshot)."""
    (project / "src/app.py").write_bytes(b"print('edited')\n")
    (project / "README.md").unlink()
    (project / "NEW.md").write_bytes(b"new\n")


def checkpoint(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", "src", "data", "NEW.md")


def test_diff_of_an_unchanged_project(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    assert cli.ok("diff", "s1", "n1").stdout.strip() == f"{project} matches s1/n1"
    document = cli.json("diff", "s1", "n1")
    assert document == {
        "session": "s1",
        "name": "n1",
        "target": str(project),
        "added": [],
        "modified": [],
        "removed": [],
        "changed": False,
    }


def test_diff_after_edits(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    edit(project)
    document = cli.json("diff", "s1", "n1")
    assert document["added"] == ["README.md"]
    assert document["modified"] == ["src/app.py"]
    assert document["removed"] == ["NEW.md"]
    assert document["changed"] is True
    out = cli.ok("diff", "s1", "n1").stdout.splitlines()
    assert "add 1, modify 1, remove 1" in out[0]
    assert out[2].split() == ["CHANGE", "PATH"]
    assert [line.split() for line in out[3:]] == [
        ["add", "README.md"],
        ["modify", "src/app.py"],
        ["remove", "NEW.md"],
    ]


def test_diff_against_another_target(cli: Cli, project: Path, tmp_path: Path) -> None:
    checkpoint(cli, project)
    document = cli.json("diff", "s1", "n1", "--target", str(tmp_path / "empty"))
    assert document["target"] == str(tmp_path / "empty")
    assert "README.md" in document["added"] and "src/app.py" in document["added"]


def test_restore_puts_the_project_back(cli: Cli, project: Path, tree: Tree) -> None:
    before = tree(project)
    checkpoint(cli, project)
    edit(project)
    out = cli.ok("restore", "s1", "n1").stdout
    assert out.startswith(f"restore of s1/n1 into {project}: wrote 2, removed 1")
    assert "undo: snapstore restore s1 pre-restore" in out
    assert tree(project) == before


def test_restore_json_shape(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    edit(project)
    document = cli.json("restore", "s1", "n1")
    assert set(document) >= {"session", "name", "written", "removed", "unchanged", "dry_run"}
    assert sorted(document["written"]) == ["README.md", "src/app.py"]
    assert document["removed"] == ["NEW.md"]
    assert document["dry_run"] is False
    assert document["target"] == str(project)
    assert document["backup"] == "pre-restore"


def test_restore_can_be_undone_from_its_backup(cli: Cli, project: Path, tree: Tree) -> None:
    checkpoint(cli, project)
    edit(project)
    edited = tree(project)
    cli.ok("restore", "s1", "n1")
    cli.ok("restore", "s1", "pre-restore", "--no-backup")
    assert tree(project) == edited


def test_restore_dry_run_writes_nothing(cli: Cli, project: Path, tree: Tree) -> None:
    checkpoint(cli, project)
    edit(project)
    edited = tree(project)
    document = cli.json("restore", "s1", "n1", "--dry-run")
    assert document["dry_run"] is True
    assert document["removed"] == ["NEW.md"]
    out = cli.ok("--quiet", "restore", "s1", "n1", "--dry-run").stdout
    assert out.startswith("dry run: ") and "would remove  NEW.md" in out
    assert tree(project) == edited


def test_restore_into_another_target(cli: Cli, project: Path, tmp_path: Path, tree: Tree) -> None:
    checkpoint(cli, project)
    copy = tmp_path / "copy"
    cli.ok("restore", "s1", "n1", "--target", str(copy))
    assert tree(copy) == tree(project)


def test_restore_only_selected_paths(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    edit(project)
    document = cli.json("restore", "s1", "n1", "--path", "src")
    assert document["written"] == ["src/app.py"]
    assert not (project / "README.md").exists()
    assert (project / "NEW.md").exists()


def test_quiet_restore_prints_nothing(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    edit(project)
    result = cli.ok("-q", "restore", "s1", "n1")
    assert result.stdout == "" and result.stderr == ""


def test_restore_of_a_missing_snapshot(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    cli.fails("restore", "s1", "nope", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")
    cli.fails("diff", "nobody", "n1", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound")


def test_restore_of_a_state_value_is_refused(cli: Cli) -> None:
    cli.store().put_state("pipe", "cursor", 1)
    cli.fails("restore", "pipe", "cursor", error_type="NotAStateSnapshotError")
