"""A restore into a directory that is not there makes it before it writes its journal,
puts its target marker in it, and the journal names that directory by its inode number: a
recovery writes only into a directory with that number that holds that marker. Another
directory found at the target's path after a kill (the made one replaced, or removed and
made again by someone else, even with the same inode number) is left as it is, and the
killed restore is dropped with a warning; a remount that changes the device number does not
keep the recovery from finishing. A kill between the make and the journal leaves only
directories that hold nothing but the marker, and no journal."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.fork import in_a_killed_child
from helpers.seam import KILLED_EXIT, FailingOperation
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.errors import InterruptedRestoreWarning, SnapstoreError
from snapstore.fs import seam
from snapstore.fs.stamps import file_id
from snapstore.fs.tempnames import is_target_marker
from snapstore.internals import journals
from snapstore.restore import writer
from snapstore.restore.actions import Plan
from snapstore.restore.journal import Journal, JournalDir
from snapstore.restore.targetlocks import target_key

SNAPSHOT = {
    "README.md": "snapshot readme",
    "sub/file.txt": "from snapshot",
    **{f"many/f{i:02d}.txt": f"file {i}\n" for i in range(20)},
}
THEIRS = {"precious.txt": "another process's file", "README.md": "another process's readme"}


def _store(tmp_path: Path) -> SnapStore:
    write_tree(tmp_path / "project", SNAPSHOT)
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=tmp_path / "project")
    return store


def _die_at_journal_write() -> None:
    """In the child: the process dies as it is about to write the journal."""

    def write(self: JournalDir, key: str, journal: Journal) -> None:
        os._exit(KILLED_EXIT)

    JournalDir.write = write  # type: ignore[method-assign]


def _die_half_way() -> None:
    """In the child: the restore writes half its plan, then the process dies."""
    real = writer.apply_plan

    def dying(plan: Plan, *args: Any, **kwargs: Any) -> None:
        plan.actions = plan.changes[: len(plan.changes) // 2]
        real(plan, *args, **kwargs)
        os._exit(KILLED_EXIT)

    writer.apply_plan = dying  # type: ignore[assignment]


def _reopen(tmp_path: Path) -> tuple[SnapStore, list[str]]:
    """Open the store again (which recovers killed restores); the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = SnapStore(tmp_path / "store")
    return store, [str(w.message) for w in caught if w.category is InterruptedRestoreWarning]


def test_the_journal_names_the_directory_the_restore_made_before_writing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    target = tmp_path / "a" / "new"
    seen: list[tuple[object, object, object]] = []
    real_write = JournalDir.write

    def write(self: JournalDir, key: str, journal: Journal) -> None:
        seen.append((journal.target_inode, os.stat(target).st_ino, os.listdir(target)))
        real_write(self, key, journal)

    monkeypatch.setattr(JournalDir, "write", write)
    store.restore("s", "n", target)
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "project")
    [(recorded, made, listed)] = seen
    assert recorded == made and len(listed) == 1 and is_target_marker(listed[0])
    assert Journal.decode(Journal(**_fields(target, made)).encode()).target_inode == made


def _fields(target: Path, inode: object) -> dict[str, Any]:
    return {
        "target": str(target),
        "session": "s",
        "restoring": "n",
        "backup": None,
        "backups": True,
        "paths": None,
        "dirs": ("",),
        "keep_special_bits": False,
        "started_ns": 1,
        "token": None if inode is None else "0123456789abcdef",
        "target_inode": inode,
    }


@pytest.mark.parametrize("inode", [-1, "1", [1, 2], True, 1.5])
def test_a_journal_with_a_bad_target_inode_is_damaged(inode: object) -> None:
    from snapstore.format.envelope import seal
    from snapstore.restore.journal import MAGIC, CorruptJournalError

    fields = _fields(Path("/t"), inode)
    fields["paths"], fields["dirs"] = None, list(fields["dirs"])
    with pytest.raises(CorruptJournalError):
        Journal.decode(seal(MAGIC, fields))


def test_a_journal_with_a_target_inode_but_no_token_is_damaged() -> None:
    from snapstore.restore.journal import CorruptJournalError

    fields = _fields(Path("/t"), 7)
    fields["token"] = None
    with pytest.raises(CorruptJournalError):
        Journal.decode(Journal(**fields).encode())


@pytest.mark.parametrize("depth", [1, 3], ids=["target", "target-and-two-parents"])
def test_a_kill_between_the_make_and_the_journal_leaves_only_empty_directories(
    tmp_path: Path, depth: int
) -> None:
    store = _store(tmp_path)
    top = tmp_path / "top"
    target = top.joinpath(*["d"] * (depth - 1), "new")
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_at_journal_write)
    assert not journals(store).pending()
    assert all(node[0] == "dir" for node in read_tree(top).values())
    assert len(read_tree(top)) == depth
    assert [is_target_marker(name) for name in os.listdir(target)] == [True]
    reopened, warned = _reopen(tmp_path)
    assert warned == []
    reopened.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")


