"""Appendable packs: a process's small creates append one segment each to a pack it keeps
open, durable with one flush; other processes read the segments (through the pack log or a
listing) and never a torn tail; a failed append abandons the pack; gc and folding keep a
pack that grew while they ran, and a writer whose pack they deleted starts another."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.seam import HookedFileSystem, InjectedFault

from snapstore import SnapStore
from snapstore.format.packfile import SEGMENTED_MAGIC
from snapstore.internals import repository
from snapstore.maintenance import gcsteps
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy


def _edit(base: Path, name: str, text: str) -> None:
    base.mkdir(parents=True, exist_ok=True)
    (base / name).write_text(text)


def _pack_files(root: Path) -> list[Path]:
    return sorted((root / "packs").glob("*.pack"))


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class PackSyncs(HookedFileSystem):
    """Records which files and directories are flushed, and which names are made."""

    def __init__(self) -> None:
        super().__init__()
        self.synced: list[str] = []
        self.renamed: list[str] = []

    def fsync(self, fd: int) -> None:
        self.synced.append(_fd_path(fd))
        super().fsync(fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.synced.append(os.path.abspath(path) + "/")
        super().fsync_dir(path, dir_fd=dir_fd)

    def replace(self, src: str, dst: str, **kw: Any) -> None:
        self.renamed.append(dst)
        super().replace(src, dst, **kw)


def test_a_second_small_create_appends_with_one_flush(root: Path, tmp_path: Path) -> None:
    base = tmp_path / "p"
    fs = PackSyncs()
    store = SnapStore(root, fs=fs, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    store.create("s", "one", ["."], base_dir=base)
    (pack,) = _pack_files(root)
    assert pack.read_bytes()[:8] == SEGMENTED_MAGIC
    assert not list((root / "packs").glob("*.idx"))
    fs.synced.clear()
    fs.renamed.clear()
    _edit(base, "a.txt", "two\n")
    store.create("s", "two", ["."], base_dir=base)
    packs_dir = str(root / "packs")
    assert [p for p in fs.synced if p.startswith(packs_dir)] == [str(pack)]
    assert not [p for p in fs.renamed if p.startswith(packs_dir)]
    assert _pack_files(root) == [pack]
    log = (root / "packs" / "log").read_text().splitlines()
    assert log[-1] == f"{pack.stem} {pack.stat().st_size:x}"
    fresh = SnapStore(root)
    assert fresh.read("s", "one", "a.txt") == b"one\n"
    assert fresh.read("s", "two", "a.txt") == b"two\n"
    assert fresh.verify(deep=True).ok


def test_another_process_follows_the_segments_through_the_log(root: Path, tmp_path: Path) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0)
    reader = SnapStore(root, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    writer.create("s", "one", ["."], base_dir=base)
    assert reader.read("s", "one", "a.txt") == b"one\n"  # lists the packs, then follows the log
    for n in range(5):
        _edit(base, "a.txt", f"edit {n}\n")
        writer.create("s", f"e{n}", ["."], base_dir=base)
        assert reader.read("s", f"e{n}", "a.txt") == f"edit {n}\n".encode()
    (index,) = repository(reader).blobs.packs.indexes()
    assert index.segments == 6
    assert (
        not repository(reader).blobs.packs.has_log
        or index.pack_size == _pack_files(root)[0].stat().st_size
    )


def test_the_segments_a_log_line_announces_are_read_in_one_go(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0)
    reader = SnapStore(root, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    writer.create("s", "one", ["."], base_dir=base)
    assert reader.read("s", "one", "a.txt") == b"one\n"
    for n in range(3):
        _edit(base, "a.txt", f"edit {n}\n")
        writer.create("s", f"e{n}", ["."], base_dir=base)
    packs = repository(reader).blobs.packs
    reads: list[tuple[int, int]] = []
    read_range = packs.backend.read_range

    def counted(handle: Any, offset: int, length: int) -> bytes:
        reads.append((offset, length))
        return read_range(handle, offset, length)

    monkeypatch.setattr(packs.backend, "read_range", counted)
    packs.refresh()
    (index,) = packs.indexes()
    assert index.segments == 4
    assert len(reads) == 1  # three segments: one read, not two per segment
    monkeypatch.undo()
    assert [reader.read("s", f"e{n}", "a.txt") for n in range(3)] == [
        f"edit {n}\n".encode() for n in range(3)
    ]


def test_a_log_line_past_the_file_or_into_a_torn_tail_is_never_read_as_a_segment(
    root: Path, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0)
    reader = SnapStore(root, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    writer.create("s", "one", ["."], base_dir=base)
    assert reader.read("s", "one", "a.txt") == b"one\n"
    packs = repository(reader).blobs.packs
    (pack,) = _pack_files(root)
    log = root / "packs" / "log"
    for n in range(2):
        _edit(base, "a.txt", f"edit {n}\n")
        writer.create("s", f"e{n}", ["."], base_dir=base)
    whole = pack.stat().st_size
    with log.open("a") as lines:
        lines.write(f"{pack.stem} {whole + 100:x}\n")  # past the file's end
    packs.refresh()
    (index,) = packs.indexes()
    assert index.segments == 1  # nothing read past what reads: the next listing judges
    assert reader.read("s", "e1", "a.txt") == b"edit 1\n"  # the miss lists the packs
    (index,) = packs.indexes()
    assert index.segments == 3 and index.pack_size == whole
    with pack.open("ab") as torn:
        torn.write(b"\x01" * 300)  # an append that never finished
    with log.open("a") as lines:
        lines.write(f"{pack.stem} {whole + 300:x}\n")
    packs.refresh()
    (index,) = packs.indexes()
    assert index.segments == 3 and index.pack_size == whole
    assert [reader.read("s", name, "a.txt") for name in ("one", "e0", "e1")] == [
        b"one\n",
        b"edit 0\n",
        b"edit 1\n",
    ]


class TornAppend(HookedFileSystem):
    """Writes half of the ``nth`` write to a pack in place (an append), then fails; with
    ``flush``, fails the ``nth`` flush of one instead. Without ``cut_back``, the writer
    cannot cut the pack back after that either (its truncate fails too, as if it had been
    killed): the failed segment stays in the file for readers to find."""

    def __init__(self, nth: int, *, flush: bool = False, cut_back: bool = True) -> None:
        super().__init__()
        self.nth = nth
        self.flush = flush
        self.cut_back = cut_back
        self.seen = 0
        self.fired = False

    def _counts(self, fd: int) -> bool:
        if not _fd_path(fd).endswith(".pack") or self.fired:
            return False
        self.seen += 1
        return self.seen == self.nth

    def write(self, fd: int, data: bytes | memoryview) -> None:
        if not self.flush and self._counts(fd):
            self.fired = True
            os.write(fd, bytes(data)[: len(data) // 2])
            raise InjectedFault(errno.EIO, "injected: a torn append")
        super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.flush and self._counts(fd):
            self.fired = True
            raise InjectedFault(errno.EIO, "injected: a failed flush of an append")
        super().fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        if self.fired and not self.cut_back and _fd_path(fd).endswith(".pack"):
            raise InjectedFault(errno.EIO, "injected: the pack cannot be cut back")
        super().ftruncate(fd, length)


@pytest.mark.parametrize("flush", [False, True], ids=["torn-write", "failed-flush"])
def test_a_failed_append_abandons_the_pack(root: Path, tmp_path: Path, flush: bool) -> None:
    base = tmp_path / "p"
    fs = TornAppend(1, flush=flush)  # the first write (flush) to a pack in place
    store = SnapStore(root, fs=fs, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    store.create("s", "one", ["."], base_dir=base)
    (first,) = _pack_files(root)
    size = first.stat().st_size
    _edit(base, "a.txt", "lost\n")
    with pytest.raises(OSError, match="injected"):
        store.create("s", "lost", ["."], base_dir=base)
    assert fs.fired
    assert first.stat().st_size == size, "the failed append is cut back"
    other = SnapStore(root)
    assert [info.name for info in other.list()] == ["one"]
    assert other.verify(deep=True).ok
    _edit(base, "a.txt", "three\n")
    store.create("s", "three", ["."], base_dir=base)
    assert len(_pack_files(root)) == 2, "the next create must start another pack"
    assert first.stat().st_size == os.stat(first).st_size
    reader = SnapStore(root)
    assert reader.read("s", "three", "a.txt") == b"three\n"
    assert reader.read("s", "one", "a.txt") == b"one\n"
    assert reader.verify(deep=True).ok
    report = reader.gc()
    assert not report.problems
    after = reader.verify(deep=True)
    assert after.ok and not after.garbage
    assert reader.read("s", "three", "a.txt") == b"three\n"


@pytest.mark.parametrize(
    ("damage", "whole_segments"),
    [
        (lambda whole: whole + whole[8 : len(whole) // 2], 2),
        (lambda whole: whole + bytes(100), 2),
        (lambda whole: whole[:-1], 1),
        (lambda whole: whole[:-41], 1),
    ],
    ids=["half-an-append", "zeros", "last-byte-cut", "trailer-cut"],
)
def test_a_torn_tail_is_never_read_as_a_segment(
    root: Path, tmp_path: Path, damage: Any, whole_segments: int
) -> None:
    base = tmp_path / "p"
    store = SnapStore(root, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    store.create("s", "one", ["."], base_dir=base)
    _edit(base, "a.txt", "two\n")
    store.create("s", "two", ["."], base_dir=base)
    store.close()
    (pack,) = _pack_files(root)
    pack.chmod(0o644)
    pack.write_bytes(damage(pack.read_bytes()))
    pack.chmod(0o444)
    reader = SnapStore(root)
    (index,) = repository(reader).blobs.packs.indexes()
    assert index.segments == whole_segments
    assert not repository(reader).blobs.packs.broken()
    assert reader.read("s", "one", "a.txt") == b"one\n"


def test_gc_deleting_the_open_pack_makes_the_writer_start_another(
    root: Path, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0)
    other = SnapStore(root, fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    other.create("s", "other", ["."], base_dir=base)
    _edit(base, "b.txt", "two\n")
    writer.create("s", "one", ["."], base_dir=base)
    before = set(_pack_files(root))
    report = other.gc()  # merges the two small packs: the writer's open one goes
    assert report.packs_deleted == 2
    _edit(base, "c.txt", "three\n")
    writer.create("s", "two", ["."], base_dir=base)
    after = set(_pack_files(root))
    assert not before & after
    fresh = SnapStore(root)
    assert fresh.read("s", "two", "c.txt") == b"three\n"
    assert fresh.verify(deep=True).ok


@pytest.mark.parametrize("guarded", [True, False], ids=["grown-kept", "unguarded-loses"])
def test_gc_keeps_a_pack_that_grew_while_it_ran(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guarded: bool
) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0, lock_timeout=10)
    _edit(base, "a.txt", "garbage soon\n")
    writer.create("s", "gone", ["."], base_dir=base)
    writer.delete("s", "gone")  # the writer's open pack holds only garbage now
    original = gcsteps.Steps.run

    def append_then_delete(steps: gcsteps.Steps) -> gcsteps.StepResult:
        _edit(base, "a.txt", "appended while gc ran\n")
        writer.create("s", "kept", ["."], base_dir=base)  # a second segment of that pack
        return original(steps)

    monkeypatch.setattr(gcsteps.Steps, "run", append_then_delete)
    if not guarded:
        monkeypatch.setattr(type(repository(writer).blobs.packs), "grown", lambda *_: False)
    report = SnapStore(root, fold_threshold=0, lock_timeout=10).gc()
    fresh = SnapStore(root)
    if guarded:
        assert report.packs_deleted == 0 and not report.problems
        assert fresh.read("s", "kept", "a.txt") == b"appended while gc ran\n"
        assert fresh.verify(deep=True).ok
    else:
        assert report.packs_deleted == 1
        assert not fresh.verify(deep=True).ok, "without the rule the new segment is lost"


def test_a_fold_keeps_a_pack_that_grew_since_it_read_it(root: Path, tmp_path: Path) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0, lock_timeout=10)
    for n in range(3):  # three small packs, each from a process of its own
        _edit(base, f"f{n}.txt", f"file {n}\n")
        SnapStore(root, fold_threshold=0).create("s", f"p{n}", ["."], base_dir=base)
    _edit(base, "w.txt", "writer\n")
    writer.create("s", "w1", ["."], base_dir=base)
    folder = repository(SnapStore(root, fold_threshold=0, lock_timeout=10))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None and len(fold.sources) == 4
    _edit(base, "w.txt", "writer, appended after the fold read its pack\n")
    writer.create("s", "w2", ["."], base_dir=base)
    assert drop_sources(folder, fold, wait=5.0)
    fresh = SnapStore(root)
    assert fresh.read("s", "w2", "w.txt") == b"writer, appended after the fold read its pack\n"
    assert fresh.verify(deep=True).ok
    assert len(_pack_files(root)) == 2  # the merged pack and the writer's, kept


def test_a_forked_child_never_appends_to_its_parents_pack(root: Path, tmp_path: Path) -> None:
    base = tmp_path / "p"
    store = SnapStore(root, fold_threshold=0)
    _edit(base, "a.txt", "parent\n")
    store.create("s", "parent", ["."], base_dir=base)
    _edit(base, "b.txt", "child\n")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            store.create("s", "child", ["."], base_dir=base)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    _edit(base, "c.txt", "parent again\n")
    store.create("s", "parent2", ["."], base_dir=base)
    assert len(_pack_files(root)) == 2
    fresh = SnapStore(root)
    assert fresh.read("s", "child", "b.txt") == b"child\n"
    assert fresh.read("s", "parent2", "c.txt") == b"parent again\n"
    assert fresh.verify(deep=True).ok


def _pack_of(store: SnapStore, session: str, name: str, path: str) -> str:
    digest = store.get(session, name).entry(path).digest  # type: ignore[union-attr]
    assert digest is not None
    location = repository(store).blobs.packs.locate(digest)
    assert location is not None
    return location.pack_id


def test_a_segment_whose_flush_failed_is_never_counted_on(root: Path, tmp_path: Path) -> None:
    """After a failed fsync the kernel may have dropped the dirty pages and marked them
    clean: a later fsync by another process succeeds without making them durable. So a
    process that reads a segment no log line announced stores the blob again."""
    base = tmp_path / "p"
    writer = SnapStore(root, fs=TornAppend(1, flush=True, cut_back=False), fold_threshold=0)
    _edit(base, "a.txt", "one\n")
    writer.create("s", "one", ["."], base_dir=base)
    (failed_pack,) = _pack_files(root)
    _edit(base, "a.txt", "never durable\n")
    with pytest.raises(OSError, match="injected"):
        writer.create("s", "lost", ["."], base_dir=base)
    other = SnapStore(root, fold_threshold=0)  # lists the packs: the segment reads whole
    other.create("t", "same", ["."], base_dir=base)
    assert _pack_of(other, "t", "same", "a.txt") != failed_pack.stem
    assert other.verify(deep=True).ok


def test_a_new_process_counts_on_segments_the_log_announces(root: Path, tmp_path: Path) -> None:
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0)
    for n in range(3):
        _edit(base, "a.txt", f"edit {n}\n")
        writer.create("s", f"e{n}", ["."], base_dir=base)
    (pack,) = _pack_files(root)
    reader = SnapStore(root, fold_threshold=0)  # lists the packs, and reads the whole log
    reader.create("t", "same", ["."], base_dir=base)
    assert _pack_of(reader, "t", "same", "a.txt") == pack.stem  # not stored again
    (root / "packs" / "log").unlink()  # what the log said is gone: nothing is known flushed
    third = SnapStore(root, fold_threshold=0)
    third.create("u", "same", ["."], base_dir=base)
    assert _pack_of(third, "u", "same", "a.txt") != pack.stem
    assert third.verify(deep=True).ok


def test_a_gc_step_unlinks_an_appendable_pack_under_the_lock_even_if_its_view_lost_it(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc takes a pack out as it read it: if its view lost the appendable pack meanwhile (a
    read error while listing), the pack itself must still go under the exclusive lock, never
    after it, when its writer may have appended a committed segment."""
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0, lock_timeout=10)
    _edit(base, "a.txt", "garbage soon\n")
    writer.create("s", "gone", ["."], base_dir=base)
    writer.delete("s", "gone")
    gc_store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    packs_type = type(repository(gc_store).blobs.packs)
    unindex, remove = packs_type.unindex, packs_type.remove_unindexed

    def view_lost_it(self: Any, indexes: list[Any], **options: Any) -> Any:
        for index in indexes:
            self._indexes.pop(index.pack_id, None)
        return unindex(self, indexes, **options)

    def writer_appends_first(self: Any, pack_ids: list[str]) -> None:
        _edit(base, "a.txt", "committed between the step and the unlink\n")
        writer.create("s", "kept", ["."], base_dir=base)
        remove(self, pack_ids)

    monkeypatch.setattr(packs_type, "unindex", view_lost_it)
    monkeypatch.setattr(packs_type, "remove_unindexed", writer_appends_first)
    assert not gc_store.gc().problems
    fresh = SnapStore(root)
    assert fresh.read("s", "kept", "a.txt") == b"committed between the step and the unlink\n"
    assert fresh.verify(deep=True).ok


