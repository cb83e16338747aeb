"""The envelope of the store's small self-checking files (caches, journals): an 8-byte magic,
the BLAKE3 (16-byte output) of the body, then the msgpack body. A file that is torn, damaged
or of another kind (another magic) opens as None."""

from __future__ import annotations

from typing import Any

import blake3
import msgpack

CHECKSUM_BYTES = 16


def seal(magic: bytes, value: Any) -> bytes:
    """``value`` msgpack-encoded, in an envelope of kind ``magic``."""
    body = msgpack.packb(value, use_bin_type=True)
    assert isinstance(body, bytes)
    return magic + blake3.blake3(body).digest(length=CHECKSUM_BYTES) + body


def unseal(magic: bytes, data: bytes) -> Any:
    """The value in an envelope of kind ``magic``, or None if it is not one, or damaged."""
    head = len(magic) + CHECKSUM_BYTES
    if len(data) < head or data[: len(magic)] != magic:
        return None
    body = memoryview(data)[head:]  # no copy: a header cache is megabytes
    if blake3.blake3(body).digest(length=CHECKSUM_BYTES) != data[len(magic) : head]:
        return None
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception:  # any undecodable body is only damage
        return None