@pytest.mark.parametrize("after_the_kill", ["replaced", "removed", "made-again-by-another"])
def test_recovery_writes_nothing_into_a_directory_that_is_not_the_one_the_restore_made(
    tmp_path: Path, after_the_kill: str
) -> None:
    """The restore is killed half-way; before the next open, the directory it made is
    moved away and another's put in its place, or it is removed (``rm -rf``), or removed
    and another process makes the target with its own files (which may get the freed inode
    number). The recovery writes and removes nothing there, keeps no undo backup of it, and
    drops the killed restore with a warning."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_half_way)
    assert journals(store).pending()
    partly = read_tree(target)
    if after_the_kill == "replaced":
        target.rename(tmp_path / "made-by-the-restore")
    else:
        shutil.rmtree(target)
    if after_the_kill != "removed":
        write_tree(target, THEIRS)
    reopened, warned = _reopen(tmp_path)
    assert len(warned) == 1 and "is not there any more" in warned[0], warned
    assert not journals(reopened).pending()
    assert reopened.backups("s") == []
    if after_the_kill == "removed":
        assert not os.path.lexists(target)
    else:
        write_tree(tmp_path / "theirs", THEIRS)
        assert read_tree(target, with_temps=True) == read_tree(tmp_path / "theirs")
    if after_the_kill == "replaced":
        assert read_tree(tmp_path / "made-by-the-restore", with_temps=True).keys() >= partly.keys()


@pytest.mark.parametrize("backup", [True, False])
def test_a_directory_made_again_with_the_freed_inode_number_is_not_taken_for_the_made_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backup: bool
) -> None:
    """After the kill, the user removes the half-restored directory and makes the target
    again, which gets the inode number the made one had (ext4 often hands a freed number
    out again; when it does not, every stat reports that number for the new directory, as
    if it had): without the restore's marker it is not the
    restore's, so nothing is written or removed there, and the restore is dropped with a
    warning."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target, backup=backup), before=_die_half_way)
    made = os.stat(target).st_ino
    shutil.rmtree(target)
    target.mkdir()
    if target.stat().st_ino != made:  # not handed out again this time: as if it had been
        _reporting_inode(monkeypatch, target.stat(), made)
    assert os.stat(target).st_ino == made
    write_tree(target, THEIRS)
    reopened, warned = _reopen(tmp_path)
    assert len(warned) == 1 and "is not there any more" in warned[0], warned
    assert not journals(reopened).pending()
    assert reopened.backups("s") == []
    write_tree(tmp_path / "theirs", THEIRS)
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "theirs")


def _rewriting_stats(monkeypatch: pytest.MonkeyPatch, change: Callable[[list[int]], None]) -> None:
    """From now on, every ``os.stat``, ``os.lstat`` and ``os.fstat`` result has its fields
    (mode, inode, device, ...) changed in place by ``change``."""

    def rewritten(real: Callable[..., os.stat_result]) -> Callable[..., os.stat_result]:
        def rewritten_stat(*args: Any, **kwargs: Any) -> os.stat_result:
            _, (fields, extra) = real(*args, **kwargs).__reduce__()  # type: ignore[misc]
            fields = list(fields)
            change(fields)
            return os.stat_result(fields, extra)

        return rewritten_stat

    for name in ("stat", "lstat", "fstat"):
        monkeypatch.setattr(os, name, rewritten(getattr(os, name)))


def _reporting_inode(monkeypatch: pytest.MonkeyPatch, directory: os.stat_result, ino: int) -> None:
    """From now on, stats of ``directory`` report the inode number ``ino``."""

    def change(fields: list[int]) -> None:
        if (fields[1], fields[2]) == (directory.st_ino, directory.st_dev):
            fields[1] = ino

    _rewriting_stats(monkeypatch, change)


