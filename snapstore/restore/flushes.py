"""What a durable restore flushes, and how: a whole filesystem at once where that is as good
as an ``fsync`` of each file and directory, an ``fsync`` each elsewhere.

The order never changes: the bytes of a batch of files are flushed before any of them is
renamed into place (a rename must never publish bytes a power cut can lose), and every
directory whose entries the restore changed or made, every mode it set and the entry of a
target it made are flushed before its journal is removed (nothing is reported done that
was not flushed). What changes is the number of calls:

- **By filesystem**, where the seam can flush a filesystem at once (``syncfs``, Linux 5.17
  and later, which reports the errors of writeback and of the filesystem's own sync:
  ``FileSystem.flushes_whole_filesystems``) and the filesystem is one whose own sync
  commits like ``fsync``
  (``snapstore.fs.mounts.SYNCFS_FILESYSTEMS``): one ``syncfs`` per filesystem for a batch of
  files, closed as soon as they are written, and one at the end for every directory and
  mode. ``syncfs`` writes back every dirty page and inode of the filesystem and commits it,
  which is what an ``fsync`` of each of those files and directories does. A new target,
  and any parent the restore makes for it, is not flushed as it is made: it lies on the
  filesystem of the directory it is made in, which the last flush covers (only the
  restore's target marker in it is flushed, before the journal). Until then a power cut
  leaves the target (which the restore's journal names by its inode number and marker, and
  a recovery then finishes) or no target (the recovery finds none and drops the journal:
  nothing was restored).
- **One by one** elsewhere (other systems, other filesystems, a seam that overrides
  ``fsync``: the crash suites' recorders, so that the power-loss replay checks this order
  call by call): each file keeps its descriptor until its ``fsync``, each directory gets an
  ``fsync``, and each new directory's parent is flushed as it is made.

A directory of the target on another filesystem (something mounted inside it) is judged on
its own filesystem, and each filesystem is flushed through one descriptor opened before
anything was written there (``DirHandles.device``): a ``syncfs`` reports the writeback errors
recorded since its descriptor was opened.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence

from snapstore.fs.mounts import syncfs_flushes
from snapstore.fs.seam import FileSystem
from snapstore.restore.dirhandles import MAX_OPEN_DIRS, DirHandles


def _nearest_existing(path: str) -> str:
    """``path``, or the nearest directory above it that is there."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


class RestoreFlushes:
    """The flushes of one restore, through one I/O seam (see the module docstring)."""

    def __init__(self, fs: FileSystem, *, durable: bool) -> None:
        self.fs = fs
        self.durable = durable
        self._whole = durable and fs.flushes_whole_filesystems
        self._flushed_whole: dict[int, bool] = {}

    def _trusted(self, device: int, path: Callable[[], str]) -> bool:
        """Whether a ``syncfs`` of ``device`` (which holds ``path()``) flushes as ``fsync``
        does; asked once per filesystem and restore."""
        trusted = self._flushed_whole.get(device)
        if trusted is None:
            trusted = syncfs_flushes(path(), device=device)
            self._flushed_whole[device] = trusted
        return trusted

    def new_entries_flushed_later(self, target: str) -> bool:
        """Whether the entries of a target about to be made (and of its missing parents) may
        wait for the flush of their filesystem at the end, rather than a flush of each
        parent now."""
        if not self._whole:
            return False
        existing = _nearest_existing(target)
        try:
            return self._trusted(os.stat(existing).st_dev, lambda: existing)
        except OSError:
            return False

    def by_filesystem(self, handles: DirHandles, relative_dir: str) -> bool:
        """Whether what is written in ``relative_dir`` of the target is flushed with its
        whole filesystem (its files need no descriptor kept open for an ``fsync``). Ask
        before writing there: the first directory asked about on a filesystem gives the
        descriptor its flushes go through."""
        if not self._whole:
            return False
        device = handles.device(relative_dir)
        return self._trusted(device, lambda: os.path.join(handles.target, relative_dir))

    def files(self, handles: DirHandles, closed_in: Iterable[str], fds: Sequence[int]) -> None:
        """Flush a batch of written files: those closed once written, in the directories
        ``closed_in`` (flushed with their filesystems), and the open ``fds`` (an ``fsync``
        each)."""
        if not self.durable:
            return
        directories = set(closed_in)
        if directories:
            handles.sync_filesystems_of(directories)
        if fds:
            self.fs.fsync_files(fds)

    def directories(self, handles: DirHandles, relative_dirs: Iterable[str]) -> None:
        """Flush the directories a restore changed or made and their modes (and, by
        filesystem, everything else written there): the last flush of a restore, before
        its journal is removed. A directory that is not there any more holds nothing."""
        if not self.durable:
            return
        whole: list[str] = [""] if self.by_filesystem(handles, "") else []
        single: list[str] = []
        for relative_dir in relative_dirs:
            try:
                (whole if self.by_filesystem(handles, relative_dir) else single).append(
                    relative_dir
                )
            except FileNotFoundError:
                continue
        if whole:
            handles.sync_filesystems_of(whole)
        for start in range(0, len(single), MAX_OPEN_DIRS // 2):
            fds = []
            try:
                for relative_dir in single[start : start + MAX_OPEN_DIRS // 2]:
                    with contextlib.suppress(FileNotFoundError):
                        fds.append(os.dup(handles.get(relative_dir)))
                self.fs.fsync_files(fds)
            finally:
                for fd in fds:
                    os.close(fd)
