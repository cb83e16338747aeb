"""The bytes of an encrypted store's objects and names (pure code, no I/O).

An object body is a 20-byte header (the magic ``SSE1`` and a 16-byte random salt drawn for
this object) followed by its plaintext cut in segments of ``SEGMENT_BYTES``, each sealed with
AES-256-GCM under the object's own key (the data key and the salt through keyed BLAKE3) with
the segment's number as nonce: no nonce is used twice under one key, however many objects a
store holds; 16-byte tag each. The last segment is always shorter
than a full one (possibly empty) and its associated data carries the object's name, so a
truncated object, a segment moved, or an object renamed fails to open. Other segments carry
the object's kind. Fixed-size segments let a range of a pack be read and authenticated on
its own.

Object names that carry anything of the user's (session and snapshot directory names, blob
digests, cache and journal names) are sealed with AES-SIV (deterministic, so a name maps to
one stored name and listings can be read back) and written in lowercase base32.
See docs/encryption.md.
"""

from __future__ import annotations

import base64
import binascii
import os

import blake3
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV

MAGIC = b"SSE1"
PREFIX_BYTES = 16
HEADER_BYTES = len(MAGIC) + PREFIX_BYTES
SEGMENT_BYTES = 64 << 10
TAG_BYTES = 16
SEALED_SEGMENT = SEGMENT_BYTES + TAG_BYTES
MAX_SEGMENTS = 1 << 32


class SealError(ValueError):
    """Sealed bytes failed to open: damaged, truncated, moved, or sealed under another key."""


def sub_key(master: bytes, purpose: str, length: int) -> bytes:
    """A key for one purpose, derived from the master key (BLAKE3's key derivation mode)."""
    return blake3.blake3(master, derive_key_context=f"snapstore 2026 {purpose}").digest(length)


def sealed_size(plain_size: int) -> int:
    """The stored size of an object of ``plain_size`` bytes."""
    return HEADER_BYTES + plain_size + TAG_BYTES * (plain_size // SEGMENT_BYTES + 1)


def plain_size(stored_size: int) -> int:
    """The plaintext size of a stored object of ``stored_size`` bytes (0 for a size no sealed
    object has: reading it fails)."""
    body = stored_size - HEADER_BYTES
    full, rest = divmod(body, SEALED_SEGMENT)
    if body < TAG_BYTES or rest < TAG_BYTES:
        return 0
    return full * SEGMENT_BYTES + rest - TAG_BYTES


def _nonce(number: int) -> bytes:
    if number >= MAX_SEGMENTS:
        raise SealError("object too large to seal")
    return number.to_bytes(12, "big")


def _data(kind: str, name: str, final: bool) -> bytes:
    if final:
        return b"snapstore-final\0" + kind.encode() + b"\0" + name.encode()
    return b"snapstore-part\0" + kind.encode()


class ObjectCipher:
    """Seals and opens object bodies with one data key."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._last: tuple[bytes, AESGCM] = (b"", AESGCM(key))

    def _aead(self, prefix: bytes) -> AESGCM:
        """The cipher of the object whose salt is ``prefix`` (the last one is kept: a pack's
        segments are sealed or opened one after another)."""
        last = self._last
        if last[0] == prefix:
            return last[1]
        aead = AESGCM(blake3.blake3(prefix, key=self._key).digest())
        self._last = (prefix, aead)
        return aead

    def header(self) -> tuple[bytes, bytes]:
        """A fresh object's header and its random salt."""
        prefix = os.urandom(PREFIX_BYTES)
        return MAGIC + prefix, prefix

    def seal_segment(
        self, prefix: bytes, number: int, data: bytes, kind: str, name: str, *, final: bool
    ) -> bytes:
        """Segment ``number`` of an object (``final``: its last one, shorter than a full one)."""
        return self._aead(prefix).encrypt(_nonce(number), data, _data(kind, name, final))

    def seal(self, kind: str, name: str, data: bytes | memoryview) -> bytes:
        """A whole object's stored bytes."""
        header, prefix = self.header()
        parts = [header]
        count = len(data) // SEGMENT_BYTES
        for number in range(count):
            piece = bytes(data[number * SEGMENT_BYTES : (number + 1) * SEGMENT_BYTES])
            parts.append(self.seal_segment(prefix, number, piece, kind, name, final=False))
        last = bytes(data[count * SEGMENT_BYTES :])
        parts.append(self.seal_segment(prefix, count, last, kind, name, final=True))
        return b"".join(parts)

    @staticmethod
    def prefix_of(header: bytes) -> bytes:
        """The random salt in an object's header (SealError if it is not one)."""
        if len(header) < HEADER_BYTES or header[: len(MAGIC)] != MAGIC:
            raise SealError("not an encrypted object")
        return header[len(MAGIC) : HEADER_BYTES]

    def open_segments(
        self, prefix: bytes, first: int, sealed: bytes, kind: str, name: str, *, whole: bool
    ) -> bytes:
        """The plaintext of consecutive sealed segments starting at number ``first``. A piece
        shorter than a full sealed segment is the object's last one; with ``whole``, the
        pieces run to the object's end, so the last one must be its final segment."""
        out = []
        aead = self._aead(prefix)
        for start in range(0, max(len(sealed), 1), SEALED_SEGMENT):
            piece = sealed[start : start + SEALED_SEGMENT]
            final = len(piece) < SEALED_SEGMENT
            number = first + start // SEALED_SEGMENT
            try:
                out.append(aead.decrypt(_nonce(number), piece, _data(kind, name, final)))
            except (InvalidTag, ValueError):
                raise SealError(f"segment {number} failed authentication") from None
        if whole and len(sealed) % SEALED_SEGMENT == 0:
            raise SealError("the object is truncated (its last segment is missing)")
        return b"".join(out)

    def open(self, kind: str, name: str, stored: bytes) -> bytes:
        """A whole object's plaintext (SealError if any byte of it was changed)."""
        prefix = self.prefix_of(stored)
        return self.open_segments(prefix, 0, stored[HEADER_BYTES:], kind, name, whole=True)


def segment_span(offset: int, length: int) -> tuple[int, int, int]:
    """For plaintext bytes [offset, offset+length): the first segment's number, and the
    stored offset and length of the segments holding them."""
    first = offset // SEGMENT_BYTES
    last = (offset + max(length, 1) - 1) // SEGMENT_BYTES
    return first, HEADER_BYTES + first * SEALED_SEGMENT, (last - first + 1) * SEALED_SEGMENT


class NameCipher:
    """Seals name components deterministically (AES-SIV), so they can be listed and read back."""

    def __init__(self, key: bytes, shard_key: bytes) -> None:
        self._siv = AESSIV(key)
        self._shard_key = shard_key

    def seal(self, kind: str, component: str) -> str:
        """The stored form of one name component."""
        sealed = self._siv.encrypt(component.encode(), [kind.encode()])
        return base64.b32encode(sealed).decode().rstrip("=").lower()

    def open(self, kind: str, stored: str) -> str | None:
        """The name component ``stored`` seals, or None if it seals none under this key."""
        text = stored.upper()
        try:
            sealed = base64.b32decode(text + "=" * (-len(text) % 8))
            return self._siv.decrypt(sealed, [kind.encode()]).decode()
        except (InvalidTag, ValueError, binascii.Error, UnicodeDecodeError):
            return None

    def shard(self, start: str) -> str:
        """Two hex digits standing for the first two characters of a blob's digest (a keyed
        hash: listing the blobs whose digests start with them lists one shard)."""
        return blake3.blake3(start.encode(), key=self._shard_key).hexdigest(length=1)
