"""Hard links inside one snapshot: recorded as link groups, content stored once, restored
as links (only ever of files the restore itself wrote), and put back by undo."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.fork import in_a_killed_child
from helpers.hostile import hostile_info, plant_snapshot
from helpers.seam import KILLED_EXIT, FailingOperation, HookedFileSystem
from helpers.trees import read_files, write_tree

from snapstore import CorruptManifestError, RestoreError, SnapStore
from snapstore.format.tree import encode_tree, tree_ref
from snapstore.fs.seam import FileSystem
from snapstore.models import FileEntry


def inode(path: Path) -> int:
    return os.lstat(path).st_ino


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """a/x, b/y and c/d/z one file; other.txt a copy of it with its own inode."""
    base = tmp_path / "project"
    write_tree(base, {"a/x": "shared\n", "b/keep.txt": "b\n", "c/d/keep.txt": "d\n"})
    os.link(base / "a/x", base / "b/y")
    os.link(base / "a/x", base / "c/d/z")
    (base / "other.txt").write_text("shared\n")
    return base


def test_links_across_directories_are_recorded_and_restored(
    store: SnapStore, linked: Path, tmp_path: Path
) -> None:
    store.create("s", "one", ["."], base_dir=linked)
    entries = {entry.path: entry for entry in store.get("s", "one").entries}
    assert entries["a/x"].link is None
    assert entries["b/y"].link == "a/x" and entries["c/d/z"].link == "a/x"
    assert entries["other.txt"].link is None
    assert entries["b/y"].digest == entries["a/x"].digest
    target = tmp_path / "out"
    store.restore("s", "one", target)
    assert inode(target / "a/x") == inode(target / "b/y") == inode(target / "c/d/z")
    assert inode(target / "other.txt") != inode(target / "a/x")
    assert os.lstat(target / "a/x").st_nlink == 3
    assert read_files(target) == read_files(linked)
    assert store.restore("s", "one", target).written == []
    assert not store.diff("s", "one", target=target).changed


def test_a_group_partly_excluded_keeps_the_rest_linked(
    store: SnapStore, linked: Path, tmp_path: Path
) -> None:
    store.create("s", "one", ["."], base_dir=linked, exclude=["a/"])
    entries = {entry.path: entry for entry in store.get("s", "one").entries}
    assert "a/x" not in entries
    assert entries["b/y"].link is None and entries["c/d/z"].link == "b/y"
    store.restore("s", "one", tmp_path / "out")
    assert inode(tmp_path / "out/b/y") == inode(tmp_path / "out/c/d/z")


def test_a_restore_of_some_paths_links_what_it_restores(
    store: SnapStore, linked: Path, tmp_path: Path
) -> None:
    store.create("s", "one", ["."], base_dir=linked)
    target = tmp_path / "out"
    store.restore("s", "one", target, paths=["b", "c"])
    assert not (target / "a").exists()
    assert inode(target / "b/y") == inode(target / "c/d/z")


def test_one_member_changed_in_the_target_gets_the_group_written_whole(
    store: SnapStore, linked: Path
) -> None:
    store.create("s", "one", ["."], base_dir=linked)
    (linked / "b/y").unlink()
    (linked / "b/y").write_text("edited on its own\n")
    report = store.restore("s", "one")
    assert sorted(report.written) == ["a/x", "b/y", "c/d/z"]
    assert inode(linked / "a/x") == inode(linked / "b/y") == inode(linked / "c/d/z")
    assert (linked / "b/y").read_text() == "shared\n"
    store.undo("s")
    assert (linked / "b/y").read_text() == "edited on its own\n"
    assert inode(linked / "a/x") == inode(linked / "c/d/z") != inode(linked / "b/y")


def test_copies_with_the_same_bytes_are_linked_and_a_file_recorded_alone_is_split(
    store: SnapStore, linked: Path
) -> None:
    store.create("s", "one", ["."], base_dir=linked)
    for path in ("b/y", "c/d/z"):
        (linked / path).unlink()
        (linked / path).write_text("shared\n")
    (linked / "other.txt").unlink()
    os.link(linked / "a/x", linked / "other.txt")  # recorded as a file of its own
    assert sorted(store.diff("s", "one").modified) == ["a/x", "b/y", "c/d/z", "other.txt"]
    store.restore("s", "one")
    assert inode(linked / "a/x") == inode(linked / "b/y") == inode(linked / "c/d/z")
    assert inode(linked / "other.txt") != inode(linked / "a/x")
    (linked / "other.txt").write_text("mine alone\n")
    assert (linked / "a/x").read_text() == "shared\n"


def test_a_restore_never_links_a_file_it_did_not_write(
    root: Path, linked: Path, tmp_path: Path
) -> None:
    SnapStore(root).create("s", "one", ["."], base_dir=linked)
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")

    class Swapping(FileSystem):
        """Swaps the group's first file for a link of a file outside just before linking."""

        def link(self, src: str, dst: str, **kwargs: Any) -> None:
            source_dir = kwargs["src_dir_fd"]
            os.unlink(src, dir_fd=source_dir)
            os.link(outside, src, dst_dir_fd=source_dir)
            super().link(src, dst, **kwargs)

    target = tmp_path / "out"
    with pytest.raises(RestoreError):
        SnapStore(root, fs=Swapping()).restore("s", "one", target)
    assert not target.exists()
    assert os.lstat(outside).st_nlink == 1 and outside.read_text() == "not yours\n"


