"""Read-ahead on a local store: a restore that needs several compressed blocks has them
decompressed on a thread of their own while it writes files, every blob still verified; one
that needs fewer starts no thread; a damaged block fails the restore as without read-ahead."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from helpers.blobs import corrupt_blob
from helpers.trees import read_tree, write_tree

from snapstore import CorruptBlobError, RestoreError, SnapStore
from snapstore.fs.seam import FileSystem
from snapstore.internals import repository
from snapstore.repo import prefetch
from snapstore.repo.blobs import Blobs
from snapstore.repo.prefetch import ReadAhead, read_ahead


def _text(index: int) -> str:
    """About 100 KB of text that compresses, different for each file."""
    return "".join(f"line {line} of file {index}: {line * index % 977}\n" for line in range(3000))


def _many_blocks(tmp_path: Path) -> tuple[SnapStore, Path]:
    """A store holding a checkpoint whose files fill several compressed blocks of 1 MiB."""
    base = tmp_path / "project"
    write_tree(base, {f"d{i % 5}/file{i:02d}.txt": _text(i) for i in range(40)})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    return store, base


_Wanted = list[tuple[bytes, int]]


def _wanted(store: SnapStore) -> _Wanted:
    return [
        (entry.digest, entry.size)
        for entry in store.get("s", "n").entries
        if entry.kind == "file" and entry.digest
    ]


def _two_blocks(store: SnapStore, blobs: Blobs) -> tuple[_Wanted, _Wanted]:
    """The wanted blobs of two compressed blocks that hold two or more of them each."""
    by_block: dict[tuple[str, int], _Wanted] = {}
    for digest, size in _wanted(store):
        location = blobs.packs.locate(digest)
        assert location is not None
        by_block.setdefault((location.pack_id, location.number), []).append((digest, size))
    first, second = [blobs_of for blobs_of in by_block.values() if len(blobs_of) >= 2][:2]
    return first, second


def _decompressing_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that decompress read-ahead blocks, one per block, from now."""
    threads: list[str] = []
    real = prefetch.decompress

    def spy(codec: int, data: bytes, raw: int, where: str) -> bytes:
        threads.append(threading.current_thread().name)
        return real(codec, data, raw, where)

    monkeypatch.setattr(prefetch, "decompress", spy)
    return threads


def test_blocks_are_decompressed_on_a_thread_while_the_restore_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block is decompressed once, on the read-ahead thread while the writer is busy
    (here slowed down, so that a loaded machine cannot leave the thread behind: the writer
    would then decompress a block nobody had begun itself)."""
    _, base = _many_blocks(tmp_path)
    threads = _decompressing_threads(monkeypatch)

    class SlowWriter(FileSystem):
        def write(self, fd: int, data: bytes | memoryview) -> None:
            time.sleep(0.005)
            super().write(fd, data)

    with SnapStore(tmp_path / "store", fs=SlowWriter()) as reopened:
        reopened.restore("s", "n", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(base)
    assert len(threads) >= 3
    assert sum(name.startswith("read-ahead") for name in threads) >= len(threads) - 1


def test_a_restore_needing_one_block_starts_no_thread(tmp_path: Path) -> None:
    base = tmp_path / "project"
    write_tree(base, {"a.txt": "a\n", "b/c.txt": "c\n"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    blobs = repository(store).blobs
    assert read_ahead(blobs, _wanted(store)) is blobs


def test_several_blocks_are_read_ahead_one_block_a_read(tmp_path: Path) -> None:
    store, _ = _many_blocks(tmp_path)
    blobs = repository(SnapStore(tmp_path / "store")).blobs
    source = read_ahead(blobs, _wanted(store))
    assert isinstance(source, ReadAhead)
    try:
        for digest, size in _wanted(store):
            assert len(source.read(digest, size)) == size
    finally:
        source.close()
    spans = prefetch._spans(blobs, _wanted(store), prefetch.LOCAL)
    assert len(spans) >= 3
    assert all(len(span.compressed) == 1 for span in spans)


def test_a_damaged_block_fails_the_restore_and_leaves_no_new_directory(
    tmp_path: Path,
) -> None:
    store, _ = _many_blocks(tmp_path)
    digests = _wanted(store)
    corrupt_blob(store, digests[len(digests) // 2][0])
    target = tmp_path / "out"
    with pytest.raises(RestoreError) as raised:
        SnapStore(tmp_path / "store").restore("s", "n", target)
    assert raised.value.rolled_back
    assert isinstance(raised.value.__cause__, CorruptBlobError)
    assert not target.exists()


class _IdlePool:
    """An executor whose thread never gets to run (a machine too busy to schedule it)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.futures: list[Future[object]] = []

    def submit(self, *args: object, **kwargs: object) -> Future[object]:
        future: Future[object] = Future()
        self.futures.append(future)
        return future

    def shutdown(self, *args: object, **kwargs: object) -> None:
        for future in self.futures:
            future.cancel()


