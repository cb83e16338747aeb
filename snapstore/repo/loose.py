"""The content-addressed blob store: immutable blobs named by the blake3 of their bytes.

Manifests reference blobs by digest only; where the bytes live is this module's business.
``BlobStore`` is the seam a packed or remote store implements; ``LooseBlobStore`` keeps one
read-only file per blob at ``blobs/<2 hex>/<rest of hex>``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Protocol

import blake3

from snapstore.errors import CorruptBlobError, MissingBlobError
from snapstore.fs.durable import create_temp, discard, ensure_dir
from snapstore.fs.reading import UnfitFileError, open_regular
from snapstore.fs.seam import FileSystem

CHUNK_BYTES = 1 << 20
PARALLEL_HASH_BYTES = 8 << 20


def new_hasher(size_hint: int = 0) -> blake3.blake3:
    """A blake3 hasher; multi-threaded for large inputs, where it pays."""
    if size_hint >= PARALLEL_HASH_BYTES:
        return blake3.blake3(max_threads=blake3.blake3.AUTO)
    return blake3.blake3()


class BlobStore(Protocol):
    """Where blob bytes live, behind one interface (loose files today, packs later)."""

    def has(self, digest: bytes) -> bool:
        """True if the blob is stored (and has the size its name promises, where known)."""
        ...

    def writer(self, size_hint: int = 0) -> BlobWriter:
        """Start staging a new blob; bytes are hashed as they are written."""
        ...

    def put_bytes(self, data: bytes) -> bytes:
        """Store ``data`` and return its digest."""
        ...

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        """Yield a blob's bytes; raises CorruptBlobError at the end if they do not hash right
        (or at once if the stored copy is not ``size`` bytes, when given)."""
        ...

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        """A blob's verified bytes."""
        ...

    def iter_digests(self) -> Iterator[bytes]:
        """Every stored blob's digest."""
        ...

    def size(self, digest: bytes) -> int:
        """A stored blob's size in bytes."""
        ...

    def sync(self) -> None:
        """Make every blob published so far durable (directory entries included)."""
        ...


class BlobWriter:
    """Stages one blob in ``tmp/`` while hashing it; ``commit`` publishes it under its digest."""

    def __init__(self, store: LooseBlobStore, size_hint: int) -> None:
        self._store = store
        self._fd, self._temp_path = create_temp(store.fs, store.tmp_dir)
        self._hasher = new_hasher(size_hint)
        self.size = 0
        self._closed = False

    def write(self, data: bytes | memoryview) -> None:
        """Append bytes to the staged blob."""
        self._store.fs.write(self._fd, data)
        self._hasher.update(data)
        self.size += len(data)

    def digest(self) -> bytes:
        """The digest of the bytes written so far."""
        return self._hasher.digest()

    def reset(self) -> None:
        """Start over (the source changed under us): empty the temp file and the hash."""
        self._store.fs.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self._hasher = new_hasher(self.size)
        self.size = 0

    def commit(self) -> bytes:
        """Publish the staged bytes as a blob (or drop them if it exists); returns the digest."""
        digest = self.digest()
        store = self._store
        try:
            if store.has(digest, expected_size=self.size):
                self.abort()
                store.reuse(digest)
                return digest
            store.fs.fchmod(self._fd, 0o444)
            if store.durable:
                store.fs.fsync(self._fd)
            self._close()
            store.publish(self._temp_path, digest)
        except BaseException:
            self.abort()
            raise
        return digest

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store.fs.close(self._fd)

    def abort(self) -> None:
        """Drop the staged bytes."""
        with contextlib.suppress(OSError):
            self._close()
        discard(self._store.fs, self._temp_path)


