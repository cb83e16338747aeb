"""Restores, undos and their recovery against a hostile work tree: a journalled directory
that is no directory (yet, or any more), user files named like restore temp files, names and
link targets no snapshot can record, and an undo in a process that outlived a killed
restore. Nothing the user had may be lost, and no recovery may stay stuck."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.fork import in_a_killed_child
from helpers.seam import KILLED_EXIT, FastFileSystem
from helpers.trees import read_tree, temp_leftovers, write_tree

from snapstore import SnapStore
from snapstore.errors import RestoreError, UnreadablePathError, UnsafePathError
from snapstore.internals import journals
from snapstore.restore.targetlocks import target_key


class AtName(FastFileSystem):
    """The real seam, but the ``nth`` ``unlink``, ``rmdir`` or rename into place of ``name``
    (the last component) kills the process, or raises EIO with ``fail``."""

    def __init__(self, name: str, *, fail: bool = False, nth: int = 1) -> None:
        self.name = name
        self.fail = fail
        self.left = nth

    def _hit(self, path: str) -> None:
        if os.path.basename(path) == self.name:
            self.left -= 1
            if self.left:
                return
            if self.fail:
                raise OSError(errno.EIO, f"injected EIO removing {path}")
            os._exit(KILLED_EXIT)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        self._hit(path)
        super().unlink(path, dir_fd=dir_fd)

    def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
        self._hit(path)
        super().rmdir(path, dir_fd=dir_fd)

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        self._hit(dst)
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


def tree_of(base: Path) -> dict[str, object]:
    """Every path under ``base``, temp files included."""
    return dict(read_tree(base, with_temps=True))


def open_quietly(root: Path) -> SnapStore:
    """Open the store; any warning (a recovery that failed) fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return SnapStore(root)


def make_not_a_directory(path: Path, kind: str, outside: Path) -> None:
    """Put a ``kind`` (file, symlink to a directory, FIFO) at ``path``."""
    if kind == "file":
        path.write_text("my notes, a file")
    elif kind == "symlink":
        outside.mkdir(exist_ok=True)
        (outside / "keep.txt").write_text("outside")
        path.symlink_to(outside)
    else:
        os.mkfifo(path)


NOT_DIRECTORIES = ["file", "symlink", "fifo"]


@pytest.fixture
def dir_over_non_dir(tmp_path: Path) -> Callable[[str], tuple[Path, Path]]:
    """A checkpoint ``cp`` in which ``notes`` is a directory (files one and two levels down),
    then ``notes`` made a file, symlink or FIFO and ``z.txt`` edited: (base, store root)."""

    def make(kind: str) -> tuple[Path, Path]:
        base, root = tmp_path / "p", tmp_path / "store"
        write_tree(base, {"notes/a.txt": "a\n", "notes/b/c.txt": "c\n", "z.txt": "z\n"})
        SnapStore(root).create("s", "cp", ["."], base_dir=base)
        shutil.rmtree(base / "notes")
        make_not_a_directory(base / "notes", kind, tmp_path / "outside")
        (base / "z.txt").write_text("my edit\n")
        return base, root

    return make


@pytest.mark.parametrize("kind", NOT_DIRECTORIES)
def test_a_restore_killed_before_it_made_a_file_a_directory_is_rolled_back(
    dir_over_non_dir: Callable[[str], tuple[Path, Path]], tmp_path: Path, kind: str
) -> None:
    base, root = dir_over_non_dir(kind)
    before = tree_of(base)
    in_a_killed_child(lambda: SnapStore(root, fs=AtName("notes")).restore("s", "cp"))
    assert os.listdir(root / "journal")
    reopened = open_quietly(root)
    assert tree_of(base) == before
    assert not journals(reopened).pending() and reopened.backups("s") == []
    if kind == "symlink":
        assert (tmp_path / "outside" / "keep.txt").read_text() == "outside"
    reopened.restore("s", "cp")
    assert (base / "notes/b/c.txt").read_text() == "c\n"
    reopened.undo("s")
    if kind != "fifo":  # an undo backup records no special file (restore.md)
        assert tree_of(base) == before


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_restore_that_fails_before_it_made_a_file_a_directory_says_it_rolled_back(
    dir_over_non_dir: Callable[[str], tuple[Path, Path]], kind: str
) -> None:
    base, root = dir_over_non_dir(kind)
    before = tree_of(base)
    store = SnapStore(root, fs=AtName("notes", fail=True))
    with pytest.raises(RestoreError, match="put back as it was") as failed:
        store.restore("s", "cp")
    assert failed.value.rolled_back
    assert tree_of(base) == before
    assert not journals(store).pending() and store.backups("s") == []
    open_quietly(root)


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_an_undo_killed_before_it_made_a_file_a_directory_again_is_rolled_back(
    tmp_path: Path, kind: str
) -> None:
    """A restore replaced the directory ``notes`` by a file (or link); its undo, killed
    before removing that file, meets the same journalled directory that is not one."""
    base, root = tmp_path / "p", tmp_path / "store"
    if kind == "file":
        write_tree(base, {"notes": "a file in the checkpoint\n"})
    else:
        base.mkdir()
        (base / "notes").symlink_to("elsewhere")
    store = SnapStore(root)
    store.create("s", "cp", ["."], base_dir=base)
    os.unlink(base / "notes")
    write_tree(base, {"notes/a.txt": "mine\n", "notes/deep/b.txt": "mine too\n"})
    edited = tree_of(base)
    store.restore("s", "cp")
    restored = tree_of(base)
    in_a_killed_child(lambda: SnapStore(root, fs=AtName("notes")).undo("s"))
    reopened = open_quietly(root)
    assert tree_of(base) == restored
    assert len(reopened.backups("s")) == 1
    reopened.undo("s")
    assert tree_of(base) == edited