def test_the_writer_reads_what_no_thread_has_begun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer never waits for a block no reading thread has started: it reads and
    decompresses it itself."""
    _, base = _many_blocks(tmp_path)
    monkeypatch.setattr(prefetch, "ThreadPoolExecutor", _IdlePool)
    threads = _decompressing_threads(monkeypatch)
    worker = threading.Thread(
        target=SnapStore(tmp_path / "store").restore,
        args=("s", "n", tmp_path / "out"),
        daemon=True,  # a restore stuck waiting must not keep the test process alive
    )
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the restore waited for a read nobody had started"
    assert read_tree(tmp_path / "out") == read_tree(base)
    assert threads and set(threads) == {worker.name}


def test_a_block_the_restore_comes_back_to_is_decompressed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = _many_blocks(tmp_path)
    blobs = repository(SnapStore(tmp_path / "store")).blobs
    first, second = _two_blocks(store, blobs)
    order = [first[0], second[0], first[1], second[1]]  # back and forth between two blocks
    calls: list[str] = []
    real = prefetch.decompress

    def spy(codec: int, data: bytes, raw: int, where: str) -> bytes:
        calls.append(where)
        return real(codec, data, raw, where)

    monkeypatch.setattr(prefetch, "decompress", spy)
    source = read_ahead(blobs, order)
    assert isinstance(source, ReadAhead)
    try:
        for digest, size in order:
            assert len(source.read(digest, size)) == size
    finally:
        source.close()
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 2


def test_a_block_loaded_by_the_writer_and_the_reading_thread_at_once_is_decompressed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer loads a span no thread had begun while the reading thread loads a later
    span of the same block (a restore going back and forth between two blocks on a busy
    machine): the block is decompressed by one of them, and the other takes its result."""
    store, _ = _many_blocks(tmp_path)
    blobs = repository(SnapStore(tmp_path / "store")).blobs
    first, second = _two_blocks(store, blobs)
    spans = prefetch._spans(blobs, [first[0], second[0], first[1]], prefetch.LOCAL)
    assert len(spans) == 3 and spans[0].compressed.keys() == spans[2].compressed.keys()
    calls: list[str] = []
    real = prefetch.decompress

    def slow(codec: int, data: bytes, raw: int, where: str) -> bytes:
        calls.append(where)
        time.sleep(0.3)  # long enough for the other loader to reach the same block
        return real(codec, data, raw, where)

    monkeypatch.setattr(prefetch, "decompress", slow)
    source = ReadAhead(blobs, [], 1, prefetch.LOCAL)
    try:
        loaders = [threading.Thread(target=source._load, args=(span,)) for span in spans[::2]]
        for loader in loaders:
            loader.start()
        for loader in loaders:
            loader.join()
    finally:
        source.close()
    assert len(calls) == 1


def _open_in(directory: Path) -> list[str]:
    """What this process holds open in ``directory`` (a deleted one included)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            path = os.readlink(f"/proc/self/fd/{name}")
            if path.startswith(str(directory)):
                found.append(path)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists descriptors in /proc")
def test_a_read_ahead_that_cannot_be_planned_leaves_the_blobs_to_their_ordinary_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning the read-ahead fails (an I/O error looking blobs up): the restore reads each
    blob the ordinary way, and keeps nothing of the target open."""
    _, base = _many_blocks(tmp_path)

    def failing(*args: object) -> list[object]:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(prefetch, "_spans", failing)
    reopened = SnapStore(tmp_path / "store")
    for number in range(3):
        target = tmp_path / f"out{number}"
        reopened.restore("s", "n", target)
        assert read_tree(target) == read_tree(base)
        shutil.rmtree(target)
    assert _open_in(tmp_path / "out") == []