class LooseBlobStore:
    """One read-only file per blob under ``blobs/``."""

    def __init__(self, blobs_dir: str, tmp_dir: str, fs: FileSystem, *, durable: bool) -> None:
        self.blobs_dir = blobs_dir
        self.tmp_dir = tmp_dir
        self.fs = fs
        self.durable = durable
        self._local = threading.local()

    @property
    def _unsynced_dirs(self) -> set[str]:
        """Shard directories this thread renamed blobs into since its last ``sync``: per
        thread, so one thread's commit never counts on another thread's flush."""
        dirs: set[str] | None = getattr(self._local, "dirs", None)
        if dirs is None:
            dirs = self._local.dirs = set()
        return dirs

    def path(self, digest: bytes) -> str:
        """Where a blob's file lives."""
        hex_digest = digest.hex()
        return os.path.join(self.blobs_dir, hex_digest[:2], hex_digest[2:])

    def has(self, digest: bytes, expected_size: int | None = None) -> bool:
        """True if the blob file exists (with the expected size, when given)."""
        try:
            stored = os.stat(self.path(digest)).st_size
        except FileNotFoundError:
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

    def publish(self, temp_path: str, digest: bytes) -> None:
        """Rename a fully written, flushed temp file into place as the blob ``digest``."""
        final = self.path(digest)
        shard = os.path.dirname(final)
        if not os.path.isdir(shard):
            ensure_dir(self.fs, shard, stop_at=self.blobs_dir, durable=self.durable)
        self.fs.replace(temp_path, final)
        self._unsynced_dirs.add(shard)

    def reuse(self, digest: bytes) -> None:
        """Count on an existing blob: its writer may not have flushed its name yet (it may be
        running, or have died before its commit), so the next ``sync`` flushes it too."""
        self._unsynced_dirs.add(os.path.dirname(self.path(digest)))

    def sync(self) -> None:
        """Flush the directories blobs were renamed into (or reused from) since the last sync,
        and ``blobs/`` itself, whose shard entries a dead writer may have left unflushed."""
        if self.durable:
            if self._unsynced_dirs:
                self.fs.fsync_dir(self.blobs_dir)
            while self._unsynced_dirs:
                shard = self._unsynced_dirs.pop()
                try:
                    self.fs.fsync_dir(shard)
                except BaseException:
                    self._unsynced_dirs.add(shard)
                    raise
        else:
            self._unsynced_dirs.clear()

    def _open(self, digest: bytes) -> int:
        try:
            return open_regular(self.path(digest))
        except FileNotFoundError:
            raise MissingBlobError(f"blob {digest.hex()} is missing from the store") from None
        except UnfitFileError as error:
            raise CorruptBlobError(f"blob {digest.hex()} is corrupt: {error}") from None

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        """Yield the blob's bytes; the last step checks them against the digest. A file
        that is not ``size`` bytes (when given) is corrupt, found before reading it."""
        fd = self._open(digest)
        try:
            stored = os.fstat(fd).st_size
            if size is not None and stored != size:
                raise CorruptBlobError(
                    f"blob {digest.hex()} is corrupt: {stored} bytes where {size} are recorded"
                )
            hasher = new_hasher(stored)
            while chunk := os.read(fd, CHUNK_BYTES):
                hasher.update(chunk)
                yield chunk
        finally:
            os.close(fd)
        if hasher.digest() != digest:
            raise CorruptBlobError(f"blob {digest.hex()} is corrupt: its bytes hash differently")

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        """The blob's bytes, verified against its digest."""
        return b"".join(self.chunks(digest, size))

    def size(self, digest: bytes) -> int:
        """The blob's size on disk."""
        try:
            return os.stat(self.path(digest)).st_size
        except FileNotFoundError:
            raise MissingBlobError(f"blob {digest.hex()} is missing from the store") from None

    def iter_digests(self) -> Iterator[bytes]:
        """Every blob file that is named like a digest (anything else is not a blob)."""
        try:
            shards = sorted(os.listdir(self.blobs_dir))
        except FileNotFoundError:
            return
        for shard in shards:
            shard_path = os.path.join(self.blobs_dir, shard)
            if len(shard) != 2 or not os.path.isdir(shard_path):
                continue
            for rest in sorted(os.listdir(shard_path)):
                with contextlib.suppress(ValueError):
                    digest = bytes.fromhex(shard + rest)
                    if len(digest) == 32:
                        yield digest

    def delete(self, digest: bytes) -> int:
        """Remove a blob file; returns the bytes freed."""
        path = self.path(digest)
        size = os.stat(path).st_size
        self.fs.unlink(path)
        return size