def test_an_error_while_linking_rolls_the_restore_back(root: Path, linked: Path) -> None:
    SnapStore(root).create("s", "one", ["."], base_dir=linked)
    (linked / "b/y").unlink()
    (linked / "b/y").write_text("mine\n")
    before = read_files(linked)
    failing = SnapStore(root, fs=FailingOperation("link", OSError(31, "Too many links")))
    with pytest.raises(RestoreError) as raised:
        failing.restore("s", "one")
    assert raised.value.rolled_back
    assert read_files(linked) == before
    assert inode(linked / "b/y") != inode(linked / "a/x")


class KillAtOperation(HookedFileSystem):
    """Ends the process just before the ``nth`` call of ``operation`` (or ``after`` calls
    past it)."""

    def __init__(self, operation: str, nth: int, after: int = 0) -> None:
        super().__init__()
        self.operation, self.nth, self.after = operation, nth, after
        self.seen = 0
        self.fired_at: int | None = None

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        super().before(operation, fd, data)
        if operation == self.operation:
            self.seen += 1
            if self.seen == self.nth:
                self.fired_at = self.calls
        if self.fired_at is not None and self.calls == self.fired_at + self.after:
            os._exit(KILLED_EXIT)


def _killed(root: Path, target: Path | None, fs: KillAtOperation) -> None:
    in_a_killed_child(lambda: SnapStore(root, fs=fs).restore("s", "one", target))


@pytest.mark.parametrize(("nth", "after"), [(1, 0), (2, 0), (2, 1), (2, 3)])
def test_a_restore_killed_while_linking_is_rolled_back(
    root: Path, linked: Path, nth: int, after: int
) -> None:
    SnapStore(root).create("s", "one", ["."], base_dir=linked)
    for path in ("b/y", "c/d/z"):
        (linked / path).unlink()
        (linked / path).write_text(f"edited {path}\n")
    before = read_files(linked)
    _killed(root, None, KillAtOperation("link", nth, after))
    store = SnapStore(root)  # recovery at open
    assert read_files(linked) == before
    assert inode(linked / "b/y") != inode(linked / "c/d/z")
    assert store.backups("s") == []
    store.restore("s", "one")
    assert inode(linked / "a/x") == inode(linked / "b/y") == inode(linked / "c/d/z")


