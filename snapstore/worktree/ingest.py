"""Copy a source file into the blob store, storing exactly the bytes that were hashed.

A file that changes while it is read (its size, mtime or inode moves between the stat before
and the stat after) is read again, a bounded number of times, so a snapshot never records a
torn mix of two versions under one digest's metadata. The stat alone cannot show a change
made within one timestamp tick of the previous one (a tick is a second on some filesystems),
so a file modified within ``RACY_NS`` of the scan is read twice and kept only if both reads
agree. Small files are read whole and handed to the create's batch (which packs them). A file
of ``CHUNKED_FROM_BYTES`` or more is cut into content-defined chunks, the pieces of a chunked
map (``snapstore.fs.chunking``), streaming; a smaller file with holes is read only where it
holds data, into the pieces of an extent map (``snapstore.fs.sparse``). Either way each piece
is a blob of its own, packed, so what did not change since an earlier snapshot is not stored
again.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple, Protocol

import blake3

from snapstore.errors import ExtentMapTooLargeError, SourceChangedError, UnreadablePathError
from snapstore.format.extents import (
    CHUNK_PARAMS,
    CHUNKED_FROM_BYTES,
    MAX_MAP_BYTES,
    Extent,
    encode_chunked_map,
    encode_map,
    map_digest,
)
from snapstore.format.hashing import CHUNK_BYTES, new_hasher
from snapstore.fs.chunking import read_chunks
from snapstore.fs.sparse import has_holes, may_have_holes, read_pieces
from snapstore.fs.stamps import version
from snapstore.repo.batch import is_small
from snapstore.repo.blobs import Blobs
from snapstore.repo.loose import BlobWriter

MAX_READ_ATTEMPTS = 3
_SOURCE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class BlobSink(Protocol):
    """Where ``ingest_file`` stores what it reads: a create's ``BlobBatch``, or the
    ``RecordedAdds`` of a file read on another thread (``snapstore.worktree.ingestscan``)."""

    @property
    def storage(self) -> Blobs: ...

    def add(self, digest: bytes, data: bytes, kind: int = 0, *, alone: bool = False) -> None: ...

    def add_counted(self, digest: bytes, data: bytes, *, alone: bool = False) -> None: ...

    def commit_loose(self, writer: BlobWriter) -> bytes: ...


class IngestedFile(NamedTuple):
    """A source file's stored digest and the metadata of the exact version stored (a named
    tuple: one is made per file read, and a frozen dataclass costs several times more)."""

    digest: bytes
    size: int
    mode: int
    mtime_ns: int
    stat: os.stat_result
    extents: bool = False
    """The digest names the file's extent map (it has holes, or is large enough to be
    chunked), not its bytes."""


def is_chunked(size: int) -> bool:
    """Whether a regular file of ``size`` bytes is stored as chunks, whatever else it is."""
    return size >= CHUNKED_FROM_BYTES


def _changed(path: str) -> SourceChangedError:
    return SourceChangedError(
        f"{path!r} kept changing while it was read ({MAX_READ_ATTEMPTS} attempts)"
    )


def ingest_file(
    batch: BlobSink,
    path: str,
    scanned: os.stat_result | None = None,
    *,
    racy_from_ns: int | None = None,
    dir_fd: int | None = None,
) -> IngestedFile:
    """Store ``path``'s bytes through ``batch``; raises SourceChangedError if it never holds
    still, UnreadablePathError if it is no longer a regular file, OSError if it cannot be read.
    With ``dir_fd`` (its directory, checked to be the one the scan listed), the file is
    opened by name in that directory, so no directory on the way can lead elsewhere.

    ``scanned``, the lstat the scan found the file with, serves as the stat before the read
    (saving a syscall per file): any change since then shows in the stat after the read. A
    file whose mtime or ctime is at or after ``racy_from_ns`` (default: any) is read twice.
    The file is opened without blocking, so one swapped for a FIFO never hangs the create.
    """
    fd = open_source(path, dir_fd)
    try:
        opened = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    return ingest_opened(batch, fd, path, opened, scanned, racy_from_ns=racy_from_ns)


def open_source(path: str, dir_fd: int | None = None) -> int:
    """A descriptor of the source file ``path`` (by its name in ``dir_fd`` if given), opened
    without following a symlink and without blocking; UnreadablePathError if it has become a
    symlink, OSError if it cannot be opened."""
    try:
        if dir_fd is None:
            return os.open(path, _SOURCE_FLAGS)
        return os.open(path[path.rfind(os.sep) + 1 :], _SOURCE_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnreadablePathError(f"{path!r} became a symlink while it was read") from None
        raise


def ingest_opened(
    batch: BlobSink,
    fd: int,
    path: str,
    opened: os.stat_result,
    scanned: os.stat_result | None = None,
    *,
    racy_from_ns: int | None = None,
) -> IngestedFile:
    """``ingest_file`` of a file already opened (``open_source``) as ``fd``, whose fstat is
    ``opened``; closes ``fd``. Without ``scanned`` (a scan that listed the file without its
    lstat), ``opened`` is the stat before the read."""
    try:
        if not stat.S_ISREG(opened.st_mode):
            raise UnreadablePathError(f"{path!r} is no longer a regular file")
        before = scanned if scanned is not None else opened
        racy = -1 if racy_from_ns is None else racy_from_ns
        size = before.st_size  # most files: small, no holes; one blob read whole
        if size < CHUNKED_FROM_BYTES and is_small(size) and not may_have_holes(opened):
            stored = _ingest_small(batch, fd, path, before, racy, MAX_READ_ATTEMPTS)
        else:
            stored = _ingest_as_seen(batch, fd, path, before, racy, MAX_READ_ATTEMPTS, opened)
    finally:
        os.close(fd)
    digest, after, extents = stored
    mode = after.st_mode & 0o7777
    return IngestedFile._make((digest, after.st_size, mode, after.st_mtime_ns, after, extents))


_Stored = tuple[bytes, os.stat_result, bool]
"""A stored file's digest, the stat of the version stored, and whether the digest names an
extent map."""


def _as_extents(fd: int, info: os.stat_result, opened: os.stat_result | None = None) -> bool:
    """Whether the file, as ``info`` shows it, is stored as an extent map: chunked if it is
    large enough, else fixed-cut if it has holes (probed with ``opened``, default ``info``)."""
    return info.st_size >= CHUNKED_FROM_BYTES or has_holes(fd, opened or info)


def _ingest_as_seen(
    batch: BlobSink,
    fd: int,
    path: str,
    before: os.stat_result,
    racy_from_ns: int,
    attempts: int,
    opened: os.stat_result | None = None,
) -> _Stored:
    """Store the file the way that fits it as ``before`` shows it (an extent map, one blob
    read whole, or one blob streamed), in at most ``attempts`` reads. A read attempt that
    finds the file changed so that another way fits hands the attempts left back here, so
    the way always fits the version that is stored."""
    if _as_extents(fd, before, opened):
        return _ingest_extents(batch, fd, path, before, racy_from_ns, attempts)
    if is_small(before.st_size):
        return _ingest_small(batch, fd, path, before, racy_from_ns, attempts)
    return _ingest_large(batch, fd, path, before, racy_from_ns, attempts)


def _read_from_start(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the file's start; fewer only if it ends sooner. One
    ``pread`` for nearly every file; more only after a short read."""
    first = os.pread(fd, size, 0) if size > 0 else b""
    if len(first) >= size or not first:
        return first
    parts = [first]
    offset = len(first)
    while offset < size and (chunk := os.pread(fd, size - offset, offset)):
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _is_racy(info: os.stat_result, racy_from_ns: int) -> bool:
    """True if the file changed so recently that a later change could leave its stat as is."""
    return max(info.st_mtime_ns, info.st_ctime_ns) >= racy_from_ns


