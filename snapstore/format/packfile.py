"""The pack format alone: many small blobs in one immutable object, found through an index.

A pack is a magic followed by records ``digest | size | bytes``; its index lists every
record's digest, offset and size, sorted by digest, and ends with a checksum. Byte layout:
docs/format.md, "Packs".
"""

from __future__ import annotations

import operator
import os
import struct
from dataclasses import dataclass

import blake3

from snapstore.errors import CorruptPackError

PACK_MAGIC = b"SNAPPAK\x01"
INDEX_MAGIC = b"SNAPIDX\x01"
RECORD_HEAD = struct.Struct("<32sQ")
INDEX_HEAD = struct.Struct("<8sIQ")
INDEX_ENTRY = struct.Struct("<32sQQ")
CHECKSUM_BYTES = 16
MAX_INDEX_ENTRIES = 10_000_000


def new_pack_id() -> str:
    """A fresh pack name: 32 random hex digits (two writers never pick the same one)."""
    return os.urandom(16).hex()


def is_pack_id(name: str) -> bool:
    """True for a string shaped like a pack id."""
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


@dataclass(frozen=True)
class PackIndex:
    """A decoded, validated index: where each digest's bytes lie in pack ``pack_id``."""

    pack_id: str
    pack_size: int
    entries: dict[bytes, tuple[int, int]]
    """digest -> (offset of the blob's bytes in the pack, size)."""

    @property
    def total_bytes(self) -> int:
        """The bytes of all blobs in the pack."""
        return sum(size for _, size in self.entries.values())


def _checksum(data: bytes | memoryview) -> bytes:
    return blake3.blake3(data).digest(length=CHECKSUM_BYTES)


def encode_index(entries: dict[bytes, tuple[int, int]], pack_size: int) -> bytes:
    """The index file's bytes for a pack of ``pack_size`` bytes holding ``entries``."""
    parts = [INDEX_HEAD.pack(INDEX_MAGIC, len(entries), pack_size)]
    parts.extend(
        INDEX_ENTRY.pack(digest, offset, size) for digest, (offset, size) in sorted(entries.items())
    )
    body = b"".join(parts)
    return body + _checksum(body)


def decode_index(pack_id: str, data: bytes) -> PackIndex:
    """Decode and validate an index file; raises CorruptPackError naming the pack."""

    def corrupt(why: str) -> CorruptPackError:
        return CorruptPackError(f"pack index {pack_id} is corrupt: {why}")

    if len(data) < INDEX_HEAD.size + CHECKSUM_BYTES:
        raise corrupt("it is truncated")
    magic, count, pack_size = INDEX_HEAD.unpack_from(data)
    if magic != INDEX_MAGIC:
        raise corrupt("bad magic (not a snapstore pack index, or a newer format)")
    if count > MAX_INDEX_ENTRIES:
        raise corrupt(f"it claims {count} entries")
    end = INDEX_HEAD.size + count * INDEX_ENTRY.size
    if len(data) != end + CHECKSUM_BYTES:
        raise corrupt(f"{len(data)} bytes where {count} entries need {end + CHECKSUM_BYTES}")
    view = memoryview(data)
    if _checksum(view[:end]) != data[end:]:
        raise corrupt("checksum mismatch")
    if count == 0:
        return PackIndex(pack_id, pack_size, {})
    # Checked column by column (C-level passes): an index may list tens of thousands of blobs.
    digests, offsets, sizes = zip(
        *INDEX_ENTRY.iter_unpack(view[INDEX_HEAD.size : end]), strict=True
    )
    if not all(map(operator.lt, digests, digests[1:])):
        raise corrupt("entries are not sorted by digest")
    floor = len(PACK_MAGIC) + RECORD_HEAD.size
    ends = list(map(operator.add, offsets, sizes))
    if min(offsets) < floor or max(ends) > pack_size:
        outside = next(
            d for d, o, e in zip(digests, offsets, ends, strict=True) if o < floor or e > pack_size
        )
        raise corrupt(f"blob {outside.hex()} lies outside the pack")
    return PackIndex(
        pack_id, pack_size, dict(zip(digests, zip(offsets, sizes, strict=True), strict=True))
    )