@pytest.mark.parametrize("kind", ["file", "symlink", "fifo"])
def test_a_journalled_directory_replaced_after_the_kill_is_kept_then_rolled_back(
    tmp_path: Path, kind: str
) -> None:
    """After the kill, someone puts a file (link, FIFO) where the killed restore was writing
    into a directory: the recovery keeps it in a new backup, then puts the directory back;
    it does not stay stuck."""
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"notes/a.txt": "a\n", "notes/b/c.txt": "c\n", "z.txt": "z\n"})
    SnapStore(root).create("s", "cp", ["."], base_dir=base)
    write_tree(base, {"notes/a.txt": "edit\n", "notes/b/c.txt": "edit\n", "notes/x.txt": "x"})
    before = tree_of(base)
    in_a_killed_child(lambda: SnapStore(root, fs=AtName("x.txt")).restore("s", "cp"))
    shutil.rmtree(base / "notes")
    make_not_a_directory(base / "notes", kind, tmp_path / "outside")
    reopened = open_quietly(root)
    assert tree_of(base) == before
    assert not journals(reopened).pending()
    if kind == "file":
        (kept,) = reopened.backups("s")
        assert reopened.read("s", kept.name, "notes") == b"my notes, a file"
    if kind == "symlink":
        assert (tmp_path / "outside" / "keep.txt").read_text() == "outside"


@pytest.mark.parametrize(
    ("added", "rolled_back_last"),
    [({"keep/old.txt": "mine\n"}, "old.txt"), ({"extra/deep/f.txt": "mine\n"}, "f.txt")],
    ids=["file-removed-from-a-directory-kept", "directory-removed"],
)
def test_a_rollback_killed_where_the_restore_only_removed_leaves_no_temp_file(
    tmp_path: Path, added: dict[str, str], rolled_back_last: str
) -> None:
    """The rollback of a killed restore writes into directories the restore only removed
    from (not those it wrote into, which its journal lists); killed there in turn, it must
    still leave no temp file once recovered, and no needless backup."""
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"keep/a.txt": "a\n", "z.txt": "z\n"})
    SnapStore(root).create("s", "cp", ["."], base_dir=base)
    write_tree(base, {"z.txt": "edit\n", **added})
    before = tree_of(base)
    key = target_key(os.path.realpath(base))
    in_a_killed_child(lambda: SnapStore(root, fs=AtName(key, nth=2)).restore("s", "cp"))
    assert (base / "z.txt").read_text() == "z\n"  # applied; killed before the journal went
    in_a_killed_child(lambda: SnapStore(root, fs=AtName(rolled_back_last)))
    assert temp_leftovers(base)
    reopened = open_quietly(root)
    assert tree_of(base) == before
    assert not temp_leftovers(base)
    assert not journals(reopened).pending() and reopened.backups("s") == []


USER_TEMP_LOOKALIKES = {
    ".snapstore-tmp-notes": "top\n",
    ".snapstore-tmp-0123456789abcdef": "the shape older versions gave temp files\n",
    "d/.snapstore-tmp-x": "one down\n",
    "d/e/.snapstore-tmp-0123456789abcdef-fedcba9876543210": "the shape of a restore's\n",
    "gone/sub/.snapstore-tmp-y": "in a directory the restore removes\n",
    ".snapstore-tmp-dir/inside.txt": "in a directory named like one\n",
}


def test_files_named_like_temp_files_are_backed_up_before_a_restore_removes_them(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"d/e/keep.txt": "k\n", "z.txt": "z\n"})
    store = SnapStore(root)
    store.create("s", "cp", ["."], base_dir=base)
    write_tree(base, USER_TEMP_LOOKALIKES)
    edited = tree_of(base)
    report = store.restore("s", "cp")
    assert report.backup is not None
    assert not any(".snapstore-tmp-" in path for path in tree_of(base))
    kept = {e.path for e in store.get("s", report.backup).entries}
    assert set(USER_TEMP_LOOKALIKES) <= kept
    store.undo("s")
    assert tree_of(base) == edited