def test_gc_never_counts_on_a_segment_its_writer_did_not_flush(root: Path, tmp_path: Path) -> None:
    """A blob a kept appendable pack holds only in a segment no log line announced (its
    writer's flush failed) is copied by gc like any other, so the only copy gc leaves is
    never bytes that may not be on disk."""
    base, big = tmp_path / "p", tmp_path / "big"
    shared = "shared content\n"
    writer = SnapStore(root, fs=TornAppend(1, flush=True, cut_back=False), fold_threshold=0)
    (big / "kept.bin").parent.mkdir(parents=True)
    (big / "kept.bin").write_bytes(os.urandom(1_000_000))
    writer.create("w", "big", ["."], base_dir=big)  # a large pack that gc keeps
    _edit(big, "x.txt", shared)
    with pytest.raises(OSError, match="injected"):
        writer.create("w", "failed", ["x.txt"], base_dir=big)  # x.txt: only in that segment
    (writer_pack,) = _pack_files(root)
    owner = SnapStore(root, fold_threshold=0)
    _edit(base, "x.txt", shared)
    (base / "garbage.bin").write_bytes(os.urandom(200_000))
    owner.create("s", "snap1", ["."], base_dir=base)
    owner.create("s", "snap2", ["x.txt"], base_dir=base)
    owner.delete("s", "snap1")  # the owner's pack is mostly garbage now: gc rewrites it
    gc_store = SnapStore(root, fold_threshold=0)
    assert not gc_store.gc().problems
    digest = gc_store.get("s", "snap2").entry("x.txt").digest  # type: ignore[union-attr]
    holders = [
        index.pack_id
        for index in repository(gc_store).blobs.packs.indexes()
        if digest in index.entries and index.pack_id != writer_pack.stem
    ]
    assert holders, "gc left the only copy in a segment its writer never flushed"


