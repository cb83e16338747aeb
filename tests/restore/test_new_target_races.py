"""A restore into a directory that is not there makes it itself, through descriptors opened
without following links, and removes on a failure only the directory it made: not one a
symlink planted in an ancestor after the plan leads to, not one inside a storage root, and
not one another process made at the target's path meanwhile."""

from __future__ import annotations

import errno
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.readonly import read_only_access
from helpers.trees import read_tree, write_tree

from snapstore import RestoreError, SnapStore, SnapstoreError
from snapstore.errors import InterruptedRestoreWarning
from snapstore.frontend.exitcodes import ExitCode
from snapstore.fs import seam as fsio
from snapstore.fs.stamps import file_id
from snapstore.fs.tempnames import new_token
from snapstore.internals import journals
from snapstore.restore import apply
from snapstore.restore.actions import Plan
from snapstore.restore.journal import Journal
from snapstore.restore.recovery import Recovery
from snapstore.restore.removal import remove_tree
from snapstore.restore.targetlocks import target_key
from snapstore.restore.writer import TargetWriter

SNAPSHOT = {"README.md": "snapshot readme", "sub/file.txt": "from snapshot"}


def _store(tmp_path: Path) -> SnapStore:
    write_tree(tmp_path / "project", SNAPSHOT)
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=tmp_path / "project")
    return store


