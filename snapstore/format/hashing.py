"""The content hash of snapstore's addresses (BLAKE3) and the read size its hashing loops use."""

from __future__ import annotations

import blake3

CHUNK_BYTES = 1 << 20
PARALLEL_HASH_BYTES = 8 << 20


def new_hasher(size_hint: int = 0) -> blake3.blake3:
    """A blake3 hasher; multi-threaded for large inputs, where it pays."""
    if size_hint >= PARALLEL_HASH_BYTES:
        return blake3.blake3(max_threads=blake3.blake3.AUTO)
    return blake3.blake3()