def test_object_storage_read_ahead_holds_one_decompressed_block_a_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a read spans many compressed blocks (object storage), they are decompressed as
    their blobs are asked for, one at a time: a span never holds them all."""
    store, _ = _many_blocks(tmp_path)
    blobs = repository(SnapStore(tmp_path / "store")).blobs
    spans = prefetch._spans(blobs, _wanted(store), prefetch.REMOTE)
    assert max(len(span.compressed) for span in spans) >= 3
    for span in spans:
        largest = max(block.raw for block in span.compressed.values())
        assert span.cost == span.end - span.start + largest
    held: list[int] = []
    real = prefetch._piece

    def piece(span: object, loaded: tuple[bytes, dict[int, bytes]], location: object) -> bytes:
        found = real(span, loaded, location)  # type: ignore[arg-type]
        held.append(len(loaded[1]))
        return found

    monkeypatch.setattr(prefetch, "_piece", piece)
    source = prefetch.ReadAhead(blobs, spans, 2, prefetch.REMOTE)
    try:
        for digest, size in _wanted(store):
            assert len(source.read(digest, size)) == size
    finally:
        source.close()
    assert held and max(held) == 1


def test_planning_a_read_ahead_looks_each_blob_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One look-up in the pack indexes per blob: its location tells whether it is a file's
    own blob or an extent map (a look-up of its size first made two)."""
    store, _ = _many_blocks(tmp_path)
    blobs = repository(SnapStore(tmp_path / "store")).blobs
    wanted = _wanted(store)
    blobs.packs.locate(wanted[0][0])  # the view is loaded before counting
    looked: list[bytes] = []
    real_find = blobs.packs._where.find

    def find(digest: bytes) -> object:
        looked.append(digest)
        return real_find(digest)

    monkeypatch.setattr(blobs.packs._where, "find", find)
    source = read_ahead(blobs, wanted)
    assert isinstance(source, ReadAhead)
    source.close()
    assert sorted(looked) == sorted(digest for digest, _ in wanted)


def test_the_read_ahead_starts_before_the_restore_journal_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks decompress while the journal's flush waits: only the target waits for it."""
    from snapstore.restore.journal import JournalDir

    _, base = _many_blocks(tmp_path)
    order: list[str] = []
    real_start, real_write = ReadAhead.__init__, JournalDir.write

    def start(self: ReadAhead, *args: object, **kwargs: object) -> None:
        order.append("read-ahead")
        real_start(self, *args, **kwargs)  # type: ignore[arg-type]

    def write(self: JournalDir, *args: object, **kwargs: object) -> None:
        order.append("journal")
        real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ReadAhead, "__init__", start)
    monkeypatch.setattr(JournalDir, "write", write)
    SnapStore(tmp_path / "store").restore("s", "n", tmp_path / "out")
    assert order[:2] == ["read-ahead", "journal"]
    assert read_tree(tmp_path / "out") == read_tree(base)


def _gc_hold_and_read_ahead_watched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The order in which read-aheads stop and the gc lock's shared hold is left."""
    from snapstore.repo.repository import Repository

    order: list[str] = []
    real_close, real_hold = ReadAhead.close, Repository.blobs_in_use

    def close(self: ReadAhead) -> None:
        real_close(self)
        order.append("read-ahead stopped")

    @contextlib.contextmanager
    def hold(self: Repository) -> Iterator[None]:
        with real_hold(self):
            try:
                yield
            finally:
                order.append("gc hold left")

    monkeypatch.setattr(ReadAhead, "close", close)
    monkeypatch.setattr(Repository, "blobs_in_use", hold)
    return order


def test_a_journal_that_cannot_be_written_stops_the_read_ahead_before_the_gc_hold_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-ahead starts before the journal: if writing the journal fails, the error is
    raised, nothing is made, and no pack is read once the restore has left the gc hold."""
    from snapstore.restore.journal import JournalDir

    store, _ = _many_blocks(tmp_path)
    order = _gc_hold_and_read_ahead_watched(monkeypatch)

    def write(self: JournalDir, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "injected: journal write")

    monkeypatch.setattr(JournalDir, "write", write)
    with pytest.raises(OSError, match="injected: journal write"):
        store.restore("s", "n", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert order[-2:] == ["read-ahead stopped", "gc hold left"]


def test_an_undo_backup_that_cannot_be_kept_stops_the_read_ahead_before_the_gc_hold_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same when the undo backup of an existing target cannot be committed: the restore
    says nothing was changed, the target is as it was, the read-ahead stopped in the hold."""
    from snapstore.restore.backups import UndoBackups

    store, _ = _many_blocks(tmp_path)
    target = tmp_path / "out"
    store.restore("s", "n", target)
    for path in target.rglob("*.txt"):
        path.write_text("edited")
    before = read_tree(target)
    order = _gc_hold_and_read_ahead_watched(monkeypatch)

    def commit(self: UndoBackups, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "injected: backup commit")

    monkeypatch.setattr(UndoBackups, "commit", commit)
    with pytest.raises(RestoreError, match="nothing was changed") as raised:
        store.restore("s", "n", target)
    assert raised.value.rolled_back
    assert read_tree(target) == before
    assert order[-2:] == ["read-ahead stopped", "gc hold left"]


def test_a_read_ahead_that_cannot_start_a_thread_leaves_the_blobs_to_the_ordinary_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of threads, a restore reads each blob when it writes it, as without a
    read-ahead, instead of failing before its journal."""
    store, base = _many_blocks(tmp_path)

    def start(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", start)
    blobs = repository(store).blobs
    assert read_ahead(blobs, _wanted(store)) is blobs
    store.restore("s", "n", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(base)
