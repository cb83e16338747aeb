"""``diff`` and ``restore``: what would change, putting files back, and their JSON shapes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.cli import Cli

from snapstore.frontend.exitcodes import ExitCode

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
        "other": None,
        "target": str(project),
        "added": [],
        "modified": [],
        "removed": [],
        "changed": False,
        "counts": {"added": 0, "modified": 0, "removed": 0},
    }


def test_diff_after_edits(cli: Cli, project: Path) -> None:
    checkpoint(cli, project)
    edit(project)
    document = cli.json("diff", "s1", "n1")
    assert document["added"] == ["NEW.md"]  # from the checkpoint to the directory
    assert document["modified"] == ["src/app.py"]
    assert document["removed"] == ["README.md"]
    assert document["changed"] is True
    out = cli.ok("diff", "s1", "n1").stdout.splitlines()
    assert out[0] == f"from s1/n1 to {project}: added 1, modified 1, removed 1"
    assert out[2].split() == ["CHANGE", "PATH"]
    assert [line.split() for line in out[3:]] == [
        ["added", "NEW.md"],
        ["modified", "src/app.py"],
        ["removed", "README.md"],
    ]


def test_diff_against_another_target(cli: Cli, project: Path, tmp_path: Path) -> None:
    checkpoint(cli, project)
    document = cli.json("diff", "s1", "n1", "--target", str(tmp_path / "empty"))
    assert document["target"] == str(tmp_path / "empty")
    assert "README.md" in document["removed"] and "src/app.py" in document["removed"]


def test_restore_puts_the_project_back(cli: Cli, project: Path, tree: Tree) -> None:
    before = tree(project)
    checkpoint(cli, project)
    edit(project)
    out = cli.ok("restore", "s1", "n1").stdout
    assert out.startswith(f"restore of s1/n1 into {project}: wrote 2, removed 1")
    assert "undo: snapstore undo s1" in out
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
    assert document["backup"] == cli.json("backups", "s1")["backups"][0]["name"]


def test_restore_can_be_undone_from_its_backup(cli: Cli, project: Path, tree: Tree) -> None:
    checkpoint(cli, project)
    edit(project)
    edited = tree(project)
    cli.ok("restore", "s1", "n1")
    restored = tree(project)
    assert "undo: snapstore undo s1" in cli.ok("undo", "s1").stdout
    assert tree(project) == edited
    cli.ok("undo", "s1")
    assert tree(project) == restored
    assert len(cli.json("backups", "s1")["backups"]) == 3
    assert [i["name"] for i in cli.json("list", "s1")["snapshots"]] == ["n1"]


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


def _big_change(cli: Cli, project: Path) -> None:
    """A snapshot of 30 files, then those deleted and 25 others added in the same directory."""
    many = project / "many"
    many.mkdir()
    for index in range(30):
        (many / f"old-{index:02}.txt").write_text(f"old {index}\n")
    cli.snapshot(project, "many")
    for index in range(30):
        (many / f"old-{index:02}.txt").unlink()
    for index in range(25):
        (many / f"new-{index:02}.txt").write_text(f"new {index}\n")


def _kinds(lines: list[str], *labels: str) -> dict[str, list[str]]:
    """The paths listed under each label, by label."""
    found: dict[str, list[str]] = {label: [] for label in labels}
    for line in lines:
        words = line.split(maxsplit=1)
        if len(words) == 2 and words[0] in found:
            found[words[0]].append(words[1].strip())
    return found


def test_a_large_restore_prints_a_summary_and_the_first_paths(cli: Cli, project: Path) -> None:
    _big_change(cli, project)
    for args in (("--dry-run",), ()):
        result = cli.ok("restore", "s1", "n1", *args)
        lines = result.stdout.splitlines()
        prefix = "dry run: " if args else ""
        write, remove = ("would write", "would remove") if args else ("wrote", "removed")
        assert lines[0] == (
            f"{prefix}restore of s1/n1 into {project}: {write} 30, {remove} 25, 1 unchanged"
        )
        word = write.split()[-1]
        listed = [line.strip() for line in lines[1:] if word in line.split()[:2]]
        assert len(listed) == 21
        assert listed[-1].endswith("... and 10 more (use --list)")
        removed = [line.strip() for line in lines[1:] if remove.split()[-1] in line.split()[:2]]
        assert len(removed) == 21
        assert removed[-1].endswith("... and 5 more (use --list)")
    assert "undo: snapstore undo s1" in lines[-1]
    assert sorted(p.name for p in (project / "many").iterdir())[0] == "old-00.txt"


def test_restore_list_prints_every_path_and_json_has_them_all(cli: Cli, project: Path) -> None:
    _big_change(cli, project)
    listed = cli.ok("restore", "s1", "n1", "--dry-run", "--list").stdout.splitlines()
    kinds = _kinds([line.replace("would ", "would_") for line in listed], "would_write")
    assert len(kinds["would_write"]) == 30
    assert not any("more (use --list)" in line for line in listed)
    document = cli.json("restore", "s1", "n1", "--dry-run")
    assert len(document["written"]) == 30 and len(document["removed"]) == 25
    assert not any("more" in path for path in document["written"])
    restored = cli.ok("restore", "s1", "n1", "--list").stdout.splitlines()
    assert len(_kinds(restored, "wrote", "removed")["removed"]) == 25


def test_a_large_diff_prints_the_first_paths_of_each_kind(cli: Cli, project: Path) -> None:
    _big_change(cli, project)
    out = cli.ok("diff", "s1", "n1").stdout.splitlines()
    assert out[0].endswith("added 25, modified 0, removed 30")
    kinds = _kinds(out[3:], "added", "removed")
    assert len(kinds["removed"]) == 21 and kinds["removed"][-1] == "... and 10 more (use --list)"
    assert len(kinds["added"]) == 21 and kinds["added"][-1] == "... and 5 more (use --list)"
    listed = cli.ok("diff", "s1", "n1", "--list").stdout.splitlines()[3:]
    everything = _kinds(listed, "removed")
    assert everything["removed"] == [f"many/old-{index:02}.txt" for index in range(30)]
    document = cli.json("diff", "s1", "n1")
    assert len(document["removed"]) == 30 and len(document["added"]) == 25


def test_restore_and_undo_name_what_they_left_alone(cli: Cli, project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    cli.snapshot(project)
    (project / "README.md").write_text("edited\n")
    lines = cli.ok("restore", "s1", "n1").stdout.splitlines()
    assert lines[0].startswith(f"restore of s1/n1 into {project}: wrote 1, removed 0, ")
    assert lines[0].endswith(" unchanged, 1 left alone")
    assert ["left", "alone", ".git"] in [line.split() for line in lines]
    assert (project / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    undo = cli.ok("undo", "s1").stdout
    assert undo.startswith(f"undo of s1 into {project}: wrote 1, removed 0")
    assert (project / "README.md").read_text() == "edited\n"


def test_diff_patch_and_stat_read_from_the_checkpoint_to_the_directory(
    cli: Cli, project: Path
) -> None:
    checkpoint(cli, project)
    (project / "src/app.py").write_text("print('changed')\n")
    out = cli.ok("diff", "s1", "n1", "--patch").stdout
    assert "--- a/src/app.py\n+++ b/src/app.py\n" in out
    assert "-print('hello')\n+print('changed')\n" in out
    stat = cli.ok("diff", "s1", "n1", "--stat").stdout.splitlines()
    assert stat[0].split() == ["src/app.py", "|", "2", "+-"]
    assert stat[-1] == " 1 file changed, 1 insertion(+), 1 deletion(-)"
    document = cli.json("diff", "s1", "n1", "--patch")
    assert document["patch"]["files"][0]["path"] == "src/app.py"
    assert "+print('changed')" in document["patch"]["text"]
    help_text = cli.ok("diff", "--help").stdout
    assert "--patch" in help_text and "--stat" in help_text
