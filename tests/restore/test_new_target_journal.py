"""A restore into a directory that is not there makes it (empty) before it writes its
journal, and the journal names that directory by its identity: a recovery writes only into
that very directory. Another directory found at the target's path after a kill (the made
one replaced, or removed and made again by someone else) is left as it is, and the killed
restore is dropped with a warning. A kill between the make and the journal leaves only
empty directories, and no journal."""

from __future__ import annotations

import errno
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers.fork import in_a_killed_child
from helpers.seam import KILLED_EXIT, FailingOperation
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.errors import InterruptedRestoreWarning
from snapstore.fs.stamps import file_id
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
        seen.append((journal.target_id, file_id(os.stat(target)), os.listdir(target)))
        real_write(self, key, journal)

    monkeypatch.setattr(JournalDir, "write", write)
    store.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")
    [(recorded, made, listed)] = seen
    assert recorded == made and listed == []
    assert Journal.decode(Journal(**_fields(target, made)).encode()).target_id == made


def _fields(target: Path, identity: object) -> dict[str, Any]:
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
        "token": None,
        "target_id": identity,
    }


@pytest.mark.parametrize("identity", [[1], [1, -2], ["1", 2], [1, 2, 3], 7, [True, 2]])
def test_a_journal_with_a_bad_target_identity_is_damaged(identity: object) -> None:
    from snapstore.format.envelope import seal
    from snapstore.restore.journal import MAGIC, CorruptJournalError

    fields = _fields(Path("/t"), None)
    fields["target_id"] = identity
    fields["paths"], fields["dirs"] = None, list(fields["dirs"])
    with pytest.raises(CorruptJournalError):
        Journal.decode(seal(MAGIC, fields))


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
    assert len(read_tree(top)) == depth and not os.listdir(target)
    reopened, warned = _reopen(tmp_path)
    assert warned == []
    reopened.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")


@pytest.mark.parametrize("after_the_kill", ["replaced", "removed", "made-again-by-another"])
def test_recovery_writes_nothing_into_a_directory_that_is_not_the_one_the_restore_made(
    tmp_path: Path, after_the_kill: str
) -> None:
    """The restore is killed half-way; before the next open, the directory it made is
    moved away and another's put in its place, or it is removed, or removed and another
    process makes the target with its own files. The recovery writes and removes nothing
    there, keeps no undo backup of it, and drops the killed restore with a warning.

    (The removed directory is removed only once the other one is made, so that the other
    cannot get its inode number: an identity is a device and inode number, and a number
    freed can be given to the next directory made; see docs/restore.md.)"""
    store = _store(tmp_path)
    target = tmp_path / "new"
    in_a_killed_child(lambda: store.restore("s", "n", target), before=_die_half_way)
    assert journals(store).pending()
    partly = read_tree(target)
    made = file_id(os.stat(target))
    target.rename(tmp_path / "made-by-the-restore")
    if after_the_kill != "removed":
        write_tree(target, THEIRS)
        assert file_id(os.stat(target)) != made
    if after_the_kill != "replaced":
        shutil.rmtree(tmp_path / "made-by-the-restore")
    reopened, warned = _reopen(tmp_path)
    assert len(warned) == 1 and "gone or was replaced" in warned[0], warned
    assert not journals(reopened).pending()
    assert reopened.backups("s") == []
    if after_the_kill == "removed":
        assert not os.path.lexists(target)
    else:
        write_tree(tmp_path / "theirs", THEIRS)
        assert read_tree(target) == read_tree(tmp_path / "theirs")
    if after_the_kill == "replaced":
        assert read_tree(tmp_path / "made-by-the-restore", with_temps=True).keys() >= partly.keys()


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
