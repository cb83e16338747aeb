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
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import NamedTuple

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
from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs
from snapstore.fs.chunking import read_chunks
from snapstore.fs.sparse import has_holes, may_have_holes, read_pieces
from snapstore.fs.stamps import FileId, file_id, version
from snapstore.models import SkippedPath
from snapstore.repo.batch import BlobBatch, is_small
from snapstore.worktree.links import record_links
from snapstore.worktree.scanned import ScanResult, sorted_rows
from snapstore.worktree.statcache import StatCache

MAX_READ_ATTEMPTS = 3


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


def _same_version(before: os.stat_result, after: os.stat_result) -> bool:
    return version(before) == version(after)


def _changed(path: str) -> SourceChangedError:
    return SourceChangedError(
        f"{path!r} kept changing while it was read ({MAX_READ_ATTEMPTS} attempts)"
    )


def ingest_file(
    batch: BlobBatch,
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
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        if dir_fd is None:
            fd = os.open(path, flags)
        else:
            fd = os.open(os.path.basename(path), flags, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnreadablePathError(f"{path!r} became a symlink while it was read") from None
        raise
    try:
        opened = os.fstat(fd)
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
    return IngestedFile(digest, after.st_size, mode, after.st_mtime_ns, after, extents)


_Stored = tuple[bytes, os.stat_result, bool]
"""A stored file's digest, the stat of the version stored, and whether the digest names an
extent map."""


def _as_extents(fd: int, info: os.stat_result, opened: os.stat_result | None = None) -> bool:
    """Whether the file, as ``info`` shows it, is stored as an extent map: chunked if it is
    large enough, else fixed-cut if it has holes (probed with ``opened``, default ``info``)."""
    return info.st_size >= CHUNKED_FROM_BYTES or has_holes(fd, opened or info)


def _ingest_as_seen(
    batch: BlobBatch,
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
    """Up to ``size`` bytes from the file's start; fewer only if it ends sooner."""
    parts = []
    offset = 0
    while offset < size and (chunk := os.pread(fd, size - offset, offset)):
        parts.append(chunk)
        offset += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _is_racy(info: os.stat_result, racy_from_ns: int) -> bool:
    """True if the file changed so recently that a later change could leave its stat as is."""
    return max(info.st_mtime_ns, info.st_ctime_ns) >= racy_from_ns


def _ingest_small(
    batch: BlobBatch,
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
        if not _same_version(before, after) or len(data) != after.st_size:
            continue
        if _is_racy(after, racy_from_ns):
            again = _read_from_start(fd, after.st_size + 1)  # one more: growth shows too
            if again != data or not _same_version(after, os.fstat(fd)):
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
    batch: BlobBatch,
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
            if not _same_version(before, after) or writer.size != after.st_size:
                continue
            if _is_racy(after, racy_from_ns):
                digest = writer.digest()
                if _rehash(fd, after.st_size) != digest or not _same_version(after, os.fstat(fd)):
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


def _extent_map(batch: BlobBatch | None, fd: int, size: int, chunked: bool) -> bytes:
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
    batch: BlobBatch,
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
        if not _same_version(before, after):
            continue
        if _is_racy(after, racy_from_ns) and (
            _extent_map(None, fd, after.st_size, chunked) != data
            or not _same_version(after, os.fstat(fd))
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


def ingest_scan(
    scanned: ScanResult,
    batch: BlobBatch,
    cache: StatCache | None,
    *,
    racy_from_ns: int,
    skip_unreadable: bool,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[EntryRow], dict[str, FileAttrs]]:
    """All the manifest rows of a scan, sorted by path, after reading and storing through
    ``batch`` every file the scan could not reuse, and the attributes of the file rows that
    have any (holes, hard links), by path. Each digest is recorded in ``cache``, if given. A
    file changed at or after ``racy_from_ns`` is read twice (see ``ingest_file``).

    An unreadable file raises, or with ``skip_unreadable`` is added to ``scanned.skipped``.
    ``scanned.to_read`` is consumed, each file's stat freed once its row exists. Of the links
    of one inode, unchanged since it was read, only the first is read.
    """
    to_read, scanned.to_read = scanned.to_read, []
    to_read.sort(key=itemgetter(0), reverse=True)  # packs hold blobs in path order
    rows = scanned.rows
    reused = cache.reused_extents if cache is not None else ()
    attrs: dict[str, FileAttrs] = {path: {"extents": True} for path in reused}
    links = scanned.links
    read_inodes: dict[FileId, IngestedFile] = {}
    total = len(to_read)
    parents = _ListedDirectories(scanned.dirs)
    try:
        while to_read:
            path, absolute, info = to_read.pop()
            key = links.get(path) if links else None
            stored = None if key is None else read_inodes.get(key)
            if stored is None or version(stored.stat) != version(info):
                try:
                    dir_fd = parents.open(path, absolute)
                    stored = ingest_file(
                        batch, absolute, info, racy_from_ns=racy_from_ns, dir_fd=dir_fd
                    )
                except OSError as error:
                    if not skip_unreadable:
                        raise
                    scanned.skipped.append(SkippedPath(path, error.strerror or str(error)))
                    continue
                if key is not None and file_id(stored.stat) != key:
                    del links[path]  # replaced since the scan: no longer a link of the others
                elif key is not None:
                    read_inodes[key] = stored
            if cache is not None:
                cache.record(path, stored.stat, stored.digest, stored.extents)
            if stored.extents:
                attrs[path] = {"extents": True}
            rows.append(
                (path, "file", stored.mode, stored.size, stored.mtime_ns, stored.digest, None)
            )
            if progress is not None:
                progress(total - len(to_read), total)
    finally:
        parents.close()
    rows = sorted_rows(rows, overlapping=scanned.overlapping)
    if links:
        record_links(rows, links, attrs)
    return rows, attrs


class _ListedDirectories:
    """The directories files are read from, each opened (one at a time: files come in path
    order) and checked to be the very directory the scan listed; a directory the scan did
    not list (the parent of a file asked for by name, which is looked up from the base by
    name, as given) gives None: the file is opened by path, as it was found."""

    def __init__(self, listed: Mapping[str, FileId]) -> None:
        self.listed = listed
        self._open: tuple[str, int] | None = None

    def open(self, path: str, absolute: str) -> int | None:
        """A descriptor of the directory holding ``path`` (valid until the next call), or
        None; UnreadablePathError if that directory was replaced since the scan listed it."""
        parent = path.rpartition("/")[0] or "."
        expected = self.listed.get(parent)
        if expected is None:
            return None
        if self._open is not None and self._open[0] == parent:
            return self._open[1]
        self.close()  # followed if a symlink (the base may be one): the identity decides
        fd = os.open(os.path.dirname(absolute), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if file_id(os.fstat(fd)) != expected:
            os.close(fd)
            raise UnreadablePathError(
                f"cannot snapshot {path!r}: {parent!r} was replaced while the tree was snapshotted"
            )
        self._open = (parent, fd)
        return fd

    def close(self) -> None:
        if self._open is not None:
            os.close(self._open[1])
            self._open = None