def test_a_reader_passes_over_a_copy_that_a_power_cut_left_as_zeros(
    root: Path, tmp_path: Path
) -> None:
    """A blob stored again beside a copy in a segment its writer never flushed is read from
    the other pack when that copy does not read (a power cut kept the segment's trailer and
    index but not its blocks)."""
    base, own = tmp_path / "p", tmp_path / "own"
    writer = SnapStore(root, fs=TornAppend(1, flush=True, cut_back=False), fold_threshold=0)
    _edit(own, "w.txt", "the writer's own\n")
    writer.create("w", "own", ["."], base_dir=own)
    _edit(own, "x.txt", "stored twice\n")
    with pytest.raises(OSError, match="injected"):
        writer.create("w", "failed", ["x.txt"], base_dir=own)
    (unflushed,) = _pack_files(root)
    other = SnapStore(root, fold_threshold=0)
    _edit(base, "x.txt", "stored twice\n")
    other.create("s", "snap", ["x.txt"], base_dir=base)  # stores it again, in its own pack
    reader = SnapStore(root)
    packs = repository(reader).blobs.packs
    digest = reader.get("s", "snap").entry("x.txt").digest  # type: ignore[union-attr]
    assert digest is not None
    (index,) = [i for i in packs.indexes() if i.pack_id == unflushed.stem]
    block = index.blocks[index.entries[digest][0]]
    unflushed.chmod(0o644)
    data = bytearray(unflushed.read_bytes())
    data[block.offset - 10 : block.offset + block.stored] = bytes(block.stored + 10)
    unflushed.write_bytes(bytes(data))
    packs.by_digest()[digest] = index  # the zeroed copy is the one this view finds first
    assert reader.read("s", "snap", "x.txt") == b"stored twice\n"