def test_a_new_directory_killed_while_linking_is_finished(
    root: Path, linked: Path, tmp_path: Path
) -> None:
    SnapStore(root).create("s", "one", ["."], base_dir=linked)
    target = tmp_path / "out"
    _killed(root, target, KillAtOperation("link", 2))
    SnapStore(root)
    assert read_files(target) == read_files(linked)
    assert inode(target / "a/x") == inode(target / "b/y") == inode(target / "c/d/z")


def _install(store: SnapStore, rows: list[Any], content: bytes) -> None:
    """Commit a snapshot of one directory of file rows naming ``content`` (nothing checked)."""
    files = [row for row in rows if row[1] == "file"]
    info = hostile_info(len(files), sum(row[3] for row in files))
    plant_snapshot(store, encode_tree(rows), blobs=[content], info=info)


DATA = b"data\n"
OTHER = b"else\n"
D = tree_ref(DATA).digest
HOSTILE = {
    "link to a path not recorded": [("b", "file", 0o644, 5, 0, D, None, {"link": "a"})],
    "link to a later path": [
        ("a", "file", 0o644, 5, 0, D, None, {"link": "b"}),
        ("b", "file", 0o644, 5, 0, D, None),
    ],
    "link to itself": [("a", "file", 0o644, 5, 0, D, None, {"link": "a"})],
    "link to a file of other content": [
        ("a", "file", 0o644, 5, 0, tree_ref(OTHER).digest, None),
        ("b", "file", 0o644, 5, 0, D, None, {"link": "a"}),
    ],
    "link to a link": [
        ("a", "file", 0o644, 5, 0, D, None),
        ("b", "file", 0o644, 5, 0, D, None, {"link": "a"}),
        ("c", "file", 0o644, 5, 0, D, None, {"link": "b"}),
    ],
    "link of another mode": [
        ("a", "file", 0o644, 5, 0, D, None),
        ("b", "file", 0o600, 5, 0, D, None, {"link": "a"}),
    ],
    "link to a directory": [
        ("a", "dir", 0o755, 0, 0, None, None),
        ("b", "file", 0o644, 5, 0, D, None, {"link": "a"}),
    ],
    "link on a symlink": [("a", "symlink", 0o777, 0, 0, None, "x", {"link": "b"})],
    "unsafe link path": [("a", "file", 0o644, 5, 0, D, None, {"link": "../a"})],
    "unknown attribute": [("a", "file", 0o644, 5, 0, D, None, {"sparse": True})],
    "extents not true": [("a", "file", 0o644, 5, 0, D, None, {"extents": 1})],
}


@pytest.mark.parametrize("rows", HOSTILE.values(), ids=HOSTILE.keys())
def test_links_that_do_not_fit_make_a_corrupt_snapshot(
    store: SnapStore, tmp_path: Path, rows: list[Any]
) -> None:
    _install(store, rows, DATA)
    with pytest.raises(CorruptManifestError):
        store.get("s", "bad")
    target = tmp_path / "target"
    write_tree(target, {"keep.txt": "mine"})
    with pytest.raises(CorruptManifestError):
        store.restore("s", "bad", target)
    assert read_files(target) == {"keep.txt": b"mine"}
    assert not store.verify().ok