def _ingest_small(
    batch: BlobSink,
    fd: int,
    path: str,
    before: os.stat_result,
    racy_from_ns: int,
    attempts: int,
) -> _Stored:
    for attempt in range(attempts):
        if attempt:
            before = os.fstat(fd)
            if _as_extents(fd, before) or not is_small(before.st_size):
                return _ingest_as_seen(batch, fd, path, before, racy_from_ns, attempts - attempt)
        data = _read_from_start(fd, before.st_size)
        after = os.fstat(fd)
        if version(before) != version(after) or len(data) != after.st_size:
            continue
        if _is_racy(after, racy_from_ns):
            again = _read_from_start(fd, after.st_size + 1)  # one more: growth shows too
            if again != data or version(after) != version(os.fstat(fd)):
                continue
        break
    else:
        raise _changed(path)
    digest = blake3.blake3(data).digest()
    batch.add(digest, data)
    return digest, after, False


def _rehash(fd: int, size: int) -> bytes | None:
    """The digest of the file's first ``size`` bytes, or None if it is not ``size`` long."""
    hasher = new_hasher(size)
    offset = 0
    while chunk := os.pread(fd, CHUNK_BYTES, offset):
        hasher.update(chunk)
        offset += len(chunk)
    return hasher.digest() if offset == size else None