def _on_another_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, every stat reports a device number one higher, as after a remount
    that gave the filesystem another (anonymous) device number: overlayfs, btrfs
    subvolumes and NFS get theirs at mount time."""

    def change(fields: list[int]) -> None:
        fields[2] += 1

    _rewriting_stats(monkeypatch, change)


def test_recovery_finishes_in_the_made_directory_after_a_remount_changed_its_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_half_way)
    made = os.stat(target)
    _on_another_device(monkeypatch)
    assert file_id(os.stat(target)) != file_id(made)
    reopened, warned = _reopen(tmp_path)
    monkeypatch.undo()
    assert warned == []
    assert not journals(reopened).pending()
    assert os.stat(target).st_ino == made.st_ino
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "project")


def test_recovery_finishes_a_killed_restore_in_the_directory_it_made(tmp_path: Path) -> None:
    """The same kill with the directory left in place: the next open finishes the restore
    there (the made directory is the restore's)."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_half_way)
    made = file_id(os.stat(target))
    reopened, warned = _reopen(tmp_path)
    assert warned == []
    assert file_id(os.stat(target)) == made
    assert read_tree(target) == read_tree(tmp_path / "project")
    assert not journals(reopened).pending()


def test_a_journal_of_a_version_before_the_identity_is_finished_as_before(
    tmp_path: Path,
) -> None:
    """A journal without the target's identity, left before the target was made (what a
    version that wrote the journal first leaves): the next open makes the target, without
    following links, and finishes the restore."""
    store = _store(tmp_path)
    target = tmp_path / "a" / "new"
    fields = _fields(target, None)
    fields["dirs"] = ("", "many", "sub")
    journals(store).write(target_key(os.path.realpath(target)), Journal(**fields))
    reopened, warned = _reopen(tmp_path)
    assert warned == []
    assert read_tree(target) == read_tree(tmp_path / "project")
    assert not journals(reopened).pending()


@pytest.mark.parametrize(
    ("nth", "left"),
    [(1, set()), (2, {"a"}), (3, {"a", "a/b"})],
    ids=["first-parent", "second-parent", "target"],
)
def test_a_failed_mkdir_while_making_the_target_leaves_no_journal_and_nothing_inside(
    tmp_path: Path, nth: int, left: set[str]
) -> None:
    """The target a/b/new and its parents are made one by one; the nth mkdir fails: the
    error is raised, no journal is written, and only the parents made before it are left
    (empty)."""
    _store(tmp_path).restore("s", "n", tmp_path / "first")  # makes journal/ and the locks
    failing = FailingOperation("mkdir", OSError(errno.EACCES, "injected: mkdir"), nth=nth)
    store = SnapStore(tmp_path / "store", fs=failing)
    with pytest.raises(OSError) as raised:
        store.restore("s", "n", tmp_path / "a" / "b" / "new")
    assert raised.value.errno == errno.EACCES
    assert not journals(store).pending()
    made = tmp_path.glob("a/**") if (tmp_path / "a").exists() else []
    assert {str(path.relative_to(tmp_path)) for path in made} == left
    assert all(path.is_dir() for path in (tmp_path / "a").rglob("*"))


@pytest.mark.parametrize("fails", ["before-the-rename", "after-the-rename"])
def test_a_journal_that_cannot_be_written_takes_the_made_target_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    store = _store(tmp_path)
    target = tmp_path / "new"
    real_write = JournalDir.write

    def write(self: JournalDir, key: str, journal: Journal) -> None:
        if fails == "after-the-rename":
            real_write(self, key, journal)
        raise OSError(errno.EIO, "injected: journal")

    monkeypatch.setattr(JournalDir, "write", write)
    with pytest.raises(OSError, match="injected: journal"):
        store.restore("s", "n", target)
    assert not os.path.lexists(target)
    assert not journals(store).pending()
    monkeypatch.undo()
    reopened, warned = _reopen(tmp_path)
    assert warned == []
    reopened.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")


def test_a_made_directory_replaced_by_a_symlink_is_dropped_with_one_warning(
    tmp_path: Path,
) -> None:
    """After the kill, the made directory is moved away and a symlink to it put at the
    target: the real path now leads elsewhere, so the made directory is not at the target
    any more; the journal is dropped with a warning, once (not kept, warning at every open),
    and nothing is written through the link."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_half_way)
    moved = tmp_path / "moved"
    target.rename(moved)
    target.symlink_to(moved)
    partly = read_tree(moved, with_temps=True)
    reopened, warned = _reopen(tmp_path)
    assert len(warned) == 1 and "is not there any more" in warned[0], warned
    assert not journals(reopened).pending()
    assert read_tree(moved, with_temps=True) == partly
    _, warned_again = _reopen(tmp_path)
    assert warned_again == []


def test_the_marker_is_gone_once_the_restore_or_its_recovery_is_done(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.restore("s", "n", tmp_path / "whole")
    assert read_tree(tmp_path / "whole", with_temps=True) == read_tree(tmp_path / "project")
    in_a_killed_child(lambda: store.restore("s", "n", tmp_path / "new"), before=_die_half_way)
    assert any(is_target_marker(name) for name in os.listdir(tmp_path / "new"))
    _, warned = _reopen(tmp_path)
    assert warned == []
    assert read_tree(tmp_path / "new", with_temps=True) == read_tree(tmp_path / "project")


def test_a_killed_recovery_is_finished_by_the_next_open(tmp_path: Path) -> None:
    """The recovery of the killed restore is killed half-way too (after removing the temp
    files, with the plan's removals under way): the marker is still there, so the next open
    finishes the restore."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_half_way)
    in_a_killed_child(lambda: SnapStore(tmp_path / "store"), before=_die_half_way)
    assert journals(store).pending()
    reopened, warned = _reopen(tmp_path)
    assert warned == []
    assert not journals(reopened).pending()
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "project")


def test_a_marker_left_in_a_target_is_neither_recorded_nor_removed_nor_backed_up(
    tmp_path: Path,
) -> None:
    """A marker left by a kill before the journal (or after it went) is never the user's:
    a create does not record it, and a later restore into that directory (which keeps an
    undo backup of what it changes) neither records it in the backup nor removes it."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_at_journal_write)
    [marker] = os.listdir(target)
    assert is_target_marker(marker)
    (target / "mine.txt").write_text("the user's file")
    store.create("t", "with-marker", ["."], base_dir=target)
    assert [entry.path for entry in store.get("t", "with-marker").entries] == ["mine.txt"]
    store.restore("s", "n", target)
    assert os.listdir(target).count(marker) == 1
    [backup] = store.backups("s")
    backed_up = [entry.path for entry in store.get("s", backup.name).entries]
    assert "mine.txt" in backed_up and not any(is_target_marker(p) for p in backed_up)


def _swap_for_a_new_directory(target: Path, made: int) -> None:
    """The user clears the made directory and makes the target again with their files,
    trying for the freed inode number (ext4 hands it out again at once, unless the
    directory is still held open: then it cannot be had)."""
    shutil.rmtree(target)
    target.mkdir()
    for _ in range(300):
        if target.stat().st_ino == made:
            break
        target.rmdir()
        target.mkdir()
    write_tree(target, THEIRS)


@pytest.mark.parametrize("hook", ["remove_temp_files", "plan"])
def test_a_directory_swapped_in_during_the_recovery_is_not_written_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: str
) -> None:
    """After the recovery found the made directory with its marker, the user removes it and
    makes the target again (the freed inode number would make the identity match): the
    recovery holds the made directory open, so the number is not handed out, and the
    user's directory is never written into."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target, backup=False), before=_die_half_way)
    made = os.stat(target).st_ino
    real = getattr(writer.TargetWriter, hook)
    swapped: list[bool] = []

    def swapping(self: writer.TargetWriter, *args: Any, **kwargs: Any) -> Any:
        if not swapped:
            swapped.append(True)
            _swap_for_a_new_directory(target, made)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(writer.TargetWriter, hook, swapping)
    _reopen(tmp_path)
    write_tree(tmp_path / "theirs", THEIRS)
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "theirs")


