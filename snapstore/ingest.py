"""Copy a source file into the blob store, storing exactly the bytes that were hashed.

A file that changes while it is read (its size, mtime or inode moves between the stat before
and the stat after) is read again, a bounded number of times, so a snapshot never records a
torn mix of two versions under one digest's metadata.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from snapstore.blobs import CHUNK_BYTES, LooseBlobStore
from snapstore.errors import SourceChangedError

MAX_READ_ATTEMPTS = 3


@dataclass(frozen=True)
class IngestedFile:
    """A source file's stored digest and the metadata of the exact version stored."""

    digest: bytes
    size: int
    mode: int
    mtime_ns: int


def _identity(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def ingest_file(blobs: LooseBlobStore, path: str) -> IngestedFile:
    """Stream ``path`` into the blob store while hashing it; raises SourceChangedError if it
    never holds still, OSError if it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        before = os.fstat(fd)
        writer = blobs.writer(before.st_size)
        try:
            for attempt in range(MAX_READ_ATTEMPTS):
                if attempt:
                    writer.reset()
                    os.lseek(fd, 0, os.SEEK_SET)
                    before = os.fstat(fd)
                while chunk := os.read(fd, CHUNK_BYTES):
                    writer.write(chunk)
                after = os.fstat(fd)
                if _identity(before) == _identity(after) and writer.size == after.st_size:
                    break
            else:
                raise SourceChangedError(
                    f"{path!r} kept changing while it was read ({MAX_READ_ATTEMPTS} attempts)"
                )
        except BaseException:
            writer.abort()
            raise
        digest = writer.commit()
    finally:
        os.close(fd)
    return IngestedFile(digest, writer.size, after.st_mode & 0o7777, after.st_mtime_ns)
