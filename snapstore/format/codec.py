"""Compression of pack blocks: zstd, or the bytes as they are when zstd does not pay.

zstd was chosen by measurement on real history (docs/performance.md, "Compression"): on
blocks of a project's files it stores 2.5x less than the raw bytes at a few hundred MB/s,
and on blocks that hold the successive versions of the same files (as gc writes them) 9x
less, where zlib's 32 KiB window stops at 3-4x. A block whose compressed form saves under
1/32 of its size is stored raw, so incompressible data costs nothing to read back.
"""

from __future__ import annotations

import threading

import zstandard

from snapstore.errors import CorruptPackError

CODEC_NONE = 0
CODEC_ZSTD = 1
CODECS = (CODEC_NONE, CODEC_ZSTD)
WRITE_LEVEL = 3
"""The level of blocks written by ``create``: within the first snapshot's time budget."""
REPACK_LEVEL = 6
"""The level of blocks gc writes (it groups versions of a path; time matters less there)."""
MIN_SAVING_SHARE = 32

_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    """A compressor of ``level`` for this thread (zstd contexts are not thread-safe, and
    making one per block would cost more than small blocks take to compress)."""
    found: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if found is None:
        found = _local.compressors = {}
    compressor = found.get(level)
    if compressor is None:
        compressor = found[level] = zstandard.ZstdCompressor(level=level)
    return compressor


def compress(data: bytes, level: int = WRITE_LEVEL) -> tuple[int, bytes]:
    """(codec, stored bytes) for a block's raw bytes: zstd, unless it saves too little."""
    if len(data) < 64:
        return CODEC_NONE, data
    packed = _compressor(level).compress(data)
    if len(packed) > len(data) - len(data) // MIN_SAVING_SHARE:
        return CODEC_NONE, data
    return CODEC_ZSTD, packed


def decompress(codec: int, stored: bytes, raw_length: int, where: str) -> bytes:
    """A block's raw bytes, which must be exactly ``raw_length`` long; CorruptPackError
    (naming ``where``) for anything else. No more than ``raw_length`` bytes are ever
    allocated, whatever a damaged frame header claims."""
    if codec == CODEC_NONE:
        if len(stored) != raw_length:
            raise CorruptPackError(f"{where}: {len(stored)} bytes where {raw_length} are recorded")
        return stored
    if codec != CODEC_ZSTD:
        raise CorruptPackError(f"{where}: unknown codec {codec}")
    try:
        claimed = zstandard.frame_content_size(stored)
    except zstandard.ZstdError as error:
        raise CorruptPackError(f"{where}: bad zstd frame ({error})") from None
    if claimed != raw_length:
        raise CorruptPackError(f"{where}: its frame holds {claimed} bytes, not {raw_length}")
    try:
        data = zstandard.ZstdDecompressor().decompress(stored, max_output_size=raw_length)
    except zstandard.ZstdError as error:
        raise CorruptPackError(f"{where}: does not decompress ({error})") from None
    if len(data) != raw_length:
        raise CorruptPackError(f"{where}: decompressed to {len(data)} bytes, not {raw_length}")
    return data