def test_a_directory_swapped_in_before_the_journal_is_not_written_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same swap while the restore writes its journal (after the marker): the restore
    holds the made directory open, so the new one cannot take its number and is not
    written into."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    real = JournalDir.write

    def write(self: JournalDir, key: str, journal: Journal) -> None:
        if journal.target_inode is not None and not (target / "precious.txt").exists():
            _swap_for_a_new_directory(target, journal.target_inode)
        real(self, key, journal)

    monkeypatch.setattr(JournalDir, "write", write)
    with contextlib.suppress(SnapstoreError):
        store.restore("s", "n", target, backup=False)
    write_tree(tmp_path / "theirs", THEIRS)
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "theirs")


def _fail_then_die_in_the_cleanup() -> None:
    """In the child: the restore writes three quarters of its plan and fails; the removal
    of the directory it made is killed at its first rmdir."""
    real = writer.apply_plan

    def failing(plan: Plan, *args: Any, **kwargs: Any) -> None:
        plan.actions = plan.changes[: len(plan.changes) * 3 // 4]
        real(plan, *args, **kwargs)
        seam.FileSystem.rmdir = lambda self, *a, **k: os._exit(KILLED_EXIT)  # type: ignore[method-assign]
        raise OSError(errno.ENOSPC, "injected: full")

    writer.apply_plan = failing  # type: ignore[assignment]


def test_a_kill_in_the_cleanup_of_a_failed_restore_leaves_it_to_be_finished(
    tmp_path: Path,
) -> None:
    """The removal unlinks the marker last, so a killed removal leaves it, and the next
    open finishes the restore (not: drops it, leaving a half-removed directory)."""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(
        lambda: store.restore("s", "n", target, backup=False), before=_fail_then_die_in_the_cleanup
    )
    _, warned = _reopen(tmp_path)
    assert warned == []
    assert read_tree(target, with_temps=True) == read_tree(tmp_path / "project")