def test_a_linked_file_is_read_once_and_a_sparse_group_stays_sparse(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import snapstore.worktree.ingest as ingest

    base = tmp_path / "project"
    base.mkdir()
    with open(base / "disk.img", "wb") as handle:
        handle.truncate(64 << 20)
        handle.seek(8 << 20)
        handle.write(b"data" * 1000)
    os.link(base / "disk.img", base / "copy.img")
    reads: list[str] = []
    real = ingest.ingest_opened
    monkeypatch.setattr(
        ingest,
        "ingest_opened",
        lambda b, fd, p, *a, **k: reads.append(p) or real(b, fd, p, *a, **k),
    )
    store.create("s", "one", ["."], base_dir=base)
    assert len(reads) == 1
    entries = {entry.path: entry for entry in store.get("s", "one").entries}
    assert entries["disk.img"].link == "copy.img" and entries["disk.img"].extents
    target = tmp_path / "out"
    store.restore("s", "one", target)
    assert inode(target / "disk.img") == inode(target / "copy.img")
    assert (target / "disk.img").read_bytes() == (base / "disk.img").read_bytes()
    if os.lstat(base / "disk.img").st_blocks * 512 < (1 << 20):
        assert os.lstat(target / "disk.img").st_blocks * 512 < (1 << 20)


def test_a_file_replaced_between_the_scan_and_its_read_is_not_recorded_as_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor saves a.txt atomically, with the same bytes, after the scan saw it linked
    to b.txt: they are two files now, and a restore must not make them one again."""
    from snapstore.worktree import ingest

    base = tmp_path / "p"
    write_tree(base, {"a.txt": "same\n"})
    os.link(base / "a.txt", base / "b.txt")
    real = ingest.open_source
    saved: list[str] = []

    def saving_first(path: str, dir_fd: int | None = None) -> int:
        if path.endswith("a.txt") and not saved:
            saved.append(path)
            (base / "a.tmp").write_text("same\n")
            os.replace(base / "a.tmp", base / "a.txt")
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", saving_first)
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "one", ["."], base_dir=base)
    assert saved
    entries = {entry.path: entry for entry in store.get("s", "one").entries}
    assert entries["a.txt"].link is None and entries["b.txt"].link is None
    store.restore("s", "one", tmp_path / "out")
    assert inode(tmp_path / "out" / "a.txt") != inode(tmp_path / "out" / "b.txt")


def _peer_setup(tmp_path: Path) -> tuple[Path, Path]:
    """A snapshot recording d/a and d/b as two files; in the target now, d/a is a hard link
    of d/b (and d's mode differs, so the restore's last step is a chmod of d)."""
    base, root = tmp_path / "project", tmp_path / "store"
    write_tree(base, {"d/a": "new\n", "d/b": "old\n"})
    SnapStore(root).create("s", "one", ["."], base_dir=base)
    (base / "d/a").unlink()
    os.link(base / "d/b", base / "d/a")
    os.chmod(base / "d", 0o700)
    return base, root


def test_a_rollback_links_again_what_the_restore_unlinked(tmp_path: Path) -> None:
    """The restore replaces d/a (publishing it breaks its link to d/b), then fails on its
    last step: putting the target back makes d/a and d/b one file again."""
    probe = FailingOperation("fchmod", OSError(5, "EIO"), nth=0)
    _, probe_root = _peer_setup(tmp_path / "probe")
    SnapStore(probe_root, fs=probe).restore("s", "one")
    base, root = _peer_setup(tmp_path / "failing")
    failing = SnapStore(root, fs=FailingOperation("fchmod", OSError(5, "EIO"), nth=probe.matched))
    with pytest.raises(RestoreError) as raised:
        failing.restore("s", "one")
    assert raised.value.rolled_back
    assert read_files(base / "d") == {"a": b"old\n", "b": b"old\n"}
    assert inode(base / "d/a") == inode(base / "d/b")


def test_undo_links_again_what_the_restore_unlinked(tmp_path: Path) -> None:
    base, root = _peer_setup(tmp_path)
    store = SnapStore(root)
    store.restore("s", "one")
    assert read_files(base / "d") == {"a": b"new\n", "b": b"old\n"}
    assert inode(base / "d/a") != inode(base / "d/b")
    store.undo("s")
    assert read_files(base / "d") == {"a": b"old\n", "b": b"old\n"}
    assert inode(base / "d/a") == inode(base / "d/b")


def test_a_link_group_is_read_ahead_once(tmp_path: Path) -> None:
    """Read-ahead (object storage) asks for the blobs a restore reads, in its order: of a
    link group only the first member's, so the queue never waits for a blob nobody asks for."""
    from snapstore.restore.actions import Action
    from snapstore.restore.apply import files_in_order

    digest = b"d" * 32
    first = FileEntry("a/x", "file", 0o644, 5, 0, digest)
    second = FileEntry("b/y", "file", 0o644, 5, 0, digest, link="a/x")
    alone = FileEntry("c/z", "file", 0o644, 5, 0, digest)
    changes = [Action(entry, "create", None) for entry in (first, second, alone)]
    assert files_in_order(changes, {"a/x"}) == [(digest, 5), (digest, 5)]
    assert files_in_order(changes, set()) == [(digest, 5)] * 3


def test_a_mode_change_never_reaches_a_link_outside_the_target(tmp_path: Path) -> None:
    """A target file with the snapshot's bytes but another mode, hard-linked from outside
    the target (a ``cp -al`` copy, a package store): the restore writes it again rather than
    changing the mode of the shared inode, so the outside file keeps its mode."""
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a.txt": "same\n"})
    (base / "a.txt").chmod(0o644)
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    outside = tmp_path / "secret.txt"
    outside.write_text("same\n")
    outside.chmod(0o600)
    (base / "a.txt").unlink()
    os.link(outside, base / "a.txt")
    report = store.restore("s", "one")
    assert report.written == ["a.txt"]
    assert (base / "a.txt").stat().st_mode & 0o777 == 0o644
    assert outside.stat().st_mode & 0o777 == 0o600
    assert inode(base / "a.txt") != inode(outside)
    store.undo("s")  # the link outside is not the snapshot's to put back; the mode is
    assert (base / "a.txt").stat().st_mode & 0o777 == 0o600


def test_a_recorded_link_group_whole_in_the_target_changes_mode_in_place(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"a": "same\n"})
    os.link(base / "a", base / "b")
    (base / "a").chmod(0o640)
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    (base / "a").chmod(0o600)
    before = inode(base / "a")
    store.restore("s", "one")
    assert inode(base / "a") == inode(base / "b") == before
    assert (base / "b").stat().st_mode & 0o777 == 0o640


