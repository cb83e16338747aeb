"""Restored files, written to temp names beside their destinations and published in batches:
write a batch, flush each file, then rename each into place.

Flushing files one by one right after writing each makes the disk idle while the next one is
written and pays a cache flush per file; asking the kernel to start writeback as soon as a
file is written and flushing the batch at once (one ``syncfs`` on Linux) costs a fraction of
the time. Every file is still flushed before its rename (a rename must never publish bytes a
power cut can lose).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from snapstore.fs.durable import discard, temp_name
from snapstore.fs.seam import FileSystem, start_writeback
from snapstore.models import FileEntry
from snapstore.repo.loose import BlobSource

if TYPE_CHECKING:
    from snapstore.restore.apply import DirHandles

BATCH_FILES = 256
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


class StagedFiles:
    """Files waiting for their flush and rename, in directories of the target reached
    through ``handles``; after any failure call ``discard``."""

    def __init__(
        self, fs: FileSystem, blobs: BlobSource, handles: DirHandles, *, durable: bool
    ) -> None:
        self.fs = fs
        self.blobs = blobs
        self.handles = handles
        self.durable = durable
        self._staged: list[_Staged] = []
        self._bytes = 0

    def add(self, parent: str, name: str, entry: FileEntry, mode: int) -> None:
        """Write ``entry``'s verified bytes to a temp file beside ``name`` in the directory
        ``parent`` (relative to the target); publishes the batch when it is full."""
        assert entry.digest is not None
        temp = temp_name()
        fd = self.fs.open(temp, _CREATE_FLAGS, 0o600, dir_fd=self.handles.get(parent))
        staged = _Staged(parent, temp, name, fd)
        self._staged.append(staged)
        for chunk in self.blobs.chunks(entry.digest, entry.size):
            self.fs.write(fd, chunk)
        self.fs.fchmod(fd, mode)
        if self.durable and entry.size >= WRITEBACK_FROM_BYTES:
            start_writeback(fd)
        self._bytes += entry.size
        if len(self._staged) >= BATCH_FILES or self._bytes >= BATCH_BYTES:
            self.publish()

    def publish(self) -> None:
        """Flush every staged file, then rename each into place, in order."""
        if self.durable and self._staged:
            self.fs.fsync_files([staged.fd for staged in self._staged if staged.fd is not None])
        for staged in self._staged:
            assert staged.fd is not None
            fd, staged.fd = staged.fd, None
            self.fs.close(fd)
        while self._staged:
            staged = self._staged[0]
            parent_fd = self.handles.get(staged.parent)
            self.fs.replace(staged.temp, staged.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            self._staged.pop(0)
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
        self._bytes = 0
