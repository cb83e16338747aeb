"""Hostile restores: hand-crafted manifests and planted symlinks never write outside the target.

Each manifest is built with ``snapstore.format.manifest.encode`` (which does not validate) or as raw
msgpack inside a correct prelude, and installed in place of a real snapshot's manifest. A
refused manifest must be refused before anything is written: the target and a sentinel
directory beside it are compared byte for byte before and after.
"""

from __future__ import annotations

import os
import struct
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import blake3
import msgpack
import pytest
from helpers.hostile import plant_manifest
from helpers.seam import HookedFileSystem
from helpers.trees import read_tree, write_tree

import snapstore.format.rows
from snapstore import (
    CorruptManifestError,
    RestoreError,
    SnapStore,
    SnapstoreError,
    UnsafePathError,
)
from snapstore.format.manifest import CHECKSUM_BYTES, MAGIC, PRELUDE, encode, entry_rows
from snapstore.internals import journals, repository
from snapstore.models import FileEntry, SnapshotInfo
from snapstore.restore.plan import make_plan

PAYLOAD = b"pwned\n"


@dataclass
class Arena:
    """A store, a restore target and a sentinel directory beside it."""

    store: SnapStore
    work: Path
    target: Path
    sentinel: Path
    digest: bytes

    def picture(self) -> dict[str, Any]:
        """Everything under the work directory (target, sentinel and any escapee)."""
        return read_tree(self.work, with_temps=True)

    def install(self, data: bytes, session: str = "s", name: str = "evil") -> None:
        """Put ``data`` in place of the manifest of (session, name)."""
        plant_manifest(self.store, session, name, data)

    def file(self, path: str, **changes: Any) -> FileEntry:
        """A file entry whose bytes (PAYLOAD) are in the store."""
        fields = {"mode": 0o644, "size": len(PAYLOAD), "mtime_ns": 0, "digest": self.digest}
        fields.update(changes)
        return FileEntry(path, "file", **fields)


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[Arena]:
    work = tmp_path / "work"
    target, sentinel = work / "target", work / "sentinel"
    write_tree(target, {"keep.txt": b"keep\n", "dir/inner.txt": b"inner\n"})
    write_tree(sentinel, {"secret.txt": b"secret\n", "deep/x.txt": b"x\n"})
    store = SnapStore(tmp_path / "store")
    digest = repository(store).blobs.put_bytes(PAYLOAD)
    repository(store).blobs.sync()
    yield Arena(store, work, target, sentinel, digest)


def manifest(entries: list[FileEntry], *, session: str = "s", name: str = "evil") -> bytes:
    """A manifest holding ``entries`` as they are (encode does not validate them)."""
    files = [e for e in entries if e.kind == "file"]
    info = SnapshotInfo(
        session=session,
        name=name,
        kind="files",
        created_at=datetime.now(UTC),
        expires_at=None,
        file_count=len(files),
        total_bytes=sum(e.size for e in files),
        meta={},
        base_dir="/nonexistent",
        roots=(".",),
    )
    return encode(info, created_ns=1, expires_ns=None, rows=entry_rows(entries))


def frame(header: bytes, body: bytes) -> bytes:
    """Raw header and body bytes inside a prelude with correct lengths and checksums."""
    lengths = struct.pack("<IQ", len(header), len(body))

    def checksum(part: bytes) -> bytes:
        return blake3.blake3(lengths + part).digest(length=CHECKSUM_BYTES)

    return PRELUDE.pack(MAGIC, len(header), len(body), checksum(header), checksum(body)) + (
        header + body
    )


def raw_manifest(entries: list[list[Any]], **header_changes: Any) -> bytes:
    """A manifest from raw msgpack entries (7-item arrays), bypassing encode entirely."""
    files = [e for e in entries if len(e) > 3 and e[1] == "file"]
    header = {
        "v": 1,
        "kind": "files",
        "session": "s",
        "name": "evil",
        "created_ns": 1,
        "expires_ns": None,
        "file_count": len(files),
        "total_bytes": sum(e[3] for e in files),
        "meta": {},
        "base_dir": "/nonexistent",
        "skipped": [],
        "roots": ["."],
    }
    header.update(header_changes)
    return frame(msgpack.packb(header), msgpack.packb({"entries": entries}))


def assert_refused(arena: Arena, data: bytes) -> SnapstoreError:
    """Restoring the manifest fails with a SnapstoreError and changes nothing anywhere."""
    arena.install(data)
    before = arena.picture()
    with pytest.raises(SnapstoreError) as caught:
        arena.store.restore("s", "evil", arena.target)
    assert arena.picture() == before, "a refused restore wrote something"
    assert not isinstance(caught.value, RestoreError), "refused only after writing began"
    with pytest.raises(SnapstoreError):
        arena.store.diff("s", "evil", target=arena.target)
    return caught.value


