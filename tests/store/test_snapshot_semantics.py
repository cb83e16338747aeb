"""What a snapshot covers and how it is named: excludes, generated names, replacing, missing
paths; comparing two snapshots, and one path's history."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.hostile import plant_manifest
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.errors import (
    InvalidValueError,
    MissingPathError,
    SnapshotExistsError,
    UnsafePathError,
)
from snapstore.internals import repository
from snapstore.worktree.excludes import Matcher, rebase


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project with .git, .venv, build output and nested .gitignore files."""
    base = tmp_path / "repo"
    write_tree(
        base,
        {
            "src/app.py": "print(1)\n",
            "src/cache.pyc": "bytecode",
            "src/gen/keep.txt": "kept by a negation",
            "src/gen/out.bin": "generated",
            ".venv/lib/site.py": "venv",
            "build/a.o": "object",
            "notes.tmp": "scratch",
            ".gitignore": "*.pyc\nbuild/\n.venv/\n",
            "src/.gitignore": "gen/*\n!gen/keep.txt\n",
            ".snapstoreignore": "# comment\n*.tmp\n",
        },
    )
    subprocess.run(["git", "init", "-q", str(base)], check=True)
    return base


def _paths(store: SnapStore, name: str) -> set[str]:
    return {entry.path for entry in store.get("s", name).entries}


def test_vcs_metadata_and_snapstoreignore_are_left_out_by_default(
    store: SnapStore, repo: Path
) -> None:
    info = store.create("s", "n", ["."], base_dir=repo, gitignore=False)
    paths = _paths(store, "n")
    assert ".git" not in paths and not any(p.startswith(".git/") for p in paths)
    assert "notes.tmp" not in paths and "src/cache.pyc" in paths and "build/a.o" in paths
    assert info.excludes[:4] == (".git", ".hg", ".svn", ".jj")
    assert "*.tmp" in info.excludes
    store.create("s", "all", ["."], base_dir=repo, default_excludes=False, gitignore=False)
    assert ".git/HEAD" in _paths(store, "all")


@pytest.mark.parametrize("gitignore", [{}, {"gitignore": True}])
def test_gitignore_files_are_honoured_by_default(
    store: SnapStore, repo: Path, gitignore: dict[str, bool]
) -> None:
    info = store.create("s", "n", ["."], base_dir=repo, exclude=["*.bin"], **gitignore)
    paths = _paths(store, "n")
    assert {"src/app.py", "src/gen/keep.txt", ".gitignore", "src/.gitignore"} <= paths
    assert not {"src/cache.pyc", "build", ".venv", "src/gen/out.bin"} & paths
    assert "src/gen/*" in info.excludes and "!src/gen/keep.txt" in info.excludes


def test_a_restore_neither_writes_nor_deletes_an_excluded_path(
    store: SnapStore, repo: Path
) -> None:
    """The failure excludes exist for: restoring a checkpoint of a project root rewound
    .git, so a commit made after the checkpoint vanished."""
    store.create("s", "n", ["."], base_dir=repo, gitignore=True)
    (repo / ".git" / "later-commit").write_text("made after the checkpoint")
    write_tree(repo, {"build/b.o": "newer object", "src/app.py": "edited", "extra.txt": "x"})
    report = store.restore("s", "n")
    assert (repo / ".git" / "later-commit").exists()
    assert (repo / "build" / "b.o").exists() and (repo / "notes.tmp").exists()
    assert (repo / "src" / "app.py").read_text() == "print(1)\n"
    assert not (repo / "extra.txt").exists()
    assert {".git", "build", ".venv"} <= set(report.kept)


def test_an_excluded_path_asked_for_by_name_is_refused(store: SnapStore, repo: Path) -> None:
    with pytest.raises(InvalidValueError, match="exclude rules"):
        store.create("s", "n", [".git"], base_dir=repo)
    with pytest.raises(InvalidValueError, match="list of patterns"):
        store.create("s", "n", ["."], base_dir=repo, exclude="*.tmp")  # type: ignore[arg-type]


def test_patterns_of_nested_ignore_files_are_rebased() -> None:
    assert rebase("*.o", "") == "*.o"
    assert rebase("*.o", "a/b") == "a/b/**/*.o"
    assert rebase("/top", "a") == "a/top"
    assert rebase("x/y", "a") == "a/x/y"
    assert rebase("!keep", "a") == "!a/**/keep"
    assert rebase("dir/", "a") == "a/**/dir/"
    matcher = Matcher([".git"])
    assert matcher("deep/.git", True) and not matcher("deep/git", True)
    matcher.extend(["*.log", "!important.log"])
    assert matcher("a/x.log", False) and not matcher("a/important.log", False)
    assert matcher("x/.git", True)


def test_generated_names_sort_by_time_and_never_collide(store: SnapStore, project: Path) -> None:
    names = [store.create("s", paths=["README.md"], base_dir=project).name for _ in range(5)]
    assert len(set(names)) == 5
    assert names == sorted(names)
    assert [info.name for info in store.list("s")] == names
    with pytest.raises(InvalidValueError, match="paths"):
        store.create("s")


def test_replacing_is_reported_and_can_be_refused(store: SnapStore, project: Path) -> None:
    assert store.create("s", "n", ["README.md"], base_dir=project).replaced is False
    assert store.create("s", "n", ["README.md"], base_dir=project).replaced is True
    assert store.list("s")[0].replaced is False
    with pytest.raises(SnapshotExistsError):
        store.create("s", "n", ["README.md"], base_dir=project, if_exists="error")
    with pytest.raises(InvalidValueError, match="if_exists"):
        store.create("s", "n", ["README.md"], base_dir=project, if_exists="keep")


