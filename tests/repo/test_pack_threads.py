"""A pack's blocks compress on two threads: they still land in the order they closed, a
failure on a compressing thread reaches the caller as itself with nothing published, and no
thread outlives its pack."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import blake3
import pytest

from snapstore import SnapStore
from snapstore.backend.local import LocalBackend
from snapstore.backend.seam import Handle, Kind
from snapstore.format.codec import CODEC_NONE, CODEC_ZSTD, compress
from snapstore.format.packfile import KIND_DATA, KIND_TREE
from snapstore.internals import repository
from snapstore.repo import packs
from snapstore.repo.packs import BLOCK_BYTES, PackWriter, read_index


def _backend(tmp_path: Path) -> LocalBackend:
    backend = LocalBackend(str(tmp_path))
    backend.open(create=True)
    return backend


def _blobs(count: int) -> list[bytes]:
    """Blobs filling a block each, alternately compressible and not (so compressing them
    takes unequal times and the threads finish out of order)."""
    found = []
    for index in range(count):
        if index % 2:
            found.append(os.urandom(BLOCK_BYTES))
        else:
            text = f"line {index} of some source text\n".encode() * (BLOCK_BYTES // 20)
            found.append(text[:BLOCK_BYTES])
    return found


def _pack_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("snapstore-pack")]


def test_two_blocks_compress_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packs, "COMPRESSING_THREADS", 2)
    both_running = threading.Barrier(2, timeout=10)

    def compress_when_both_run(data: bytes, level: int) -> tuple[int, bytes]:
        both_running.wait()  # BrokenBarrierError unless another block compresses meanwhile
        return compress(data, level)

    monkeypatch.setattr(packs, "compress", compress_when_both_run)
    writer = PackWriter(_backend(tmp_path))
    blobs = _blobs(4)
    for data in blobs:
        writer.add(blake3.blake3(data).digest(), data)
    index = writer.publish()
    assert len(index.blocks) == 4


def test_blocks_land_in_the_order_they_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packs, "COMPRESSING_THREADS", 2)
    backend = _backend(tmp_path)
    writer = PackWriter(backend)
    blobs = _blobs(12)
    digests = [blake3.blake3(data).digest() for data in blobs]
    for digest, data in zip(digests, blobs, strict=True):
        writer.add(digest, data)
    index = writer.publish()
    assert [index.entries[digest][0] for digest in digests] == list(range(12))
    offsets = [block.offset for block in index.blocks]
    assert offsets == sorted(offsets)
    assert {block.codec for block in index.blocks} == {CODEC_NONE, CODEC_ZSTD}
    assert read_index(backend, index.pack_id).entries == index.entries
    store = SnapStore(tmp_path)
    for digest, data in zip(digests, blobs, strict=True):
        assert repository(store).blobs.read(digest) == data
    assert _pack_threads() == []


def test_a_failure_on_a_compressing_thread_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packs, "COMPRESSING_THREADS", 2)
    calls = []

    def fail_on_the_third(data: bytes, level: int) -> tuple[int, bytes]:
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise MemoryError("no memory left for this block")
        return compress(data, level)

    monkeypatch.setattr(packs, "compress", fail_on_the_third)
    writer = PackWriter(_backend(tmp_path))
    with pytest.raises(MemoryError, match="no memory left"):
        for data in _blobs(10):
            writer.add(blake3.blake3(data).digest(), data)
        writer.publish()
    writer.abort()
    assert os.listdir(tmp_path / "packs") == []
    assert os.listdir(tmp_path / "tmp") == []
    assert _pack_threads() == []


def test_a_create_failing_to_compress_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("first version\n")
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=tree)
    for index, data in enumerate(_blobs(6)):
        (tree / f"big{index}.bin").write_bytes(data)

    def fail(data: bytes, level: int) -> tuple[int, bytes]:
        raise MemoryError("compression failed")

    monkeypatch.setattr(packs, "compress", fail)
    with pytest.raises(MemoryError, match="compression failed"):
        store.create("s", "n", ["."], base_dir=tree)
    monkeypatch.undo()
    snapshot = SnapStore(tmp_path / "store").get("s", "n")
    assert [entry.path for entry in snapshot.entries if entry.kind == "file"] == ["a.txt"]
    assert os.listdir(tmp_path / "store" / "tmp") == []
    assert _pack_threads() == []


def test_small_blocks_compress_in_the_callers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small create closes two small blocks (its files, then its trees): handing either to
    a thread would cost more than compressing it, so no thread is started for it; a full
    block still is."""
    started = []

    class RecordingPool(packs.ThreadPoolExecutor):
        def __init__(self, *args: object, **kwargs: object) -> None:
            started.append(self)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(packs, "ThreadPoolExecutor", RecordingPool)
    tree = tmp_path / "tree"
    tree.mkdir()
    for index in range(5):
        (tree / f"f{index}.py").write_text(f"x = {index}\n" * 40)
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "small", ["."], base_dir=tree)
    assert started == []
    for index, data in enumerate(_blobs(3)):
        (tree / f"big{index}.bin").write_bytes(data)
    store.create("s", "large", ["."], base_dir=tree)
    assert len(started) == 1
    assert store.read("s", "small", "f3.py") == b"x = 3\n" * 40


def _pack_bytes(backend: LocalBackend, pack_id: str) -> bytes:
    return Path(backend.path(Handle(Kind.PACK, pack_id))).read_bytes()


def test_threads_write_the_same_pack_as_the_callers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks joined and compressed on the threads (full blocks of many small blobs, some
    given as memoryviews, and blocks of trees between them) give the very bytes and index
    the caller's thread gives alone."""
    monkeypatch.setattr(packs, "COMPRESSING_THREADS", 2)
    backend = _backend(tmp_path)
    blobs: list[tuple[bytes | memoryview, int]] = []
    for index in range(900):
        text = f"file {index}: ".encode() + b"some source text, a line of it\n" * (index % 300)
        blobs.append((memoryview(text) if index % 7 == 0 else text, KIND_DATA))
        if index % 250 == 249:
            blobs.append((f"tree {index}".encode() * 50, KIND_TREE))
    blobs.extend((data, KIND_DATA) for data in _blobs(3))
    written = {}
    for inline in (True, False):
        writer = PackWriter(backend, inline=inline)
        for data, kind in blobs:
            writer.add(blake3.blake3(data).digest(), data, kind)
        index = writer.publish()
        written[inline] = (index, _pack_bytes(backend, index.pack_id))
    (alone, alone_bytes), (threaded, threaded_bytes) = written[True], written[False]
    assert len(threaded.blocks) > 6
    assert threaded.blocks == alone.blocks
    assert threaded.entries == alone.entries
    assert threaded_bytes == alone_bytes
    assert _pack_threads() == []