def escapes(tmp: Path) -> list[str]:
    """Paths hostile entries aim at outside the target."""
    return [str(tmp / "work" / "escape.txt"), str(tmp / "escape.txt")]


TRAVERSAL = [
    "../escape.txt",
    "../../escape.txt",
    "dir/../../escape.txt",
    "./keep.txt",
    "dir/./inner.txt",
    "dir//inner.txt",
    "dir/",
    ".",
    "..",
    "",
    "dir/..",
]
ABSOLUTE_AND_DRIVES = [
    "/etc/passwd",
    "//server/share/escape.txt",
    "C:/escape.txt",
    "c:escape.txt",
    "C:\\escape.txt",
    "\\\\server\\share\\escape.txt",
    "\\\\?\\C:\\escape.txt",
]
BACKSLASHES_AND_NUL = [
    "..\\escape.txt",
    "dir\\..\\..\\escape.txt",
    "a\\b",
    "a\x00b",
    "keep.txt\x00/../../escape.txt",
]


@pytest.mark.parametrize("path", TRAVERSAL + ABSOLUTE_AND_DRIVES + BACKSLASHES_AND_NUL)
def test_unsafe_paths_are_refused_before_writing(arena: Arena, path: str) -> None:
    error = assert_refused(arena, manifest([arena.file(path)]))
    assert isinstance(error, CorruptManifestError | UnsafePathError)
    for escape in escapes(arena.work.parent):
        assert not os.path.lexists(escape)


@pytest.mark.parametrize("path", ["../escape.txt", "/abs/escape.txt", "a\\..\\..\\x", "a\x00"])
def test_unsafe_paths_in_raw_msgpack_are_refused(arena: Arena, path: str) -> None:
    entry = [path, "file", 0o644, len(PAYLOAD), 0, arena.digest, None]
    assert_refused(arena, raw_manifest([entry]))


def test_absolute_path_to_a_real_file_is_refused(arena: Arena) -> None:
    victim = arena.sentinel / "secret.txt"
    assert_refused(arena, manifest([arena.file(str(victim))]))
    assert victim.read_bytes() == b"secret\n"


def test_unsafe_symlink_root_and_skipped_fields_are_refused(arena: Arena) -> None:
    assert_refused(arena, raw_manifest([], roots=["../x"]))
    assert_refused(arena, raw_manifest([["ln", "symlink", 0o777, 0, 0, None, "a\x00b"]]))
    assert_refused(arena, raw_manifest([["ln", "symlink", 0o777, 0, 0, None, ""]]))
    assert_refused(arena, raw_manifest([["d", "dir", 0o755, 0, 0, bytes(32), None]]))


@pytest.mark.parametrize(
    "pair",
    [
        ("README", "readme"),
        ("Dir/a.txt", "dir/b.txt"),
        ("caf\u00e9.txt", "cafe\u0301.txt"),
        ("STRASSE", "stra\u00dfe"),
        ("\u212bngstrom", "\u00c5ngstrom"),
    ],
)
def test_names_colliding_on_folding_filesystems_are_refused(
    arena: Arena, pair: tuple[str, str]
) -> None:
    error = assert_refused(arena, manifest([arena.file(pair[0]), arena.file(pair[1])]))
    assert isinstance(error, UnsafePathError) and "collide" in str(error)


@pytest.mark.parametrize("link_target", ["../sentinel", "/", str(Path("/tmp"))])
def test_symlink_then_a_file_beneath_it_is_refused(arena: Arena, link_target: str) -> None:
    entries = [
        FileEntry("ln", "symlink", 0o777, target=link_target),
        arena.file("ln/secret.txt"),
    ]
    assert_refused(arena, manifest(entries))
    assert (arena.sentinel / "secret.txt").read_bytes() == b"secret\n"


def test_file_then_a_file_beneath_it_is_refused(arena: Arena) -> None:
    assert_refused(arena, manifest([arena.file("keep.txt"), arena.file("keep.txt/x")]))


def test_the_same_path_twice_is_refused(arena: Arena) -> None:
    assert_refused(arena, manifest([arena.file("a.txt"), arena.file("a.txt")]))


def test_planning_hand_made_entries_refuses_a_symlink_with_children(arena: Arena) -> None:
    entries = [
        FileEntry("ln", "symlink", 0o777, target="../sentinel"),
        arena.file("ln/x"),
    ]
    with pytest.raises(UnsafePathError):
        make_plan(entries, str(arena.target))


