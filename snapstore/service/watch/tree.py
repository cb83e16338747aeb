"""``TreeWatcher``: the changes under a base directory, followed as they happen.

A thread reads the kernel's events as they come (so its queue does not overflow while the
server is idle), turns them into changed paths (``PendingChanges``) and keeps the watches in
step with the directories that come and go (``DirectoryWatches``); ``drain`` hands the
changes over. Any doubt makes the next drain ``full``: the event queue overflowed, a watch
could not be added, the base directory was moved or replaced, or its filesystem is not one
whose changes all pass through this kernel.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Iterable

from snapstore.fs.stamps import FileId, file_id
from snapstore.service.protocol import WatchError
from snapstore.service.watch.changes import Changes, PendingChanges, join, minimal, requested_paths
from snapstore.service.watch.directories import DirectoryWatches, unreported_changes
from snapstore.service.watch.inotify import (
    IN_ATTRIB,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_ISDIR,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    IN_UNMOUNT,
    NAME_CHANGES,
    watch_support,
)


class TreeWatcher:
    """inotify watches on the directories that hold ``paths`` under ``base_dir``: each
    requested directory with everything below it, and the directories on the way to each
    requested path (a rename of one of them moves the path).

    The first drain after ``start``, or after any doubt, is ``full``.
    """

    def __init__(self, base_dir: str, paths: Iterable[str], store_root: str) -> None:
        self.base_dir = os.path.abspath(base_dir)
        self.paths = requested_paths(self.base_dir, paths)
        self.store_root = os.path.abspath(store_root)
        self._lock = threading.Lock()
        self._watches = DirectoryWatches(self.base_dir, self.paths)
        self._pending = PendingChanges(self.paths)
        self._cannot_watch: str | None = None
        self._reset_needed = False
        self._base_id: FileId | None = None
        self._store_id: FileId | None = None
        self._thread: threading.Thread | None = None
        self._stop_r, self._stop_w = -1, -1

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, follow: bool = True) -> None:
        """Add the watches and start following events. A watch that cannot see everything
        is still started: its drains are ``full`` and say why. ``follow``: read events in a
        thread as they come; without it they are read only by ``drain`` (the kernel queue,
        16,384 events by default, must then hold everything between two drains)."""
        support = watch_support()
        if not support["available"]:
            self._cannot_watch = str(support["reason"])
            return
        try:
            base = os.stat(self.base_dir)
        except OSError as error:
            raise WatchError(f"cannot watch {self.base_dir}: {error.strerror}") from error
        if not os.path.isdir(self.base_dir):
            raise WatchError(f"cannot watch {self.base_dir}: not a directory")
        self._cannot_watch = unreported_changes(self.base_dir)
        if self._cannot_watch is not None:
            return
        with contextlib.suppress(OSError):
            self._store_id = file_id(os.stat(self.store_root))
        self._base_id = file_id(base)
        self._stop_r, self._stop_w = os.pipe()
        try:
            with self._lock:
                self._open()
        except OSError as error:  # no inotify instance (fs.inotify.max_user_instances)
            self.close()
            raise WatchError(f"cannot watch {self.base_dir}: {error.strerror or error}") from error
        if not follow:
            return
        self._thread = threading.Thread(target=self._follow, name="snapstore-watch", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and drop every watch."""
        if self._thread is not None:
            os.write(self._stop_w, b"x")
            self._thread.join()
            self._thread = None
        with self._lock:
            self._watches.close()
        for fd in (self._stop_r, self._stop_w):
            if fd >= 0:
                os.close(fd)
        self._stop_r = self._stop_w = -1

    def _open(self) -> None:
        """A new inotify instance with every watch added (the lock held)."""
        self._watches.open(self._base_id, self._store_id)

    # ------------------------------------------------------------------ status

    @property
    def watched_dirs(self) -> int:
        """How many directories carry a watch now."""
        return self._watches.count

    @property
    def broken(self) -> str | None:
        """Why this watch can never promise anything (every drain is full), or None."""
        return self._cannot_watch if self._cannot_watch is not None else self._watches.broken

    # ------------------------------------------------------------------ events

    def _follow(self) -> None:
        """The thread: read events as they arrive until ``close``. A byte on the control pipe
        wakes it: ``x`` to stop, anything else to pick up a new inotify instance."""
        while True:
            with self._lock:
                fd = self._watches.fileno()
            poller = select.poll()
            poller.register(self._stop_r, select.POLLIN)
            if fd is not None:
                poller.register(fd, select.POLLIN)
            ready = {ready_fd for ready_fd, _ in poller.poll()}
            if self._stop_r in ready:
                if b"x" in os.read(self._stop_r, 64):
                    return
                continue
            with self._lock:
                self._read_events()

    def _read_events(self) -> None:
        """Read and record every event queued now (the lock held)."""
        try:
            events = self._watches.read()
        except OSError as error:
            self._doubt(f"reading inotify events failed: {error}", reset=True)
            return
        for event in events:
            self._record(event.wd, event.mask, event.name)

    def _doubt(self, reason: str, *, reset: bool = False) -> None:
        """Nothing can be promised until the next full scan; ``reset`` rebuilds the watches
        first (events were lost, so watches on new directories may be missing)."""
        self._pending.doubt(reason)
        self._reset_needed = self._reset_needed or reset

    def _record(self, wd: int, mask: int, name: str) -> None:
        """Turn one inotify event into changed paths (and watch changes)."""
        if mask & IN_Q_OVERFLOW:
            self._doubt("the inotify event queue overflowed", reset=True)
            return
        directory = self._watches.directory(wd)
        if directory is None:
            return
        if mask & IN_IGNORED:
            self._watches.dropped(wd, directory)
            if directory == ".":
                self._doubt("the watch on the base directory went away", reset=True)
            return
        if mask & IN_UNMOUNT:
            self._doubt(f"the filesystem holding {directory} was unmounted", reset=True)
            return
        if not name:
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF) and directory == ".":
                self._doubt("the base directory was moved or deleted", reset=True)
            elif mask & IN_ATTRIB:
                self._pending.changed(directory, tree=False)
            return
        path = join(directory, name)
        is_dir = bool(mask & IN_ISDIR)
        if mask & NAME_CHANGES:
            self._pending.changed(path, tree=True)
            self._pending.changed(directory, tree=False)
            if mask & (IN_DELETE | IN_MOVED_FROM) and is_dir:
                self._watches.unwatch(path)
            if mask & (IN_CREATE | IN_MOVED_TO) and is_dir:
                self._watches.watch_path(path)
        else:
            self._pending.changed(path, tree=not is_dir)

    # ------------------------------------------------------------------ drain

    def drain(self) -> Changes:
        """Everything that changed since the previous drain, and start afresh. Call it just
        before a checkpoint's scan begins: what changes from then on is in the next one."""
        with self._lock:
            if self.broken is not None:
                return Changes(full=self.broken)
            self._read_events()
            self._check_base()
            if self._reset_needed:
                self._open()
                self._reset_needed = False
                if self._stop_w >= 0:
                    os.write(self._stop_w, b"r")
            if self.broken is not None:
                self._pending.doubt(self.broken)
            changes = self._pending.take(self._watches.unwatchable)
        return minimal(changes)

    def _check_base(self) -> None:
        """The base directory's path must still name the directory watched (a directory
        above it may have been renamed, which no watch here reports)."""
        try:
            same = file_id(os.stat(self.base_dir)) == self._base_id
        except OSError:
            same = False
        if not same:
            self._doubt(f"{self.base_dir} is no longer the directory being watched", reset=True)
            with contextlib.suppress(OSError):
                self._base_id = file_id(os.stat(self.base_dir))
