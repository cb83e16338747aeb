"""Reading every file a scan could not reuse, in path order, with large files read aside.

Small files are read, hashed and handed to the create's batch on the calling thread: each
takes a few system calls and a little Python, and a second thread reading them only fights
the first for the interpreter lock. A file to be cut into chunks (``CHUNKED_FROM_BYTES`` or
more) is different: reading it, cutting it (FastCDC), hashing and copying its chunks all run
without the interpreter lock, so it is read on a thread of its own while the calling thread
goes on with the next files, and its chunks are added to the batch when it is done. That is
the calling thread's share of a first snapshot made smaller, and on two cores the calling
thread is what a first snapshot waits for (the other core compresses).

A file read aside is opened on the calling thread (in the very directory the scan listed),
then goes through the very same ``ingest_opened`` as any file (its attempts, its racy reads,
its check that the file is still a regular file) into a
``RecordedAdds`` instead of the batch; the calling thread adds what it recorded, in the
order the files were handed over, at fixed points of the walk: when more than
``ASIDE_HELD_BYTES`` of such files are under way (that much, at most, waits in memory) and at
the end. Never when one happens to be done: the blobs then reach the pack in the same order
and the same blocks whatever the timing, so a run makes the same calls through the I/O seam
(the fault and kill-point suites count on it). The rows, digests and blobs stored are the
same as if every file were read in place; only where a large file's chunks lie in the pack
differs. A failure reading one aside is raised,
or with ``skip_unreadable`` recorded as skipped, when the calling thread collects it, as if
the file had been read in place.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from operator import itemgetter

from snapstore.errors import UnreadablePathError
from snapstore.format.manifest import EntryRow
from snapstore.format.packfile import KIND_DATA
from snapstore.format.tree import FileAttrs
from snapstore.fs.stamps import FileId, file_id, version
from snapstore.models import SkippedPath
from snapstore.repo.batch import BlobBatch
from snapstore.repo.blobs import Blobs
from snapstore.repo.loose import BlobWriter
from snapstore.worktree import ingest
from snapstore.worktree.ingest import IngestedFile
from snapstore.worktree.links import record_links
from snapstore.worktree.scanned import ScanResult, sorted_rows
from snapstore.worktree.statcache import StatCache
from snapstore.worktree.waydirs import LISTING_FLAGS, WayDirs

ASIDE_MAX_BYTES = 8 << 20
"""Larger files are read on the calling thread, streaming (their chunks would otherwise wait
in memory until collected)."""
ASIDE_HELD_BYTES = 16 << 20
"""The most bytes of files read aside (or waiting to be) that may be held at once."""


class RecordedAdds:
    """Stands in for the batch on the thread that reads a file aside: keeps each blob
    ``ingest_opened`` stores, in order, for the calling thread to add (``replay``)."""

    def __init__(self) -> None:
        self.adds: list[tuple[bytes, bytes, bool, bool]] = []

    @property
    def storage(self) -> Blobs:
        raise AssertionError("a file read aside is chunked, never streamed into a loose blob")

    def add(
        self, digest: bytes, data: bytes, kind: int = KIND_DATA, *, alone: bool = False
    ) -> None:
        if kind != KIND_DATA:
            raise AssertionError("a file read aside stores file data only")
        self.adds.append((digest, data, False, alone))

    def add_counted(self, digest: bytes, data: bytes, *, alone: bool = False) -> None:
        self.adds.append((digest, data, True, alone))

    def commit_loose(self, writer: BlobWriter) -> bytes:
        raise AssertionError("a file read aside is chunked, never streamed into a loose blob")

    def replay(self, batch: BlobBatch) -> None:
        """Add what was recorded to ``batch``, as ``ingest_opened`` would have."""
        for digest, data, counted, alone in self.adds:
            if counted:
                batch.add_counted(digest, data, alone=alone)
            else:
                batch.add(digest, data, alone=alone)
        self.adds = []


def _read_aside(
    fd: int, path: str, opened: os.stat_result, scanned: os.stat_result | None, racy_from_ns: int
) -> tuple[RecordedAdds, IngestedFile]:
    """``ingest_opened`` of the file open as ``fd`` into a ``RecordedAdds``, on the reading
    thread (which closes ``fd``)."""
    recorded = RecordedAdds()
    stored = ingest.ingest_opened(recorded, fd, path, opened, scanned, racy_from_ns=racy_from_ns)
    return recorded, stored


_Pending = tuple[str, "Future[tuple[RecordedAdds, IngestedFile]]", int, int]
"""A file read aside: its path, the reading, the descriptor it was opened as, and its size
when opened."""


class _Ingest:
    """One ``ingest_scan``: what it has recorded so far, and the files being read aside."""

    def __init__(
        self,
        scanned: ScanResult,
        batch: BlobBatch,
        cache: StatCache | None,
        racy_from_ns: int,
        skip_unreadable: bool,
        progress: Callable[[int, int], None] | None,
        total: int,
        way: WayDirs | None = None,
    ) -> None:
        self.scanned = scanned
        self.batch = batch
        self.cache = cache
        self.racy_from_ns = racy_from_ns
        self.skip_unreadable = skip_unreadable
        self.progress = progress
        self.total = total
        self.done = 0
        reused = cache.reused_extents if cache is not None else ()
        self.attrs: dict[str, FileAttrs] = {path: {"extents": True} for path in reused}
        self.links = scanned.links
        self.rows = scanned.rows
        self.read_inodes: dict[FileId, IngestedFile] = {}
        self.parents = _ListedDirectories(scanned.dirs, way)
        self.aside: deque[_Pending] = deque()
        self.aside_bytes = 0
        self._pool: ThreadPoolExecutor | None = None

    def read(self, path: str, absolute: str, info: os.stat_result | None) -> None:
        """Read one file the scan listed (aside if it fits) and record it. ``info`` is the
        lstat the scan found it with, or None if the scan listed it without one (nothing
        could spare reading it): the file's fstat once opened then stands for it."""
        links = self.links
        key = links.get(path) if links else None
        if key is not None and info is not None and self._reuse_link(path, key, info):
            return
        try:
            fd = ingest.open_source(absolute, self.parents.open(path, absolute))
        except OSError as error:
            self._skip_or_raise(path, error)
            return
        try:
            opened = os.fstat(fd)
        except OSError as error:
            os.close(fd)
            self._skip_or_raise(path, error)
            return
        if info is None and opened.st_nlink > 1 and stat.S_ISREG(opened.st_mode):
            key = links[path] = file_id(opened)
            if self._reuse_link(path, key, opened):
                os.close(fd)
                return
        size = opened.st_size if info is None else info.st_size
        if key is None and ingest.is_chunked(size) and size <= ASIDE_MAX_BYTES:
            self._submit(path, absolute, fd, opened, info)
            return
        try:
            stored = ingest.ingest_opened(
                self.batch, fd, absolute, opened, info, racy_from_ns=self.racy_from_ns
            )
        except OSError as error:
            self._skip_or_raise(path, error)
            return
        if key is not None:
            if file_id(stored.stat) != key:
                del links[path]  # replaced since the scan: no longer a link of the others
            else:
                self.read_inodes[key] = stored
        self.record(path, stored)

    def _reuse_link(self, path: str, key: FileId, info: os.stat_result) -> bool:
        """Record ``path`` as the link it is of an inode already read, if that inode is
        unchanged since (as ``info`` shows it)."""
        stored = self.read_inodes.get(key)
        if stored is None or version(stored.stat) != version(info):
            return False
        self.record(path, stored)
        return True

    def _submit(
        self,
        path: str,
        absolute: str,
        fd: int,
        opened: os.stat_result,
        scanned: os.stat_result | None,
    ) -> None:
        """Hand the file open as ``fd`` (its fstat ``opened``; the scan's lstat ``scanned``,
        if there was one) to the reading thread."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapstore-read")
        size = opened.st_size if scanned is None else scanned.st_size
        try:
            future = self._pool.submit(
                _read_aside, fd, absolute, opened, scanned, self.racy_from_ns
            )
        except BaseException:
            os.close(fd)
            raise
        self.aside.append((path, future, fd, size))
        self.aside_bytes += size
        while self.aside_bytes > ASIDE_HELD_BYTES:
            self.collect_oldest()

    def collect_oldest(self) -> None:
        """Wait for the oldest file read aside, add its blobs to the batch and record it."""
        path, future, _fd, size = self.aside.popleft()
        self.aside_bytes -= size
        try:
            recorded, stored = future.result()
        except OSError as error:
            self._skip_or_raise(path, error)
            return
        recorded.replay(self.batch)
        self.record(path, stored)

    def _skip_or_raise(self, path: str, error: OSError) -> None:
        if not self.skip_unreadable:
            raise error
        self.scanned.skipped.append(SkippedPath(path, error.strerror or str(error)))

    def record(self, path: str, stored: IngestedFile) -> None:
        """The row of a file read (and its digest in the stat cache)."""
        digest, size, mode, mtime_ns, info, extents = stored
        if self.cache is not None:
            self.cache.record(path, info, digest, extents)
        if extents:
            self.attrs[path] = {"extents": True}
        self.rows.append((path, "file", mode, size, mtime_ns, digest, None))
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)

    def close(self) -> None:
        """Stop reading aside (files not started are dropped, their descriptors closed) and
        close the directory in use."""
        try:
            if self._pool is not None:
                for _path, future, fd, _size in self.aside:
                    if future.cancel():
                        os.close(fd)
                self._pool.shutdown(wait=True)
                self._pool = None
            self.aside.clear()
        finally:
            self.parents.close()


def ingest_scan(
    scanned: ScanResult,
    batch: BlobBatch,
    cache: StatCache | None,
    *,
    racy_from_ns: int,
    skip_unreadable: bool,
    progress: Callable[[int, int], None] | None = None,
    way: WayDirs | None = None,
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
    ingest = _Ingest(
        scanned, batch, cache, racy_from_ns, skip_unreadable, progress, len(to_read), way
    )
    try:
        while to_read:
            ingest.read(*to_read.pop())
        while ingest.aside:
            ingest.collect_oldest()
    finally:
        ingest.close()
    rows = sorted_rows(scanned.rows, overlapping=scanned.overlapping)
    if scanned.links:
        record_links(rows, scanned.links, ingest.attrs)
    return rows, ingest.attrs


class _ListedDirectories:
    """The directories files are read from: the scan's own descriptor of one on the way to a
    requested path while ``way`` holds it, else each opened (one at a time: files come in
    path order) and checked to be the very directory the scan listed or looked through; a
    directory the scan knows nothing of (the base, for a file asked for by name in it,
    unless ``way`` holds a descriptor of the base) gives None: the file is opened by path,
    as it was found. A directory the scan walked below one
    ``way`` holds is opened from there: a directory above it swapped for a symlink since
    the scan is not looked through."""

    def __init__(self, listed: Mapping[str, FileId], way: WayDirs | None = None) -> None:
        self.listed = listed
        self.way = way
        self._parent: str | None = None
        """The directory open as ``_fd`` (None: none is)."""
        self._fd = -1

    def open(self, path: str, absolute: str) -> int | None:
        """A descriptor of the directory holding ``path`` (valid until the next call), or
        None; UnreadablePathError if that directory was replaced since the scan listed it."""
        parent = path.rpartition("/")[0] or "."
        if parent == self._parent:  # the directory of the file before (files come in order)
            return self._fd
        expected = self.listed.get(parent)
        directory = "" if parent == "." else parent
        way = self.way
        if way is not None:
            held = way.base_fd if not directory else way.held(directory)
            if held is not None and expected in (None, way.identity(directory)):
                return held
        if expected is None:
            return None
        self.close()  # followed if a symlink (the base may be one): the identity decides
        nearest = None if way is None else way.nearest(directory)
        if nearest is None:
            fd = os.open(os.path.dirname(absolute), LISTING_FLAGS)
        else:
            fd = os.open(nearest[1], LISTING_FLAGS | os.O_NOFOLLOW, dir_fd=nearest[0])
        if file_id(os.fstat(fd)) != expected:
            os.close(fd)
            raise UnreadablePathError(
                f"cannot snapshot {path!r}: {parent!r} was replaced while the tree was snapshotted"
            )
        self._parent, self._fd = parent, fd
        return fd

    def close(self) -> None:
        if self._parent is not None:
            self._parent = None
            os.close(self._fd)