def test_windows_reserved_names_stay_inside_the_target(arena: Arena) -> None:
    """On POSIX, CON or nul.txt are ordinary names: restored as plain files in the target
    (never devices, never elsewhere). Windows restores are not covered by this suite."""
    names = ["CON", "nul.txt", "AUX", "com1", "LPT9.log", "prn.", "dir/CON"]
    entries = [FileEntry("dir", "dir", 0o755), *(arena.file(n) for n in names)]
    arena.install(manifest(entries))
    sentinel = read_tree(arena.sentinel)
    arena.store.restore("s", "evil", arena.target)
    for name in names:
        assert (arena.target / name).read_bytes() == PAYLOAD
    assert read_tree(arena.sentinel) == sentinel


def test_huge_entry_count_is_refused(arena: Arena, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapstore.format.rows, "MAX_ENTRIES", 1000)
    entries = [arena.file(f"f{i}") for i in range(1001)]
    error = assert_refused(arena, manifest(entries))
    assert "entries" in str(error)


def test_length_bombs_are_refused_in_bounded_time_and_memory(arena: Arena) -> None:
    claims_many = b"\xdd\xff\xff\xff\xff"
    bombs = [
        frame(msgpack.packb({"v": 1}), b"\x81\xa7entries" + claims_many),
        frame(claims_many, b""),
        frame(b"\xdf\xff\xff\xff\xff", b"\x80"),
        PRELUDE.pack(MAGIC, 2**32 - 1, 2**64 - 1, bytes(16), bytes(16)),
        raw_manifest([[0] * 7] * 3),
    ]
    tracemalloc.start()
    try:
        for bomb in bombs:
            assert_refused(arena, bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, f"decoding length bombs peaked at {peak} bytes"


def test_get_refuses_and_verify_reports_hostile_manifests(arena: Arena) -> None:
    """list() reads headers only, so a hostile body shows up there; every access refuses it."""
    arena.install(manifest([arena.file("../escape.txt")]))
    with pytest.raises(CorruptManifestError):
        arena.store.get("s", "evil")
    with pytest.raises(CorruptManifestError):
        arena.store.read("s", "evil", "../escape.txt")
    assert not arena.store.verify().ok


# Planted symlinks in the target, with a valid snapshot.


def _snapshot(arena: Arena, files: dict[str, bytes]) -> None:
    source = arena.work.parent / "source"
    write_tree(source, files)
    arena.store.create("s", "good", ["."], base_dir=source)


def test_planted_directory_symlink_is_replaced_not_followed(arena: Arena) -> None:
    _snapshot(arena, {"sub/file.txt": b"mine\n"})
    (arena.target / "sub").symlink_to(arena.sentinel)
    sentinel = read_tree(arena.sentinel)
    arena.store.restore("s", "good", arena.target)
    assert read_tree(arena.sentinel) == sentinel
    assert not (arena.target / "sub").is_symlink()
    assert (arena.target / "sub" / "file.txt").read_bytes() == b"mine\n"


def test_unrecorded_parent_symlink_is_refused_before_writing(arena: Arena) -> None:
    entries = [arena.file("sub/secret.txt")]
    (arena.target / "sub").symlink_to(arena.sentinel)
    error = assert_refused(arena, manifest(entries))
    assert isinstance(error, UnsafePathError)


def test_planted_file_symlink_is_replaced_not_followed(arena: Arena) -> None:
    _snapshot(arena, {"secret.txt": b"mine\n"})
    (arena.target / "secret.txt").symlink_to(arena.sentinel / "secret.txt")
    arena.store.restore("s", "good", arena.target)
    assert (arena.sentinel / "secret.txt").read_bytes() == b"secret\n"
    assert not (arena.target / "secret.txt").is_symlink()
    assert (arena.target / "secret.txt").read_bytes() == b"mine\n"


def test_extra_symlink_to_outside_is_unlinked_not_emptied(arena: Arena) -> None:
    _snapshot(arena, {"keep.txt": b"keep\n"})
    (arena.target / "evil").symlink_to(arena.sentinel)
    sentinel = read_tree(arena.sentinel)
    arena.store.restore("s", "good", arena.target)
    assert not os.path.lexists(arena.target / "evil")
    assert read_tree(arena.sentinel) == sentinel


def test_absent_entry_removes_a_link_not_what_it_points_to(arena: Arena) -> None:
    arena.install(manifest([FileEntry("gone", "absent")]))
    (arena.target / "gone").symlink_to(arena.sentinel)
    sentinel = read_tree(arena.sentinel)
    arena.store.restore("s", "evil", arena.target)
    assert not os.path.lexists(arena.target / "gone")
    assert read_tree(arena.sentinel) == sentinel


class SwapInSymlink(HookedFileSystem):
    """Just before the restore's first write into the target, replace ``sub`` in the target
    by a symlink to the sentinel: a race between planning and applying."""

    def __init__(self, target: Path, sentinel: Path) -> None:
        super().__init__()
        self.target, self.sentinel, self.swapped = target, sentinel, False

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        if dir_fd is not None and not self.swapped:
            self.swapped = True
            (self.target / "sub").rename(self.target.parent / "moved-away")
            (self.target / "sub").symlink_to(self.sentinel)
        return super().open(path, flags, mode, dir_fd=dir_fd)


def test_symlink_swapped_in_after_planning_never_redirects_a_write(arena: Arena) -> None:
    _snapshot(arena, {"a.txt": b"new a\n", "sub/file.txt": b"new file\n"})
    write_tree(arena.target, {"a.txt": b"old a\n", "sub/file.txt": b"old file\n"})
    sentinel = read_tree(arena.sentinel)
    racing = SwapInSymlink(arena.target, arena.sentinel)
    store = SnapStore(arena.store.root, fs=racing)
    with pytest.raises(SnapstoreError):
        store.restore("s", "good", arena.target, backup=False)
    assert racing.swapped
    assert read_tree(arena.sentinel) == sentinel
    assert not (arena.sentinel / "file.txt").exists()


@pytest.mark.parametrize("backup", [False, True])
def test_a_target_swapped_for_a_link_to_the_store_after_planning_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backup: bool
) -> None:
    """Another process replaces the target with a symlink to the store between the plan and
    its application: the plan's removals (here an extra ``sessions/``) must never reach the
    store."""
    import shutil
    import warnings

    import snapstore.restore.dirhandles as dirhandles
    from snapstore.errors import InterruptedRestoreWarning, SnapstoreError

    store_root, target = tmp_path / "store", tmp_path / "proj"
    write_tree(target, {"a.txt": "a"})
    store = SnapStore(store_root)
    store.create("s", "n", ["."], base_dir=target)
    write_tree(target, {"sessions/junk": "x"})
    real_open = dirhandles.open_target

    def swapping(real_target: str, **options: object) -> int:
        if real_target == str(target) and not os.path.islink(target):
            shutil.rmtree(target)
            os.symlink(store_root, target)
        return real_open(real_target, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(dirhandles, "open_target", swapping)
    with pytest.raises(SnapstoreError):
        store.restore("s", "n", target, backup=backup)
    monkeypatch.undo()
    with warnings.catch_warnings():  # the journal waits for a target it may write into
        warnings.simplefilter("ignore", InterruptedRestoreWarning)
        reopened = SnapStore(store_root)
    assert [info.name for info in reopened.list("s")] == ["n"]
    assert reopened.verify().ok


def test_a_target_that_is_no_directory_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """A dangling symlink, a file, or a path that is not UTF-8: refused up front, with no
    journal left behind to warn at every open."""
    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    (tmp_path / "file").write_text("f")
    undecodable = os.fsdecode(os.fsencode(str(tmp_path)) + b"/t\xff")
    for target in (tmp_path / "dangling", tmp_path / "file", undecodable, f"{tmp_path}/a\x00b"):
        with pytest.raises(UnsafePathError):
            store.restore("s", "n", target)
    with pytest.raises(UnsafePathError):
        store.diff("s", "n", target=f"{tmp_path}/a\x00b")
    assert not journals(store).pending()
    assert (tmp_path / "file").read_text() == "f"
    assert not os.path.lexists(undecodable)


def test_a_file_no_snapshot_could_record_is_left_alone_not_removed(tmp_path: Path) -> None:
    """A name that is not UTF-8 (or holds a backslash) appears in the target after the
    snapshot: no undo backup could keep it, so the restore leaves it, and says so, rather
    than refusing to run or deleting it unkept."""
    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    (base / "a.txt").write_text("changed")
    odd = os.fsdecode(os.fsencode(str(base)) + b"/odd\xff")
    Path(odd).write_text("mine")
    (base / "back\\slash").write_text("mine too")
    planned = store.restore("s", "n", dry_run=True)
    report = store.restore("s", "n")
    assert planned.kept == report.kept == ["back\\slash", "odd\\xff"]
    assert report.written == ["a.txt"] and report.removed == []
    assert Path(odd).read_text() == "mine"


def test_a_kept_file_that_is_a_hard_link_of_a_replaced_one_is_not_backed_up(
    tmp_path: Path,
) -> None:
    """Only recorded paths are kept as link peers in the undo backup: a file the restore
    leaves alone (here a name no snapshot can record) is not, even when it shares an inode
    with a file the restore replaces."""
    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    (base / "a.txt").write_text("changed")
    os.link(base / "a.txt", base / "back\\slash")
    report = store.restore("s", "n")
    assert report.kept == ["back\\slash"] and report.written == ["a.txt"]
    assert (base / "back\\slash").read_text() == "changed"
