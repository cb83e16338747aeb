"""Which directories a watch has inotify watches on, and adding and dropping them as
directories come and go.

A watch of requested paths under a base directory needs a watch on each requested directory
and everything below it, and on each directory on the way to a requested path (a rename of
one of them moves the path). It leaves out the store's own root (which no checkpoint
records) and never follows a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any

from snapstore.fs.mounts import LOCAL_FILESYSTEMS, filesystem_type
from snapstore.fs.stamps import FileId, file_id
from snapstore.service.watch import inotify
from snapstore.service.watch.changes import ancestors, join
from snapstore.worktree.changes import under


def unreported_changes(path: str) -> str | None:
    """Why inotify may miss changes to what lies at ``path`` (its filesystem is not a local
    one, so changes made elsewhere never pass through this kernel), or None."""
    fs_type = filesystem_type(path)
    if fs_type in LOCAL_FILESYSTEMS:
        return None
    return (
        f"{path} is on a {fs_type or 'unknown'} filesystem, whose changes made elsewhere "
        "inotify does not report"
    )


class DirectoryWatches:
    """One inotify instance and the directories it watches under ``base_dir`` for the
    requested ``paths`` (relative to it). The caller serializes every call.

    ``unwatchable``: directories that could not be watched (permission denied), which every
    drain rescans. ``broken``: why the watches cannot see everything (the watch limit is
    reached, or a directory is on a filesystem whose changes inotify misses), or None; it
    outlives a reopened instance.
    """

    def __init__(self, base_dir: str, paths: tuple[str, ...]) -> None:
        self.base_dir = base_dir
        self.paths = paths
        self.broken: str | None = None
        self.unwatchable: set[str] = set()
        self._inotify: inotify.Inotify | None = None
        self._dirs: dict[int, str] = {}
        self._wds: dict[str, int] = {}
        self._base_device: int | None = None
        self._store_id: FileId | None = None

    def open(self, base_id: FileId | None, store_id: FileId | None) -> None:
        """A new inotify instance with every watch added, for the base directory ``base_id``
        (None if unknown) and a store whose root (``store_id``) is never watched."""
        self.close()
        self._base_device = None if base_id is None else base_id[0]
        self._store_id = store_id
        self._inotify = inotify.new_inotify()
        self.watch_path(".")

    def close(self) -> None:
        """Drop the instance and every watch."""
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        self._dirs.clear()
        self._wds.clear()
        self.unwatchable.clear()

    @property
    def count(self) -> int:
        """How many directories carry a watch now."""
        return len(self._dirs)

    def fileno(self) -> int | None:
        """The instance's descriptor to poll, or None if there is none."""
        return None if self._inotify is None else self._inotify.fileno()

    def read(self) -> list[Any]:
        """The events queued now (none without an instance); OSError if reading fails."""
        if self._inotify is None:
            return []
        return self._inotify.read(timeout=0)

    def directory(self, wd: int) -> str | None:
        """The directory watch ``wd`` is on, or None if it is not one of ours."""
        return self._dirs.get(wd)

    def dropped(self, wd: int, directory: str) -> None:
        """Forget watch ``wd`` on ``directory``: the kernel removed it."""
        self._dirs.pop(wd, None)
        if self._wds.get(directory) == wd:
            del self._wds[directory]

    def watch_path(self, path: str) -> None:
        """Watch what ``path`` (new, or requested) needs: its subtree if it lies in a
        requested path, the chain of directories down to the requested paths below it if it
        holds some."""
        self._add(".")
        for requested in self.paths:
            if under(path, requested):
                self._add_tree(path)
            elif under(requested, path):
                for directory in [*ancestors(requested), requested]:
                    if under(directory, path):
                        if directory == requested:
                            self._add_tree(directory)
                        elif not self._add(directory):
                            break

    def unwatch(self, path: str) -> None:
        """Drop the watches on ``path`` and below (it was moved away or removed)."""
        assert self._inotify is not None
        for watched in [p for p in self._wds if under(p, path)]:
            wd = self._wds.pop(watched)
            self._dirs.pop(wd, None)
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)
        self.unwatchable = {p for p in self.unwatchable if not under(p, path)}

    def _absolute(self, path: str) -> str:
        return self.base_dir if path == "." else os.path.join(self.base_dir, path)

    def _add(self, path: str) -> bool:
        """Watch the directory ``path``; False if it is not (or no longer) a directory, or
        cannot be watched. A full watch table breaks the watch."""
        assert self._inotify is not None
        if path in self._wds:
            return True
        try:
            wd = self._inotify.add_watch(self._absolute(path), inotify.WATCH_MASK)
        except OSError as error:
            if error.errno == errno.ENOSPC:
                self.broken = (
                    "the inotify watch limit is reached (raise fs.inotify.max_user_watches)"
                )
            elif error.errno in (errno.EACCES, errno.EPERM):
                self.unwatchable.add(path)
            elif path == ".":  # a symlink (watches never follow one), or gone
                self.broken = f"the base directory cannot be watched ({error.strerror})"
            return False
        stale = self._dirs.get(wd)
        if stale is not None and stale != path:
            self._wds.pop(stale, None)
        self._dirs[wd] = path
        self._wds[path] = wd
        return True

    def _add_tree(self, top: str) -> None:
        """Watch ``top`` and every directory below it, except the store's own root and
        directories on a filesystem whose changes inotify misses (which break the watch)."""
        pending = [top]
        while pending:
            path = pending.pop()
            if not self._add(path):
                continue
            try:
                with os.scandir(self._absolute(path)) as listing:
                    children = [c for c in listing if c.is_dir(follow_symlinks=False)]
            except OSError as error:
                if error.errno in (errno.EACCES, errno.EPERM):
                    self.unwatchable.add(path)
                continue
            for child in children:
                with contextlib.suppress(OSError):
                    info = child.stat(follow_symlinks=False)
                    if file_id(info) == self._store_id:
                        continue
                    if self._base_device is not None and info.st_dev != self._base_device:
                        unreported = unreported_changes(child.path)
                        if unreported is not None:
                            self.broken = unreported
                            continue
                pending.append(join(path, child.name))
