"""A chunk of a large file that is missing or corrupt: verify finds it (shallow and deep as
each can), a restore refuses the file and leaves the target as it was, and a reader never
serves it. A chunked map that breaks the format's rules is refused as corrupt."""

from __future__ import annotations

import random
from pathlib import Path

import msgpack
import pytest
from helpers.blobs import corrupt_blob, remove_blob

from snapstore import SnapStore
from snapstore.errors import CorruptBlobError, MissingBlobError, RestoreError
from snapstore.format.extents import (
    CHUNKED_MAGIC,
    MAX_CHUNK_BYTES,
    CorruptExtentMapError,
    decode_map,
)
from snapstore.internals import repository
from snapstore.repo.contents import load_map

MIB = 1 << 20


def _stored_chunk(store: SnapStore, tmp_path: Path) -> tuple[Path, bytes, bytes]:
    """A project whose 6 MiB file is snapshotted as ``v1`` and then changed on disk; the
    project, its current bytes and the digest of one chunk of ``v1``'s file (a chunk the
    current file does not share)."""
    base = tmp_path / "project"
    base.mkdir()
    data = random.Random(1).randbytes(6 * MIB)
    (base / "big.bin").write_bytes(data)
    store.create("s", "v1", ["."], base_dir=base)
    entry = store.get("s", "v1").entry("big.bin")
    assert entry is not None and entry.digest is not None
    extents = load_map(repository(store).blobs, entry.digest, entry.size)
    current = random.Random(2).randbytes(6 * MIB)
    (base / "big.bin").write_bytes(current)
    return base, current, extents[len(extents) // 2].digest


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_verify_finds_a_damaged_chunk_and_restore_refuses_it(
    store: SnapStore, tmp_path: Path, damage: str
) -> None:
    base, current, chunk = _stored_chunk(store, tmp_path)
    if damage == "missing":
        remove_blob(store, chunk)
        assert not store.verify(deep=False).ok
    else:
        corrupt_blob(store, chunk)
    report = store.verify(deep=True)
    assert not report.ok and any(chunk.hex() in problem for problem in report.problems)

    with pytest.raises((MissingBlobError, CorruptBlobError)):
        store.read("s", "v1", "big.bin")
    with pytest.raises((RestoreError, MissingBlobError, CorruptBlobError)):
        store.restore("s", "v1", base)
    assert (base / "big.bin").read_bytes() == current
    assert sorted(p.name for p in base.iterdir()) == ["big.bin"]  # no temp file left


@pytest.mark.parametrize(
    "body",
    [
        [10, [[0, 10, b"d" * 32]]],  # no parameters
        [10, [[0, 10, b"d" * 32]], [0, 4, 8]],  # a zero bound
        [10, [[0, 10, b"d" * 32]], [8, 4, 16]],  # min above avg
        [10, [[0, 10, b"d" * 32]], [1, 2, MAX_CHUNK_BYTES + 1]],  # max over the bound
        [10, [[0, 10, b"d" * 32]], [1, 2, True]],  # not an integer
        [MAX_CHUNK_BYTES + 2, [[0, MAX_CHUNK_BYTES + 1, b"d" * 32]], [1, 2, 3]],
        [10, [[0, 10, b"d" * 32]], [1, 2, 3], "more"],
    ],
)
def test_a_chunked_map_that_breaks_the_rules_is_corrupt(body: list[object]) -> None:
    data = CHUNKED_MAGIC + msgpack.packb(body, use_bin_type=True)
    with pytest.raises(CorruptExtentMapError):
        decode_map(data, body[0])  # type: ignore[arg-type]
