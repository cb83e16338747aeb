"""Loose blobs: one immutable object per blob, named by the BLAKE3 digest of its bytes.

Blobs of 16 MiB and over are stored this way (smaller ones go into packs; stores written by
older versions also hold small loose blobs, which gc moves into packs). ``BlobSource`` is
what a reader of blobs needs, whoever holds them (``blobs.Blobs`` looks in packs first, then
here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.errors import CorruptBlobError, MissingBlobError
from snapstore.format.hashing import CHUNK_BYTES, new_hasher
from snapstore.fs.reading import UnfitFileError


class BlobSource(Protocol):
    """Where a reader gets a blob's verified bytes by digest."""

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        """Yield a blob's bytes; raises CorruptBlobError at the end if they do not hash right
        (or at once if the stored copy is not ``size`` bytes, when given)."""
        ...

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        """A blob's verified bytes."""
        ...

    def size(self, digest: bytes) -> int:
        """A stored blob's size in bytes; MissingBlobError if it is not stored."""
        ...


class BlobWriter:
    """Stages one blob while hashing it; ``commit`` publishes it under its digest."""

    def __init__(self, loose: LooseBlobs, size_hint: int) -> None:
        self._loose = loose
        self._staged = loose.backend.stage(Kind.BLOB, size_hint)
        self._hasher = new_hasher(size_hint)
        self.published = False
        """Whether ``commit`` published the bytes as a new blob (not: found it stored)."""

    @property
    def size(self) -> int:
        """How many bytes were written."""
        return self._staged.size

    def write(self, data: bytes | memoryview) -> None:
        """Append bytes to the staged blob."""
        self._staged.write(data)
        self._hasher.update(data)

    def digest(self) -> bytes:
        """The digest of the bytes written so far."""
        return self._hasher.digest()

    def reset(self) -> None:
        """Start over (the source changed under us): empty the staged bytes and the hash."""
        self._hasher = new_hasher(self.size)
        self._staged.restart()

    def commit(self) -> bytes:
        """Publish the staged bytes as a blob (or drop them if it exists); returns the digest.
        Its name becomes durable at the backend's next ``flush``."""
        digest = self.digest()
        loose = self._loose
        try:
            if loose.has(digest, expected_size=self.size):
                self.abort()
                loose.reuse(digest)
                return digest
            self._staged.commit(digest.hex())
            self.published = True
        except BaseException:
            self.abort()
            raise
        return digest

    def abort(self) -> None:
        """Drop the staged bytes."""
        self._staged.abort()


class LooseBlobs:
    """The loose blobs of one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @staticmethod
    def handle(digest: bytes) -> Handle:
        """The object holding a loose blob."""
        return Handle(Kind.BLOB, digest.hex())

    def path(self, digest: bytes) -> str:
        """Where a blob's object lives, for people (the local backend: its path)."""
        return self.backend.describe(self.handle(digest))

    def has(self, digest: bytes, expected_size: int | None = None) -> bool:
        """True if the blob's object exists (with the expected size, when given)."""
        try:
            stored = self.backend.stat(self.handle(digest)).size
        except (FileNotFoundError, NotADirectoryError, UnfitFileError):
            return False
        return expected_size is None or stored == expected_size

    def writer(self, size_hint: int = 0) -> BlobWriter:
        """Start staging a new blob."""
        return BlobWriter(self, size_hint)

    def put_bytes(self, data: bytes) -> bytes:
        """Store ``data`` as a blob and return its digest."""
        writer = self.writer(len(data))
        try:
            writer.write(data)
        except BaseException:
            writer.abort()
            raise
        return writer.commit()

    def reuse(self, digest: bytes) -> None:
        """Count on an existing blob: its writer may not have flushed its name yet (it may be
        running, or have died before its commit), so the next ``sync`` flushes it too."""
        self.backend.note_existing(self.handle(digest))

    def sync(self) -> None:
        """Make the names of the blobs published (or reused) by this thread durable."""
        self.backend.flush()

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        """Yield the blob's bytes; the last step checks them against the digest. An object
        that is not ``size`` bytes (when given) is corrupt, found before reading it."""
        handle = self.handle(digest)
        try:
            stored = self.backend.stat(handle).size
        except (FileNotFoundError, NotADirectoryError):
            raise MissingBlobError(f"blob {digest.hex()} is missing from the store") from None
        except UnfitFileError as error:
            raise CorruptBlobError(f"blob {digest.hex()} is corrupt: {error}") from None
        if size is not None and stored != size:
            raise CorruptBlobError(
                f"blob {digest.hex()} is corrupt: {stored} bytes where {size} are recorded"
            )
        hasher = new_hasher(stored)
        try:
            for chunk in self.backend.chunks(handle, CHUNK_BYTES):
                hasher.update(chunk)
                yield chunk
        except FileNotFoundError:
            raise MissingBlobError(f"blob {digest.hex()} is missing from the store") from None
        except UnfitFileError as error:
            raise CorruptBlobError(f"blob {digest.hex()} is corrupt: {error}") from None
        if hasher.digest() != digest:
            raise CorruptBlobError(f"blob {digest.hex()} is corrupt: its bytes hash differently")

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        """The blob's bytes, verified against its digest."""
        return b"".join(self.chunks(digest, size))

    def size(self, digest: bytes) -> int:
        """The blob's size."""
        try:
            return self.backend.stat(self.handle(digest)).size
        except FileNotFoundError:
            raise MissingBlobError(f"blob {digest.hex()} is missing from the store") from None

    def iter_digests(self) -> Iterator[bytes]:
        """Every loose blob named like a digest (anything else is not a blob)."""
        for name in self.backend.names(Kind.BLOB):
            with contextlib.suppress(ValueError):
                digest = bytes.fromhex(name)
                if len(digest) == 32:
                    yield digest

    def delete(self, digest: bytes) -> int:
        """Remove an unreferenced blob (gc); returns the bytes freed. Not flushed: a blob
        that comes back after a crash is only garbage again."""
        handle = self.handle(digest)
        size = self.backend.stat(handle).size
        self.backend.delete(handle, durable=False)
        return size