def test_missing_paths_are_absent_or_refused(store: SnapStore, project: Path) -> None:
    store.create("s", "n", ["README.md", "typo.md"], base_dir=project)
    assert store.get("s", "n").entry("typo.md").kind == "absent"  # type: ignore[union-attr]
    with pytest.raises(MissingPathError, match=r"typo\.md"):
        store.create("s", "m", ["README.md", "typo.md"], base_dir=project, missing="error")
    assert [info.name for info in store.list("s")] == ["n"]


def test_diff_between_two_snapshots_lists_every_path(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"keep.txt": "k", "old/a.txt": "a", "old/deep/b.txt": "b", "mod.txt": "1"})
    store.create("s", "one", ["."], base_dir=base)
    import shutil

    shutil.rmtree(base / "old")
    write_tree(base, {"new/c.txt": "c", "new/deep/d.txt": "d", "mod.txt": "2"})
    store.create("s", "two", ["."], base_dir=base)
    report = store.diff("s", "one", "two")
    assert report.added == ["new", "new/c.txt", "new/deep", "new/deep/d.txt"]
    assert report.removed == ["old", "old/a.txt", "old/deep", "old/deep/b.txt"]
    assert report.modified == ["mod.txt"]
    assert store.diff("s", "two", "latest").changed is False
    with pytest.raises(InvalidValueError, match="target="):
        store.diff("s", "one", tmp_path)  # type: ignore[arg-type]


def test_diff_against_a_directory_lists_a_removed_subtree_file_by_file(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a"})
    store.create("s", "one", ["."], base_dir=base)
    write_tree(base, {"added/x.txt": "x", "added/deep/y.txt": "y"})
    report = store.diff("s", "one")
    assert report.added == ["added", "added/deep", "added/deep/y.txt", "added/x.txt"]
    assert read_tree(base)  # the diff wrote nothing
    assert (base / "added" / "x.txt").exists()


def test_history_lists_the_snapshots_where_a_path_changed(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"other.txt": "o"})
    store.create("s", "1", ["."], base_dir=base)  # f.txt not there yet
    write_tree(base, {"f.txt": "v1"})
    store.create("s", "2", ["."], base_dir=base)
    store.create("s", "3", ["."], base_dir=base)  # unchanged
    time.sleep(0.01)
    write_tree(base, {"f.txt": "v2, longer"})
    store.create("s", "4", ["."], base_dir=base)
    os.unlink(base / "f.txt")
    store.create("s", "5", ["."], base_dir=base)
    changes = store.history("s", "f.txt")
    assert [change.snapshot.name for change in changes] == ["2", "4", "5"]
    assert [change.entry.size if change.entry else None for change in changes] == [2, 10, None]
    assert changes[0].to_dict()["entry"]["digest"] is not None
    assert store.history("s", "never.txt") == []


@pytest.mark.parametrize("bad", ["a\\b", "C:foo", "x:y", os.fsdecode(b"\xff"), ""])
def test_a_path_a_snapshot_cannot_record_is_refused_and_the_old_snapshot_stays(
    tmp_path: Path, bad: str
) -> None:
    """Missing or not, a path the format cannot hold is refused before anything is read:
    it never becomes a manifest every reader rejects, over the previous snapshot."""
    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["a.txt"], base_dir=base)
    with pytest.raises(UnsafePathError):
        store.create("s", "n", ["a.txt", bad], base_dir=base, skip_unreadable=True)
    assert [e.path for e in store.get("s", "n").entries if e.kind == "file"] == ["a.txt"]


@pytest.mark.parametrize("pattern", ["!", "a\\", "[ab"])
def test_an_exclude_pattern_that_cannot_be_matched_is_an_invalid_value(
    tmp_path: Path, pattern: str
) -> None:
    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    with pytest.raises(InvalidValueError):
        store.create("s", "n", ["."], base_dir=base, exclude=[pattern])


def test_invalid_lines_of_an_ignore_file_match_nothing_as_in_git(tmp_path: Path) -> None:
    """A ``.gitignore`` (or ``.snapstoreignore``) in the tree is not the caller's to fix: its
    lines that cannot be matched are left out, the others still apply."""
    base = tmp_path / "proj"
    write_tree(
        base,
        {
            "a.txt": "a",
            "vendor/.gitignore": "[ab\n!\n*.log\n",
            "vendor/x.log": "log",
            "vendor/x.txt": "x",
            ".snapstoreignore": "a\\\n*.tmp\n",
            "b.tmp": "t",
        },
    )
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base, gitignore=True)
    paths = {entry.path for entry in store.get("s", "n").entries}
    assert {"a.txt", "vendor/x.txt"} <= paths
    assert "vendor/x.log" not in paths and "b.tmp" not in paths


def test_a_snapshot_recording_a_pattern_that_cannot_be_matched_is_refused_typed(
    tmp_path: Path,
) -> None:
    import dataclasses

    from snapstore.format.manifest import encode

    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    manifest = repository(store).catalog.read("s", "n")
    info = dataclasses.replace(manifest.info, excludes=("!",))
    data = encode(info, created_ns=time.time_ns(), expires_ns=None, tree=manifest.tree)
    plant_manifest(store, "s", "n", data)
    with pytest.raises(InvalidValueError):
        store.restore("s", "n", tmp_path / "out", dry_run=True)