def test_the_trees_of_a_failed_create_are_never_reused_from_its_segment(
    root: Path, tmp_path: Path
) -> None:
    """The process remembers the trees it built for a base directory; after its create's
    append failed, a listing may load that segment, but the next create must store those
    trees again rather than count on a copy that was never flushed."""
    base = tmp_path / "p"
    store = SnapStore(root, fs=TornAppend(1, flush=True, cut_back=False), fold_threshold=0)
    for n in range(12):  # enough rows that a create of one change builds on the last build
        _edit(base / "sub", f"f{n}.txt", f"file {n}\n")
    _edit(base, "g.txt", "one\n")
    store.create("s", "one", ["."], base_dir=base)
    _edit(base / "newdir", "h.txt", "in a new directory\n")
    _edit(base, "g.txt", "two\n")
    with pytest.raises(OSError, match="injected"):
        store.create("s", "two", ["."], base_dir=base)
    (failed,) = _pack_files(root)
    logged = (root / "packs" / "log").read_text()
    (root / "packs" / "log").unlink()  # as a restarted log: the next refresh lists the packs
    _edit(base, "g.txt", "three\n")
    store.create("s", "three", ["."], base_dir=base)
    whole = failed.read_bytes()
    (index,) = [
        i for i in repository(SnapStore(root)).blobs.packs.indexes() if i.pack_id == failed.stem
    ]
    lines = [line.split() for line in logged.splitlines()[1:]]
    (first_end,) = [int(end, 16) for pack_id, end in lines if pack_id == failed.stem]
    data = bytearray(whole)  # the failed segment's blocks as the disk may hold them: zeros
    zeroed = [block for block in index.blocks if block.offset > first_end]
    assert zeroed
    for block in zeroed:
        data[block.offset : block.offset + block.stored] = bytes(block.stored)
    failed.chmod(0o644)
    failed.write_bytes(bytes(data))
    assert SnapStore(root).read("s", "three", "newdir/h.txt") == b"in a new directory\n"


