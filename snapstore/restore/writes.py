"""Restored files, written to temp names beside their destinations and published in batches:
write a batch, flush each file, then rename each into place.

Flushing files one by one right after writing each makes the disk idle while the next one is
written and pays a cache flush per file; asking the kernel to start writeback as soon as a
file is written and flushing the batch at once (one ``syncfs`` on Linux) costs a fraction of
the time. Every file is still flushed before its rename (a rename must never publish bytes a
power cut can lose). Where its directory's filesystem is flushed whole (``syncfs``: see
``snapstore.restore.flushes``), a file is closed as soon as it is written, and a batch may
hold many more files than descriptors; elsewhere each file stays open until its ``fsync``.

A file with holes is cut to its size, then its pieces of data are written at their offsets:
the holes stay holes. The members of a hard-link group after the first are links of the
first's new file (made under a temp name too, and checked to be that very file), renamed
into place like any other.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from dataclasses import dataclass

from snapstore.errors import UnsafePathError
from snapstore.fs.durable import discard
from snapstore.fs.seam import FileSystem, start_writeback
from snapstore.fs.stamps import FileId, file_id
from snapstore.fs.tempnames import RestoreTemps
from snapstore.models import FileEntry
from snapstore.repo.contents import pieces
from snapstore.repo.loose import BlobSource
from snapstore.restore.dirhandles import DirHandles
from snapstore.restore.flushes import RestoreFlushes

BATCH_FILES = 256
"""Files of a batch that hold their descriptors until the batch's flush."""
BATCH_FILES_CLOSED = 4096
"""Files of a batch in all (those closed once written hold no descriptor)."""
BATCH_BYTES = 32 << 20
WRITEBACK_FROM_BYTES = 256 << 10
"""Smaller files are left to the batch's flush (asking for their writeback costs more)."""
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


@dataclass
class _Staged:
    parent: str
    temp: str
    name: str
    fd: int | None
    """Open until the batch's flush, unless closed once written (or a link)."""
    closed: bool = False
    """Closed once written: flushed with its directory's filesystem."""
    renamed: bool = False


@dataclass
class _First:
    """The file written for the first member of a hard-link group, which the others link."""

    staged: _Staged
    identity: FileId


class StagedFiles:
    """Files waiting for their flush and rename, in directories of the target reached
    through ``handles``; after any failure call ``discard``."""

    def __init__(
        self,
        fs: FileSystem,
        blobs: BlobSource,
        handles: DirHandles,
        temps: RestoreTemps,
        flushes: RestoreFlushes,
        *,
        linked: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        self.fs = fs
        self.blobs = blobs
        self.handles = handles
        self.temps = temps
        self.flushes = flushes
        self.durable = flushes.durable
        self.linked = linked
        self._firsts: dict[str, _First] = {}
        self._staged: deque[_Staged] = deque()
        self._open = 0
        self._bytes = 0

    def add(self, parent: str, name: str, entry: FileEntry, mode: int) -> None:
        """Write ``entry``'s verified bytes to a temp file beside ``name`` in the directory
        ``parent`` (relative to the target), or link it to the file written for its link
        group; publishes the batch when it is full."""
        assert entry.digest is not None
        group = entry.link or entry.path
        first = self._firsts.get(group) if self.linked and group in self.linked else None
        if first is not None:
            self._link(first, parent, name)
            return
        closes = not self.durable or self.flushes.by_filesystem(self.handles, parent)
        temp = self.temps.new()
        fd = self.fs.open(temp, _CREATE_FLAGS, 0o600, dir_fd=self.handles.get(parent))
        staged = _Staged(parent, temp, name, fd)
        self._staged.append(staged)
        if self.linked and group in self.linked:
            self._firsts[group] = _First(staged, file_id(os.fstat(fd)))
        if entry.extents:
            self.fs.ftruncate(fd, entry.size)
            for offset, data in pieces(self.blobs, entry):
                os.lseek(fd, offset, os.SEEK_SET)
                self.fs.write(fd, data)
        else:
            for chunk in self.blobs.chunks(entry.digest, entry.size):
                self.fs.write(fd, chunk)
        self.fs.fchmod(fd, mode)
        if self.durable and entry.size >= WRITEBACK_FROM_BYTES:
            start_writeback(fd)
        if closes:
            staged.fd, staged.closed = None, True
            self.fs.close(fd)
        else:
            self._open += 1
        self._bytes += entry.size
        if self._full() or self._bytes >= BATCH_BYTES:
            self.publish()

    def _full(self) -> bool:
        return self._open >= BATCH_FILES or len(self._staged) >= BATCH_FILES_CLOSED

    def _link(self, first: _First, parent: str, name: str) -> None:
        """Stage ``name`` in ``parent`` as a new link of the group's first file (by its temp
        name, or its final one once renamed), refusing a name that turns out to be another
        file (the target changed under the restore)."""
        source = first.staged.name if first.staged.renamed else first.staged.temp
        source_fd = os.dup(self.handles.get(first.staged.parent))
        temp = self.temps.new()
        try:
            parent_fd = self.handles.get(parent)
            self.fs.link(source, temp, src_dir_fd=source_fd, dst_dir_fd=parent_fd)
        finally:
            os.close(source_fd)
        self._staged.append(_Staged(parent, temp, name, None))
        if file_id(os.stat(temp, dir_fd=parent_fd, follow_symlinks=False)) != first.identity:
            raise UnsafePathError(
                f"{first.staged.parent}/{first.staged.name!r} in the target was replaced while "
                "the restore linked it"
            )
        if self._full():
            self.publish()

    def publish(self) -> None:
        """Flush every staged file, then rename each into place, in order."""
        if self._staged:
            self.flushes.files(
                self.handles,
                (staged.parent for staged in self._staged if staged.closed),
                [staged.fd for staged in self._staged if staged.fd is not None],
            )
        for staged in self._staged:
            if staged.fd is not None:  # None: closed once written, or a link of a first
                fd, staged.fd = staged.fd, None
                self.fs.close(fd)
        self._open = 0
        while self._staged:
            staged = self._staged[0]
            parent_fd = self.handles.get(staged.parent)
            self.fs.replace(staged.temp, staged.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            staged.renamed = True
            self._staged.popleft()
        self._bytes = 0

    def discard(self) -> None:
        """Close and remove every temp file not yet renamed into place."""
        for staged in self._staged:
            if staged.fd is not None:
                with contextlib.suppress(OSError):
                    self.fs.close(staged.fd)
            with contextlib.suppress(OSError):
                discard(self.fs, staged.temp, dir_fd=self.handles.get(staged.parent))
        self._staged.clear()
        self._open = 0
        self._bytes = 0