def _after_the_plan(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    """Run ``change`` once, as soon as the restore has planned."""
    real_plan = TargetWriter.plan
    changed: list[bool] = []

    def plan(self: TargetWriter, *args: Any, **kwargs: Any) -> Plan:
        planned = real_plan(self, *args, **kwargs)
        if not changed:
            changed.append(True)
            change()
        return planned

    monkeypatch.setattr(TargetWriter, "plan", plan)


def _writes_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The restore fails once it starts writing files (so that it rolls back)."""
    real_staged = apply.StagedFiles

    def staged(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EIO, "injected: write")

    monkeypatch.setattr(apply, "StagedFiles", staged)
    assert real_staged is not None


LEVELS = ["a", "a/b", "a/b/out"]
"""Where a symlink is planted on the way to the target shared/a/b/out (none of which is
there when the restore plans): each missing ancestor, and the target itself."""
VICTIM = {
    "out/thesis.tex": "the only copy",
    "out/README.md": "victim's readme",
    "out/notes/todo.txt": "notes",
    "b/out/thesis.tex": "another only copy",
}
"""A victim's directory: whichever level the link is planted at, the target's path leads
into it (a -> victim: victim/b/out; a/b -> victim: victim/out; a/b/out -> victim/out)."""


def _plant(shared: Path, victim: Path, level: str) -> None:
    """Plant a symlink at ``level`` below ``shared``, making the directories above it."""
    link = shared / level
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(victim / "out" if level.endswith("out") else victim, link)


@pytest.mark.parametrize("level", LEVELS)
def test_a_symlink_planted_on_the_way_to_a_new_target_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """A missing ancestor (or the target) becomes a symlink to someone's directory after
    the plan: the restore writes nothing there, removes nothing of it, leaves no journal."""
    store = _store(tmp_path)
    victim = tmp_path / "victim"
    write_tree(victim, VICTIM)
    before = read_tree(victim)
    shared = tmp_path / "shared"
    shared.mkdir()
    _after_the_plan(monkeypatch, lambda: _plant(shared, victim, level))
    with pytest.raises(SnapstoreError):
        store.restore("s", "n", shared / "a" / "b" / "out")
    assert read_tree(victim) == before
    assert not journals(store).pending()


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


def _interrupted_before_the_target_was_made(store: SnapStore, target: Path) -> None:
    """The journal a restore (of ``n``, backups kept of what it finds) into the new
    ``target`` leaves when killed after writing it and before making the target: what a
    version that wrote the journal first leaves, and what a recovery of it still meets."""
    journal = Journal(
        target=str(target),
        session="s",
        restoring="n",
        backup=None,
        backups=True,
        paths=None,
        dirs=("", "sub"),
        keep_special_bits=False,
        started_ns=time.time_ns(),
        token=new_token(),
    )
    journals(store).write(target_key(os.path.realpath(target)), journal)


@pytest.mark.parametrize("level", LEVELS)
def test_recovery_does_not_follow_a_symlink_planted_on_the_way_to_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """A restore into shared/a/b/out left its journal before making the target. The next
    open finishes it; a symlink to a victim's directory planted on the way once that
    recovery has checked the target's real path must not make it write, or delete, in the
    victim."""
    store = _store(tmp_path)
    victim = tmp_path / "victim"
    write_tree(victim, VICTIM)
    before = read_tree(victim)
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "a" / "b" / "out"
    _interrupted_before_the_target_was_made(store, target)
    real_finish = Recovery._finish

    def finish(self: Recovery, *args: Any) -> None:
        _plant(shared, victim, level)
        real_finish(self, *args)

    monkeypatch.setattr(Recovery, "_finish", finish)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        SnapStore(tmp_path / "store")
    assert read_tree(victim) == before


def _locked_down_store(reader: Any) -> Path:
    """A store of ``SNAPSHOT`` (snapshot s/n) that ``reader`` can read but not write."""
    project = reader.base / "project"
    write_tree(project, SNAPSHOT)
    reader.share(project)
    root: Path = reader.base / "store"
    SnapStore(root).create("s", "n", ["."], base_dir=project)
    reader.lock_down(root)
    return root


@pytest.mark.parametrize("level", LEVELS)
def test_a_restore_from_a_read_only_store_does_not_follow_a_symlink_planted_after_the_plan(
    tmp_path: Path, level: str
) -> None:
    """A process that can only read the store restores (backup=False) into shared/a/b/out,
    none of it there; after the plan, a symlink to a victim's directory is planted on the
    way: nothing of the victim's is overwritten or removed, and nothing is made there."""
    with read_only_access() as reader:
        if isinstance(reader, str):
            pytest.skip(reader)
        root = _locked_down_store(reader)
        home = reader.writable_dir(reader.base / "home")
        script = f"VICTIM = {VICTIM!r}\n{PLANT_AFTER_THE_PLAN}"
        done = reader.run("-c", script, str(root), str(home), level)
        assert done.returncode == 0, done.stderr.decode()
        result = json.loads(done.stdout)
        assert result["read_only"] is True
        assert result["raised"] is not None
        assert result["victim"] == VICTIM


PLANT_AFTER_THE_PLAN = """
import json, os, sys
from pathlib import Path
from snapstore import SnapStore, SnapstoreError
from snapstore.restore.writer import TargetWriter

root, home, level = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
victim = home / "victim"
for name, text in VICTIM.items():
    (victim / name).parent.mkdir(parents=True, exist_ok=True)
    (victim / name).write_text(text)
shared = home / "shared"
shared.mkdir()
store = SnapStore(root)
real_apply = TargetWriter.apply

def apply(self, *args, **kwargs):
    link = shared / level
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(victim / "out" if level.endswith("out") else victim, link)
    return real_apply(self, *args, **kwargs)

TargetWriter.apply = apply
raised = None
try:
    store.restore("s", "n", shared / "a" / "b" / "out", backup=False)
except SnapstoreError as error:
    raised = type(error).__name__
found = {
    str(path.relative_to(victim)): path.read_text()
    for path in sorted(victim.rglob("*"))
    if path.is_file()
}
print(json.dumps({"read_only": store.read_only, "raised": raised, "victim": found}))
"""


def test_a_read_only_store_restore_that_cannot_make_its_target_fails_as_a_writable_one(
    tmp_path: Path,
) -> None:
    """The reader cannot make the target (its parent is not theirs to write): the mkdir's
    PermissionError is raised as it is, with the exit code a writable store gives it,
    not a RestoreError saying the target may be partly restored (nothing was written)."""
    with read_only_access() as reader:
        if isinstance(reader, str):
            pytest.skip(reader)
        root = _locked_down_store(reader)
        locked = reader.base / "locked"
        locked.mkdir()
        reader.lock_down(locked)
        target = locked / "out"
        done = reader.snapstore(
            root, "--json", "restore", "s", "n", "--target", str(target), "--no-backup"
        )
        assert done.returncode == ExitCode.PERMISSION, done
        assert json.loads(done.stdout)["error"]["type"] == "PermissionError"
        assert not target.exists()


@pytest.mark.parametrize(
    "error", ["OSError(errno.EIO, 'injected')", "CorruptBlobError('injected')"]
)
def test_a_read_only_store_restore_that_fails_part_way_removes_the_target_it_made(
    tmp_path: Path, error: str
) -> None:
    """Whatever makes it fail part-way (an I/O error, damage in the store), the target it
    made goes, and RestoreError says so."""
    with read_only_access() as reader:
        if isinstance(reader, str):
            pytest.skip(reader)
        root = _locked_down_store(reader)
        home = reader.writable_dir(reader.base / "home")
        done = reader.run("-c", FAIL_PART_WAY, str(root), str(home / "a" / "out"), error)
        assert done.returncode == 0, done.stderr.decode()
        result = json.loads(done.stdout)
        assert result == {"read_only": True, "rolled_back": True, "left": False}
        assert (home / "a").is_dir()


FAIL_PART_WAY = """
import errno, json, os, sys
from snapstore import SnapStore, RestoreError
from snapstore.errors import CorruptBlobError
from snapstore.restore import apply

root, target, error = sys.argv[1], sys.argv[2], sys.argv[3]
store = SnapStore(root)

def staged(*args, **kwargs):
    raise eval(error)

apply.StagedFiles = staged
try:
    store.restore("s", "n", target, backup=False)
except RestoreError as error:
    rolled_back = error.rolled_back
print(json.dumps({"read_only": store.read_only, "rolled_back": rolled_back,
                  "left": os.path.lexists(target)}))
"""


@pytest.mark.parametrize("failing", ["unlink", "rmdir"])
def test_a_failed_restore_whose_made_target_cannot_be_removed_says_what_the_next_open_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """The restore fails, and so does the removal of the directory it made: the journal is
    kept, the message says what the next open does with it, and the next open does that:
    it finishes the restore if the directory still holds the restore's marker (no file
    could be removed), else drops it with a warning (the marker went before an rmdir
    failed)."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    _writes_fail(monkeypatch)

    def fails(self: fsio.FileSystem, path: str, *, dir_fd: int | None = None) -> None:
        raise OSError(errno.EBUSY, f"injected: {failing}")

    monkeypatch.setattr(fsio.FileSystem, failing, fails)
    with pytest.raises(RestoreError) as raised:
        store.restore("s", "n", target)
    monkeypatch.undo()
    assert raised.value.rolled_back is False
    message = str(raised.value)
    assert journals(store).pending()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reopened = SnapStore(tmp_path / "store")
    warned = [w for w in caught if issubclass(w.category, InterruptedRestoreWarning)]
    assert not journals(reopened).pending()
    if failing == "unlink":
        assert "the next open of the store (or restore into it) finishes" in message, message
        assert warned == []
        assert read_tree(target) == read_tree(tmp_path / "project")
    else:
        assert "drops this restore's journal, with a warning" in message, message
        assert len(warned) == 1


def test_remove_tree_checks_the_identity_through_the_descriptor_it_empties_with(
    tmp_path: Path,
) -> None:
    """The directory the restore made is swapped for another's between the look and the
    removal (the look is the descriptor's own: no window): the other's is left whole."""
    made = tmp_path / "made"
    made.mkdir()
    identity = file_id(made.stat())
    made.rename(tmp_path / "away")
    write_tree(made, {"precious.txt": "another process's file"})
    parent = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert remove_tree(fsio.FileSystem(), parent, "made", expected=identity) is False
        assert (made / "precious.txt").read_text() == "another process's file"
        away = file_id((tmp_path / "away").stat())
        assert remove_tree(fsio.FileSystem(), parent, "away", expected=away) is True
    finally:
        os.close(parent)
    assert not (tmp_path / "away").exists()