def test_the_pack_log_reads_whole_lines_only(tmp_path: Path) -> None:
    from snapstore.backend.packlog import TOKEN_BYTES, LogPosition, PackLog
    from snapstore.fs.seam import LOCAL

    one, two = "1f" * 16, "2e" * 16
    path = tmp_path / "log"
    token = b"ab" * (TOKEN_BYTES // 2)
    lines = [f"-{one}", f"x{one} 10", f"{one} 10 junk", f"{one} 12345678901234567", two]
    path.write_bytes(
        token + b"\n" + "".join(f"{line}\n" for line in [*lines, f"{one} 1f"]).encode()
    )
    entries, _ = PackLog(str(path), LOCAL, str(tmp_path)).read(LogPosition(token, TOKEN_BYTES + 1))
    assert entries == [(two, None), (one, 0x1F)]


def test_a_blob_stored_again_in_the_pack_that_held_it_is_counted_on_at_commit(
    root: Path, tmp_path: Path
) -> None:
    """A reader's map names one pack per blob; when the log says that pack went, the blob
    leaves the map even though the process's own appendable pack holds it too, and the next
    create stores it again: into a new segment of that same pack. The map must name the pack
    again for it (it did not: the pack already held the digest, so the segment 'added'
    nothing, and the create failed at its commit with 'vanished before commit')."""
    from snapstore.format.packfile import KIND_DATA
    from snapstore.repo.packs import PackWriter

    base = tmp_path / "p"
    _edit(base, "kept.txt", "held by two packs\n")
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    store.create("s", "a", ["kept.txt"], base_dir=base)
    repo = repository(store)
    (digest,) = [
        d for d in repo.blobs.packs.by_digest() if repo.blobs.read(d) == b"held by two packs\n"
    ]
    own = repo.blobs.packs.locate(digest)
    assert own is not None
    other = repository(SnapStore(root, fold_threshold=0, lock_timeout=10))
    other.blobs.refresh()
    second = PackWriter(other.backend)
    second.add(digest, b"held by two packs\n", KIND_DATA)
    other.blobs.packs.register(second.publish())
    repo.blobs.refresh()
    mapped = repo.blobs.packs.locate(digest)
    assert mapped is not None and mapped.pack_id == second.pack_id  # the last loaded
    with other.gc_lock.exclusive():
        other.blobs.refresh()
        (index,) = [i for i in other.blobs.packs.indexes() if i.pack_id == second.pack_id]
        other.blobs.packs.unindex([index])
    _edit(base, "new.txt", "one more file\n")
    store.create("s", "b", ["kept.txt", "new.txt"], base_dir=base)
    again = repo.blobs.packs.locate(digest)
    assert again is not None and again.pack_id == own.pack_id  # stored again into its pack
    fresh = SnapStore(root)
    assert fresh.read("s", "b", "kept.txt") == b"held by two packs\n"
    assert fresh.verify(deep=True).ok


def _mapped_packs_are_in_view(store: SnapStore) -> None:
    """Every pack the store's map names for a digest is a pack of its view."""
    packs = repository(store).blobs.packs
    held = {index.pack_id for index in packs.indexes()}
    stale = {index.pack_id for index in packs.by_digest().values()} - held
    assert not stale, f"the map still names packs that went: {sorted(stale)}"


def test_an_undo_backup_never_counts_on_a_blob_of_a_pack_gc_deleted(
    root: Path, tmp_path: Path
) -> None:
    """A writer's map named the digests of its appendable pack's first segment through the
    index object of that moment; each later segment makes a new index object, and when gc
    deleted the pack only the digests mapped to the newest one left the map. The undo
    backup of a restore then counted on a file the pack held (garbage when gc ran, since the
    snapshot that had it was deleted, so not copied) and committed a backup whose blob no
    pack holds (seen in the mixed workload test: two blobs of an undo backup missing)."""
    source, target = tmp_path / "src", tmp_path / "target"
    needed = os.urandom(4000).hex()  # most of the pack's bytes: gc rewrites the pack
    writer = SnapStore(root, fold_threshold=0, lock_timeout=10)
    _edit(source, "f.txt", needed)
    writer.create("s", "a", ["."], base_dir=source)  # the pack's first segment
    writer.restore("s", "a", target)
    _edit(source, "f.txt", "the next version\n")
    writer.create("s", "b", ["."], base_dir=source)  # its second segment
    writer.delete("s", "a")  # f.txt's first version is garbage, but still in the target
    report = writer.gc()
    assert report.packs_deleted == 1 and not report.problems
    _mapped_packs_are_in_view(writer)
    writer.restore("s", "b", target)  # its undo backup holds the first version
    assert (target / "f.txt").read_text() == "the next version\n"
    fresh = SnapStore(root)
    assert fresh.verify(deep=True).ok
    fresh.undo("s", target=target)
    assert (target / "f.txt").read_text() == needed


def test_a_create_between_gc_steps_never_counts_on_a_pack_a_step_deleted(
    root: Path, tmp_path: Path
) -> None:
    """The same through the pack log: another process's gc deletes the writer's appendable
    pack in a step, and the writer creates before the gc ends (before the new log that
    makes every process list the packs), counting on a blob of that pack's first
    segment."""
    base = tmp_path / "p"
    writer = SnapStore(root, fold_threshold=0, lock_timeout=10)
    _edit(base, "f.txt", "garbage when gc runs, needed again right after\n")
    writer.create("s", "a", ["."], base_dir=base)
    _edit(base, "f.txt", "a second segment\n")
    writer.create("s", "b", ["."], base_dir=base)
    writer.delete("s", "a")
    writer.delete("s", "b")  # the pack holds garbage only: gc deletes it
    gc_store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    packs = repository(gc_store).blobs.packs
    remove = packs.remove_unindexed

    def writer_creates_between_steps(pack_ids: list[str]) -> None:
        _edit(base, "f.txt", "garbage when gc runs, needed again right after\n")
        writer.create("s", "c", ["."], base_dir=base)
        _mapped_packs_are_in_view(writer)
        remove(pack_ids)

    packs.remove_unindexed = writer_creates_between_steps  # type: ignore[method-assign]
    report = gc_store.gc()
    assert report.packs_deleted == 1 and not report.problems
    fresh = SnapStore(root)
    assert fresh.read("s", "c", "f.txt") == b"garbage when gc runs, needed again right after\n"
    assert fresh.verify(deep=True).ok