def test_a_checkpoint_records_files_named_like_temp_files_but_not_a_restores_own_shape(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, USER_TEMP_LOOKALIKES)
    store = SnapStore(root)
    info = store.create("s", "cp", ["."], base_dir=base)
    recorded = {e.path for e in store.get("s", info.name).entries if e.kind == "file"}
    assert recorded == set(USER_TEMP_LOOKALIKES) - {
        "d/e/.snapstore-tmp-0123456789abcdef-fedcba9876543210"
    }


def test_recovery_removes_only_the_temp_files_of_the_killed_restore(tmp_path: Path) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "a\n", "b.txt": "b\n", ".snapstore-tmp-mine": "recorded\n"})
    SnapStore(root).create("s", "cp", ["."], base_dir=base)
    write_tree(base, {"a.txt": "edit a\n", "b.txt": "edit b\n"})
    mine = tmp_path / "p" / ".snapstore-tmp-0123456789abcdef-fedcba9876543210"
    mine.write_text("a restore's shape, but another restore's token\n")
    edited = tree_of(base)
    in_a_killed_child(lambda: SnapStore(root, fs=AtName("b.txt")).restore("s", "cp"))
    assert len(temp_leftovers(base)) >= 2  # the killed restore's own is there too
    open_quietly(root)
    assert tree_of(base) == edited


def raw(base: Path, relative: bytes) -> bytes:
    return os.fsencode(base) + b"/" + relative


def put_unrecordable(base: Path, where: str) -> list[str]:
    """Names and link targets no snapshot can record, at and below ``where``: what a restore
    must report as kept (printable)."""
    (base / where / "sub" / "deeper").mkdir(parents=True, exist_ok=True)
    (base / where / "sub" / "back\\slash").write_text("mine")
    with open(raw(base, where.encode() + b"/sub/deeper/caf\xe9.txt"), "wb") as file:
        file.write(b"latin-1 name")
    os.mkdir(raw(base, where.encode() + b"/d\xff"))
    with open(raw(base, where.encode() + b"/d\xff/in.txt"), "wb") as file:
        file.write(b"below an odd directory")
    os.symlink(b"t\xffrget", raw(base, where.encode() + b"/sub/odd-link"))
    return [
        f"{where}/d\\xff",
        f"{where}/sub/back\\slash",
        f"{where}/sub/deeper/caf\\xe9.txt",
        f"{where}/sub/odd-link",
    ]


def raw_tree(base: Path) -> dict[bytes, object]:
    found: dict[bytes, object] = {}
    for directory, dirs, files in os.walk(os.fsencode(base)):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[path] = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                found[path] = Path(os.fsdecode(path)).read_bytes()
            else:
                found[path] = "dir"
    return found


def test_a_directory_a_restore_removes_keeps_what_no_snapshot_can_record_at_any_depth(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "a\n"})
    store = SnapStore(root)
    store.create("s", "cp", ["."], base_dir=base)
    write_tree(base, {"a.txt": "edit\n", "extra/ok.txt": "mine\n", "extra/sub/ok.txt": "x\n"})
    kept = put_unrecordable(base, "extra")
    edited = raw_tree(base)
    planned = store.restore("s", "cp", dry_run=True)
    report = store.restore("s", "cp")
    assert planned.kept == report.kept == kept
    assert report.backup is not None and "extra/ok.txt" in report.removed
    assert (base / "a.txt").read_text() == "a\n" and not (base / "extra/ok.txt").exists()
    store.undo("s")
    assert raw_tree(base) == edited