def test_undo_relinks_a_removed_extra_file_to_its_unchanged_peer(tmp_path: Path) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"keep.txt": "same\n"})
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    os.link(base / "keep.txt", base / "extra.txt")
    report = store.restore("s", "one")
    assert report.removed == ["extra.txt"]
    store.undo("s")
    assert read_files(base) == {"keep.txt": b"same\n", "extra.txt": b"same\n"}
    assert inode(base / "keep.txt") == inode(base / "extra.txt")


def test_undo_relinks_a_file_in_a_removed_directory_to_its_unchanged_peer(
    tmp_path: Path,
) -> None:
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {"keep.txt": "same\n"})
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    (base / "junk/deeper").mkdir(parents=True)
    os.link(base / "keep.txt", base / "junk/deeper/f")
    store.restore("s", "one")
    assert not (base / "junk").exists()
    store.undo("s")
    assert (base / "junk/deeper/f").read_bytes() == b"same\n"
    assert inode(base / "keep.txt") == inode(base / "junk/deeper/f")


def test_a_restore_killed_between_the_renames_of_a_group_is_undone_without_a_backup(
    tmp_path: Path,
) -> None:
    """Killed after one name of a link group was renamed into place and before the other:
    the other still holds its state from before the restore, so the rollback keeps no backup
    (nothing was changed since), and the killed restore leaves no trace in the undo history."""
    for nth in range(1, 20):
        base, root = tmp_path / f"p{nth}", tmp_path / f"store{nth}"
        write_tree(base, {"a": "new\n"})
        os.link(base / "a", base / "b")
        SnapStore(root).create("s", "one", ["."], base_dir=base)
        for name in ("a", "b"):
            (base / name).unlink()
        (base / "a").write_text("old\n")
        os.link(base / "a", base / "b")
        _killed(root, None, KillAtOperation("replace", nth))
        if read_files(base) == {"a": b"new\n", "b": b"old\n"}:
            break
    else:
        pytest.fail("no kill left one name of the group renamed and the other not")
    store = SnapStore(root)
    assert read_files(base) == {"a": b"old\n", "b": b"old\n"}
    assert inode(base / "a") == inode(base / "b")
    assert store.backups("s") == []