def _ingest_large(
    batch: BlobSink,
    fd: int,
    path: str,
    before: os.stat_result,
    racy_from_ns: int,
    attempts: int,
) -> _Stored:
    writer = batch.storage.writer(before.st_size)
    left = 0
    try:
        for attempt in range(attempts):
            if attempt:
                writer.reset()
                os.lseek(fd, 0, os.SEEK_SET)
                before = os.fstat(fd)
                if _as_extents(fd, before):
                    left = attempts - attempt
                    break
            while chunk := os.read(fd, CHUNK_BYTES):
                writer.write(chunk)
            after = os.fstat(fd)
            if version(before) != version(after) or writer.size != after.st_size:
                continue
            if _is_racy(after, racy_from_ns):
                digest = writer.digest()
                if _rehash(fd, after.st_size) != digest or version(after) != version(os.fstat(fd)):
                    continue
            break
        else:
            raise _changed(path)
    except BaseException:
        writer.abort()
        raise
    if left:
        writer.abort()
        return _ingest_as_seen(batch, fd, path, before, racy_from_ns, left)
    return batch.commit_loose(writer), after, False


def _extent_map(batch: BlobSink | None, fd: int, size: int, chunked: bool) -> bytes:
    """The extent map (``chunked``: the chunked map) of the file's first ``size`` bytes, its
    pieces stored through ``batch`` (None: only hashed)."""
    extents = []
    found = read_chunks(fd, size, CHUNK_PARAMS) if chunked else read_pieces(fd, size)
    for offset, data in found:
        digest = blake3.blake3(data).digest()
        if batch is not None:
            batch.add_counted(digest, data)
        extents.append(Extent(offset, len(data), digest))
    if chunked:
        return encode_chunked_map(size, extents, CHUNK_PARAMS)
    return encode_map(size, extents)


def _ingest_extents(
    batch: BlobSink,
    fd: int,
    path: str,
    before: os.stat_result,
    racy_from_ns: int,
    attempts: int,
) -> _Stored:
    """Store a file with holes, or a large file (chunked), as the pieces of its extent map,
    then the map; the map's digest is the file's. Read again, as any file, while it changes
    (a version that has become small and whole again is stored as one blob). A map too large
    for a reader to accept (``MAX_MAP_BYTES``) is never stored: ExtentMapTooLargeError."""
    for attempt in range(attempts):
        if attempt:
            before = os.fstat(fd)
            if not _as_extents(fd, before):
                return _ingest_as_seen(batch, fd, path, before, racy_from_ns, attempts - attempt)
        chunked = before.st_size >= CHUNKED_FROM_BYTES
        data = _extent_map(batch, fd, before.st_size, chunked)
        after = os.fstat(fd)
        if version(before) != version(after):
            continue
        if _is_racy(after, racy_from_ns) and (
            _extent_map(None, fd, after.st_size, chunked) != data
            or version(after) != version(os.fstat(fd))
        ):
            continue
        break
    else:
        raise _changed(path)
    if len(data) > MAX_MAP_BYTES:
        raise ExtentMapTooLargeError(
            f"cannot snapshot {path!r}: its {after.st_size} bytes need an extent map of "
            f"{len(data)} bytes, over the {MAX_MAP_BYTES} a reader accepts (too many pieces)"
        )
    digest = map_digest(data)
    batch.add_counted(digest, data, alone=True)
    return digest, after, True