def test_a_directory_a_restore_replaces_that_holds_what_no_snapshot_can_record_is_refused(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    base.mkdir()
    (base / "notes").symlink_to("elsewhere")
    store = SnapStore(root)
    store.create("s", "cp", ["."], base_dir=base)
    (base / "notes").unlink()
    put_unrecordable(base, "notes")
    before = raw_tree(base)
    for backup in (True, False):
        with pytest.raises(UnsafePathError, match=r"notes/.*nothing was written"):
            store.restore("s", "cp", backup=backup)
    assert raw_tree(base) == before
    assert not journals(store).pending()


def test_a_symlink_whose_target_is_not_utf8_is_unreadable_not_a_changed_source(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "a\n"})
    os.symlink(b"t\xffrget", raw(base, b"odd"))
    store = SnapStore(root)
    with pytest.raises(UnreadablePathError, match=r"'odd'.*link target is not UTF-8"):
        store.create("s", "cp", ["."], base_dir=base)
    info = store.create("s", "cp", ["."], base_dir=base, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["odd"]
    (base / "a.txt").write_text("edit\n")
    report = store.restore("s", "cp")
    assert report.kept == ["odd"] and os.readlink(raw(base, b"odd")) == b"t\xffrget"


def test_a_restore_leaves_a_link_it_could_not_back_up_and_says_so(tmp_path: Path) -> None:
    """An extra link (at the top, or in a directory the restore removes) and a link at a
    path the checkpoint records, each with a target that is not UTF-8: kept and reported;
    the rest of the restore goes on, with a backup, and undoes."""
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "a\n"})
    (base / "ln").symlink_to("a.txt")
    store = SnapStore(root)
    store.create("s", "cp", ["."], base_dir=base)
    (base / "a.txt").write_text("edit\n")
    (base / "ln").unlink()
    write_tree(base, {"gone/f.txt": "mine\n"})
    for where in (b"ln", b"extra-link", b"gone/odd-link"):
        os.symlink(b"t\xffrget", raw(base, where))
    edited = raw_tree(base)
    report = store.restore("s", "cp")
    assert report.kept == ["extra-link", "gone/odd-link", "ln"]
    assert (base / "a.txt").read_text() == "a\n" and not (base / "gone/f.txt").exists()
    store.undo("s")
    assert raw_tree(base) == edited


def test_undo_in_a_process_that_outlived_a_killed_restore_recovers_first(tmp_path: Path) -> None:
    """A long-running process (serve, mcp) opened the store before another process's restore
    of the same directory was killed: its undo recovers that restore, then undoes the newest
    restore that really happened."""
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "one\n", "b.txt": "b\n"})
    server = SnapStore(root)
    server.create("s", "one", ["."], base_dir=base)
    write_tree(base, {"a.txt": "two\n"})
    server.create("s", "two", ["."], base_dir=base)
    write_tree(base, {"a.txt": "my edit\n"})
    edited = tree_of(base)
    server.restore("s", "two")
    restored_two = tree_of(base)
    in_a_killed_child(lambda: SnapStore(root, fs=AtName("a.txt")).restore("s", "one"))
    assert len(server.backups("s")) == 2  # the killed restore's is still listed
    server.undo("s")
    assert tree_of(base) == edited
    assert not journals(server).pending()
    server.undo("s")
    assert tree_of(base) == restored_two


def test_undo_through_serve_after_another_process_s_restore_was_killed(tmp_path: Path) -> None:
    """The same through ``snapstore serve``, a process that opened the store first."""
    from helpers.service import Server

    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "one\n", "b.txt": "b\n"})
    SnapStore(root).create("s", "one", ["."], base_dir=base)
    write_tree(base, {"a.txt": "two\n"})
    with Server(root) as server:
        server.call(
            "create", {"session": "s", "name": "two", "paths": ["."], "base_dir": str(base)}
        )
        write_tree(base, {"a.txt": "my edit\n"})
        edited = tree_of(base)
        server.call("restore", {"session": "s", "name": "two"})
        in_a_killed_child(lambda: SnapStore(root, fs=AtName("a.txt")).restore("s", "one"))
        undone = server.call("undo", {"session": "s"})
        assert undone["written"] == ["a.txt"]
        assert tree_of(base) == edited


@pytest.mark.parametrize("where", ["target", "parent"])
def test_a_target_that_leads_elsewhere_after_the_kill_is_never_written_through(
    tmp_path: Path, where: str
) -> None:
    """After the kill, the target (or a directory above it) is moved away and a symlink to
    another directory put in its place: recovery writes nothing through it and keeps the
    journal and the undo backup; once the path leads to the directory again, the killed
    restore is rolled back as usual."""
    parent = tmp_path / "work"
    base, root = parent / "p", tmp_path / "store"
    write_tree(base, {"notes/a.txt": "a\n", "z.txt": "z\n"})
    SnapStore(root).create("s", "cp", ["."], base_dir=base)
    write_tree(base, {"notes/a.txt": "edit\n", "notes/x.txt": "x"})
    before = tree_of(base)
    in_a_killed_child(lambda: SnapStore(root, fs=AtName("x.txt")).restore("s", "cp"))
    moved = parent if where == "parent" else base
    aside = moved.with_name(moved.name + "-aside")
    moved.rename(aside)
    elsewhere = tmp_path / "elsewhere"
    write_tree(elsewhere / "p" if where == "parent" else elsewhere, {"mine.txt": "mine\n"})
    outside_before = tree_of(elsewhere)
    moved.symlink_to(elsewhere)
    with pytest.warns(UserWarning, match="now leads to"):
        reopened = SnapStore(root)
    assert tree_of(elsewhere) == outside_before
    assert journals(reopened).pending()
    moved.unlink()
    aside.rename(moved)
    reopened = open_quietly(root)
    assert tree_of(base) == before
    assert not journals(reopened).pending()
