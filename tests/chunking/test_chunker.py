"""The streaming cutter: the same chunks as FastCDC over the whole run in memory, runs of data
cut apart at holes, and a work-tree file compared with either kind of extent map."""

from __future__ import annotations

import os
import random
from pathlib import Path

import blake3
import pyfastcdc

from snapstore.format.extents import CHUNK_PARAMS, ChunkParams
from snapstore.fs.chunking import chunked_digest, holds_map, read_chunks
from snapstore.fs.sparse import extents_digest

MIB = 1 << 20


def _cuts(data: bytes, params: ChunkParams) -> list[tuple[int, int]]:
    cutter = pyfastcdc.FastCDC(params.avg, min_size=params.min, max_size=params.max)
    return [(chunk.offset, chunk.length) for chunk in cutter.cut_buf(data)]


def _chunks_of(path: Path, params: ChunkParams = CHUNK_PARAMS) -> list[tuple[int, bytes]]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(read_chunks(fd, os.fstat(fd).st_size, params))
    finally:
        os.close(fd)


def test_streamed_chunks_are_those_of_the_whole_run(tmp_path: Path) -> None:
    small = ChunkParams(4096, 16384, 65536)  # many refills of the cutter's buffer
    data = random.Random(3).randbytes(3 * MIB + 12345)
    path = tmp_path / "f"
    path.write_bytes(data)
    found = _chunks_of(path, small)
    assert [(offset, len(chunk)) for offset, chunk in found] == _cuts(data, small)
    assert b"".join(chunk for _, chunk in found) == data


def test_holes_split_runs_and_are_never_chunks(tmp_path: Path) -> None:
    first = random.Random(4).randbytes(MIB + 5000)
    second = random.Random(5).randbytes(700_000)
    path = tmp_path / "sparse"
    with open(path, "wb") as handle:
        handle.truncate(16 * MIB)
        handle.write(first)
        handle.seek(9 * MIB)
        handle.write(second)
    found = _chunks_of(path)
    assert found[0][0] == 0 and next(o for o, _ in found if o >= 9 * MIB) == 9 * MIB
    by_run = [c for o, c in found if o < 9 * MIB], [c for o, c in found if o >= 9 * MIB]
    # the first run ends at the last non-zero 4096-byte block of ``first``
    assert b"".join(by_run[0]).rstrip(b"\0") == first.rstrip(b"\0")
    assert b"".join(by_run[1]) == second + bytes(-len(second) % 4096)
    assert [(o, len(c)) for o, c in found if o >= 9 * MIB] == [
        (9 * MIB + o, n) for o, n in _cuts(b"".join(by_run[1]), CHUNK_PARAMS)
    ]


def test_a_file_is_compared_with_a_map_of_either_kind(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(random.Random(6).randbytes(2 * MIB))
    fd = os.open(path, os.O_RDONLY)
    try:
        chunked, fixed = chunked_digest(fd, 2 * MIB), extents_digest(fd, 2 * MIB)
        assert chunked != fixed
        assert holds_map(fd, 2 * MIB, chunked) and holds_map(fd, 2 * MIB, fixed)
        assert not holds_map(fd, 2 * MIB, bytes(32))
    finally:
        os.close(fd)


PINNED_INPUT_DIGEST = "2719cc0431bb3dda"
PINNED_CUTS = [
    (0, 307567),
    (307567, 131269),
    (438836, 610365),
    (1049201, 493249),
    (1542450, 347489),
    (1889939, 471255),
    (2361194, 262306),
    (2623500, 183939),
    (2807439, 338289),
]


def test_the_cuts_of_a_fixed_input_never_change(tmp_path: Path) -> None:
    """Chunks are deduplicated by digest across snapshots and sessions, so every release must
    cut the same bytes at the same offsets: a chunker (or ``pyfastcdc`` release) that moved
    these cuts would silently store every large file again."""
    data = random.Random(20261201).randbytes(3 * MIB)
    assert blake3.blake3(data).hexdigest()[:16] == PINNED_INPUT_DIGEST  # the input itself
    path = tmp_path / "fixed.bin"
    path.write_bytes(data)
    assert ChunkParams(64 * 1024, 256 * 1024, MIB) == CHUNK_PARAMS
    assert [(offset, len(chunk)) for offset, chunk in _chunks_of(path)] == PINNED_CUTS
    assert _cuts(data, CHUNK_PARAMS) == PINNED_CUTS
