"""Copy a source file into the blob store, storing exactly the bytes that were hashed.

A file that changes while it is read (its size, mtime or inode moves between the stat before
and the stat after) is read again, a bounded number of times, so a snapshot never records a
torn mix of two versions under one digest's metadata. Small files are read whole and handed
to the create's batch (which packs them); large ones stream into a loose blob.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

import blake3

from snapstore.batch import BlobBatch, is_small
from snapstore.blobs import CHUNK_BYTES
from snapstore.errors import SourceChangedError
from snapstore.manifest import EntryRow
from snapstore.models import SkippedPath
from snapstore.scan import ScanResult, sorted_rows
from snapstore.statcache import StatCache

MAX_READ_ATTEMPTS = 3


@dataclass(frozen=True)
class IngestedFile:
    """A source file's stored digest and the metadata of the exact version stored."""

    digest: bytes
    size: int
    mode: int
    mtime_ns: int
    stat: os.stat_result


def _same_version(before: os.stat_result, after: os.stat_result) -> bool:
    return (
        before.st_ino == after.st_ino
        and before.st_size == after.st_size
        and before.st_mtime_ns == after.st_mtime_ns
        and before.st_ctime_ns == after.st_ctime_ns
        and before.st_dev == after.st_dev
    )


def _changed(path: str) -> SourceChangedError:
    return SourceChangedError(
        f"{path!r} kept changing while it was read ({MAX_READ_ATTEMPTS} attempts)"
    )


def ingest_file(batch: BlobBatch, path: str, scanned: os.stat_result | None = None) -> IngestedFile:
    """Store ``path``'s bytes through ``batch``; raises SourceChangedError if it never holds
    still, OSError if it cannot be read.

    ``scanned``, the lstat the scan found the file with, serves as the stat before the read
    (saving a syscall per file): any change since then shows in the stat after the read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        before = scanned if scanned is not None else os.fstat(fd)
        if is_small(before.st_size):
            digest, after = _ingest_small(batch, fd, path, before)
        else:
            digest, after = _ingest_large(batch, fd, path, before)
    finally:
        os.close(fd)
    return IngestedFile(digest, after.st_size, after.st_mode & 0o7777, after.st_mtime_ns, after)


def _read_exactly(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the start; fewer only if the file ends sooner. A file that
    grew shows in the stat after the read."""
    parts = []
    remaining = size
    while remaining > 0 and (chunk := os.read(fd, remaining)):
        parts.append(chunk)
        remaining -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _ingest_small(
    batch: BlobBatch, fd: int, path: str, before: os.stat_result
) -> tuple[bytes, os.stat_result]:
    for attempt in range(MAX_READ_ATTEMPTS):
        if attempt:
            os.lseek(fd, 0, os.SEEK_SET)
            before = os.fstat(fd)
            if not is_small(before.st_size):
                return _ingest_large(batch, fd, path, before)
        data = _read_exactly(fd, before.st_size)
        after = os.fstat(fd)
        if _same_version(before, after) and len(data) == after.st_size:
            break
    else:
        raise _changed(path)
    digest = blake3.blake3(data).digest()
    batch.add(digest, data)
    return digest, after


def _ingest_large(
    batch: BlobBatch, fd: int, path: str, before: os.stat_result
) -> tuple[bytes, os.stat_result]:
    writer = batch.storage.writer(before.st_size)
    try:
        for attempt in range(MAX_READ_ATTEMPTS):
            if attempt:
                writer.reset()
                os.lseek(fd, 0, os.SEEK_SET)
                before = os.fstat(fd)
            while chunk := os.read(fd, CHUNK_BYTES):
                writer.write(chunk)
            after = os.fstat(fd)
            if _same_version(before, after) and writer.size == after.st_size:
                break
        else:
            raise _changed(path)
    except BaseException:
        writer.abort()
        raise
    return writer.commit(), after


def ingest_scan(
    scanned: ScanResult,
    batch: BlobBatch,
    cache: StatCache,
    *,
    skip_unreadable: bool,
    progress: Callable[[int, int], None] | None = None,
) -> list[EntryRow]:
    """All the manifest rows of a scan, sorted by path, after reading and storing through
    ``batch`` every file the scan could not reuse.

    An unreadable file raises, or with ``skip_unreadable`` is added to ``scanned.skipped``.
    ``scanned.to_read`` is consumed, each file's stat freed once its row exists.
    """
    to_read, scanned.to_read = scanned.to_read, []
    to_read.sort(key=itemgetter(0), reverse=True)  # packs hold blobs in path order
    rows = scanned.rows
    total = len(to_read)
    while to_read:
        path, absolute, info = to_read.pop()
        try:
            stored = ingest_file(batch, absolute, info)
        except OSError as error:
            if not skip_unreadable:
                raise
            scanned.skipped.append(SkippedPath(path, error.strerror or str(error)))
            continue
        cache.record(path, stored.stat, stored.digest)
        rows.append((path, "file", stored.mode, stored.size, stored.mtime_ns, stored.digest, None))
        if progress is not None:
            progress(total - len(to_read), total)
    return sorted_rows(rows, overlapping=scanned.overlapping)
