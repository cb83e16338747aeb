"""A restore into a directory that is not there makes it itself, through descriptors opened
without following links, and removes on a failure only the directory it made: not one a
symlink planted in an ancestor after the plan leads to, not one inside a storage root, and
not one another process made at the target's path meanwhile."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.trees import read_tree, write_tree

from snapstore import RestoreError, SnapStore, SnapstoreError
from snapstore.restore import apply
from snapstore.restore.journal import JournalDir

SNAPSHOT = {"README.md": "snapshot readme", "sub/file.txt": "from snapshot"}


def _store(tmp_path: Path) -> SnapStore:
    write_tree(tmp_path / "project", SNAPSHOT)
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=tmp_path / "project")
    return store


def _after_the_plan(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    """Run ``change`` once the restore has planned, as its journal is written."""
    real_write = JournalDir.write

    def write(self: JournalDir, *args: object, **kwargs: object) -> None:
        change()
        real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(JournalDir, "write", write)


def _writes_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The restore fails once it starts writing files (so that it rolls back)."""
    real_staged = apply.StagedFiles

    def staged(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EIO, "injected: write")

    monkeypatch.setattr(apply, "StagedFiles", staged)
    assert real_staged is not None


def test_a_symlink_planted_in_a_missing_ancestor_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's missing parent becomes a symlink to someone's directory after the plan:
    the restore writes nothing there and removes nothing of it."""
    store = _store(tmp_path)
    victim = tmp_path / "victim"
    write_tree(victim, {"out/thesis.tex": "the only copy", "out/sub/notes.txt": "notes"})
    before = read_tree(victim)
    shared = tmp_path / "shared"
    shared.mkdir()
    _after_the_plan(monkeypatch, lambda: os.symlink(victim, shared / "x"))
    with pytest.raises(SnapstoreError):
        store.restore("s", "n", shared / "x" / "out")
    assert read_tree(victim) == before
    assert not list((tmp_path / "store" / "journal").iterdir())


def test_a_symlink_planted_in_a_missing_ancestor_does_not_lead_into_a_storage_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    _after_the_plan(monkeypatch, lambda: os.symlink(tmp_path / "store", shared / "x"))
    with pytest.raises(SnapstoreError):
        store.restore("s", "n", shared / "x" / "out")
    assert not (tmp_path / "store" / "out").exists()


def test_a_target_another_process_makes_after_the_plan_is_neither_written_nor_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process makes the target (with its own files) after the plan found none;
    the restore then fails: it wrote nothing there, and its failure removes nothing."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    theirs = {"precious.txt": "another process's file", "README.md": "another readme"}
    _after_the_plan(monkeypatch, lambda: write_tree(target, theirs))
    _writes_fail(monkeypatch)
    with pytest.raises(SnapstoreError):
        store.restore("s", "n", target)
    write_tree(tmp_path / "theirs", theirs)
    assert read_tree(target) == read_tree(tmp_path / "theirs")


def test_a_new_target_the_restore_made_is_removed_when_the_restore_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    _writes_fail(monkeypatch)
    with pytest.raises(RestoreError) as raised:
        store.restore("s", "n", tmp_path / "a" / "new")
    assert raised.value.rolled_back is True
    assert not (tmp_path / "a" / "new").exists()
    monkeypatch.undo()
    store.restore("s", "n", tmp_path / "a" / "new")
    assert read_tree(tmp_path / "a" / "new") == read_tree(tmp_path / "project")


def test_a_new_target_replaced_after_the_restore_made_it_is_left_to_its_maker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory the restore made is swapped for another's before the restore fails:
    the failure removes nothing of the other's, and says the target was not put back."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    theirs = {"precious.txt": "another process's file"}
    real_staged = apply.StagedFiles

    def staged(*args: object, **kwargs: object) -> object:
        os.rename(target, tmp_path / "made-by-restore")
        write_tree(target, theirs)
        raise OSError(errno.EIO, "injected: write")

    monkeypatch.setattr(apply, "StagedFiles", staged)
    assert real_staged is not None
    with pytest.raises(RestoreError) as raised:
        store.restore("s", "n", target)
    assert raised.value.rolled_back is False
    write_tree(tmp_path / "theirs", theirs)
    assert read_tree(target) == read_tree(tmp_path / "theirs")
