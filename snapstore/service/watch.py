"""Change tracking for a long-lived server: which paths under a base directory changed since
the last checkpoint, learnt from inotify instead of a scan.

A full scan of an unchanged 50,000-file tree costs about a second of ``lstat`` even with the
library's stat cache. A server that keeps watching the tree knows which paths changed, so an
incremental checkpoint only has to look at those. What this module guarantees, and what the
library must do with it, is the contract of ``Changes``:

    Every path whose recorded entry (kind, mode, size, mtime, digest, link target) differs
    from the previous checkpoint's, or that appeared or disappeared, lies at or below a path
    of ``rescan``, or is a directory listed in ``refresh`` (only its own entry changed: a
    chmod, or a name added or removed in it, which moves its mtime). Or ``full`` is set, and
    nothing is promised: scan everything.

``full`` is set whenever there is any doubt: the kernel's event queue overflowed, a watch
could not be added (the ``fs.inotify.max_user_watches`` limit), the base directory was moved
or replaced, an exclude file (``.snapstoreignore``, a ``.gitignore``) changed, too many paths
changed to be worth tracking, the filesystem is not one whose changes all pass through this
kernel (NFS, FUSE, SMB...), or inotify is not available at all (not Linux, or the ``watch``
extra not installed). A directory that cannot be watched (permission denied) is rescanned
every time.

What inotify cannot see, this cannot either: writes through a shared memory mapping while
the mapping lasts (its release is seen, as IN_CLOSE_WRITE; the library's stat cache has the
same blind spot, and ``rehash`` reads everything), and writes through a hard link that lives
outside the watched directories. docs/protocol.md ("Watching") says so to clients.

A watched create is ``SnapStore.create_incremental``: the library drains the watch through
the ``changes`` callback once it holds the base directory's lock, builds on the checkpoint the
watch's previous create committed, and scans everything instead when the drain is ``full`` or
it has doubts of its own (``snapstore.worktree.incremental``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from snapstore.fs.mounts import LOCAL_FILESYSTEMS, filesystem_type
from snapstore.fs.stamps import FileId, file_id
from snapstore.repo.layout import MARKER_FILE
from snapstore.service.protocol import WatchError

if TYPE_CHECKING:
    from snapstore import SnapStore
    from snapstore.models import FileEntry, SnapshotInfo
    from snapstore.worktree.incremental import ChangedPaths, ChangeSource, IncrementalReport

Progress = Callable[[int, int], None]

MAX_TRACKED = 10_000
"""More changed paths than this, and the next checkpoint is a full scan (it would read most
of what a scan reads anyway, and the server's memory stays bounded)."""

MAX_WATCHERS = 32
"""Watched (base directory, paths) pairs per server: each is an inotify instance, of which
a user gets 128 by default (``fs.inotify.max_user_instances``)."""

EXCLUDE_FILES = frozenset({".snapstoreignore", ".gitignore"})
"""Names whose change changes which paths a checkpoint records: a full scan follows."""

# inotify(7) constants; the same on every Linux architecture.
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000

WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_NAME_CHANGES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO


def watch_support() -> dict[str, Any]:
    """Whether this server can watch directories: ``available``, and the ``reason`` if not."""
    if not sys.platform.startswith("linux"):
        return {"available": False, "reason": "inotify is Linux only: watched creates scan"}
    try:
        import inotify_simple  # noqa: F401
    except ImportError:
        return {
            "available": False,
            "reason": "the watch extra is not installed (pip install 'snapstore[watch]')",
        }
    return {"available": True, "reason": None}


@dataclass(frozen=True)
class Changes:
    """What changed since the last drain (see the module's docstring for the contract).
    Paths are relative to the base directory, ``/``-separated; ``"."`` is the base."""

    full: str | None = None
    """Why nothing can be promised (a full scan must follow), or None."""
    rescan: frozenset[str] = frozenset()
    """Paths whose entry, and everything below, may differ."""
    refresh: frozenset[str] = frozenset()
    """Directories whose own entry may differ, but nothing below them."""
    since_ns: int = 0
    """``time.monotonic_ns()`` when the period these changes cover began: the end of the
    previous drain."""


def under(path: str, root: str) -> bool:
    """True if ``path`` is ``root`` or lies below it (``"."`` holds everything)."""
    return root == "." or path == root or path.startswith(root + "/")


def join(directory: str, name: str) -> str:
    """``directory/name`` for relative paths, where ``"."`` is the base."""
    return name if directory == "." else f"{directory}/{name}"


def ancestors(path: str) -> list[str]:
    """The directories holding ``path``, outermost first, without the base (``a/b/c`` gives
    ``a``, ``a/b``)."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))] if path != "." else []


def parent_of(path: str) -> str:
    """The directory holding ``path`` (``"."`` for a top-level name)."""
    return path.rsplit("/", 1)[0] if "/" in path else "."


def relative_path(base_dir: str, path: str) -> str:
    """``path`` (relative to ``base_dir`` or absolute inside it) as a normalized relative
    path, as ``SnapStore.create`` records it."""
    joined = os.path.normpath(os.path.join(base_dir, path))
    relative = os.path.relpath(joined, base_dir)
    if relative == ".." or relative.startswith("../") or os.path.isabs(relative):
        raise WatchError(f"path {path!r} lies outside the base dir {base_dir!r}")
    return "." if relative == "." else relative.replace(os.sep, "/")


def minimal(changes: Changes) -> Changes:
    """The same changes without redundancy: no rescan path below another, no refresh of a
    directory that is rescanned anyway."""
    if changes.full is not None:
        return Changes(full=changes.full, since_ns=changes.since_ns)
    kept: list[str] = []
    for path in sorted(changes.rescan, key=lambda p: (p.count("/"), p)):
        if not any(under(path, other) for other in kept):
            kept.append(path)
    refresh = {p for p in changes.refresh if not any(under(p, other) for other in kept)}
    return Changes(rescan=frozenset(kept), refresh=frozenset(refresh), since_ns=changes.since_ns)


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


class _Inotify(Protocol):
    """The part of ``inotify_simple.INotify`` this module uses."""

    def add_watch(self, path: str, mask: int) -> int: ...
    def rm_watch(self, wd: int) -> None: ...
    def read(self, timeout: int | None = None) -> list[Any]: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...


def _new_inotify() -> _Inotify:
    from inotify_simple import INotify

    instance: _Inotify = INotify(nonblocking=True)
    return instance


class TreeWatcher:
    """inotify watches on the directories that hold ``paths`` under ``base_dir``: each
    requested directory with everything below it, and the directories on the way to each
    requested path (a rename of one of them moves the path).

    A thread reads the events as they come (so the kernel's queue does not overflow while the
    server is idle) and turns them into changed paths; ``drain`` hands them over. The first
    drain after ``start``, or after any doubt, is ``full``.
    """

    def __init__(self, base_dir: str, paths: Iterable[str], store_root: str) -> None:
        self.base_dir = os.path.abspath(base_dir)
        self.paths = tuple(sorted({relative_path(self.base_dir, p) for p in paths}))
        self.store_root = os.path.abspath(store_root)
        self._lock = threading.Lock()
        self._inotify: _Inotify | None = None
        self._dirs: dict[int, str] = {}
        self._wds: dict[str, int] = {}
        self._unwatchable: set[str] = set()
        self._rescan: set[str] = set()
        self._refresh: set[str] = set()
        self._full: str | None = "the watch has just started"
        self._broken: str | None = None
        self._reset_needed = False
        self._base_id: FileId | None = None
        self._store_id: FileId | None = None
        self._thread: threading.Thread | None = None
        self._stop_r, self._stop_w = -1, -1
        self._since_ns = time.monotonic_ns()
        self.events_seen = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, follow: bool = True) -> None:
        """Add the watches and start following events. A watch that cannot see everything
        is still started: its drains are ``full`` and say why. ``follow``: read events in a
        thread as they come; without it they are read only by ``drain`` (the kernel queue,
        16,384 events by default, must then hold everything between two drains)."""
        support = watch_support()
        if not support["available"]:
            self._broken = str(support["reason"])
            return
        try:
            base = os.stat(self.base_dir)
        except OSError as error:
            raise WatchError(f"cannot watch {self.base_dir}: {error.strerror}") from error
        if not os.path.isdir(self.base_dir):
            raise WatchError(f"cannot watch {self.base_dir}: not a directory")
        unreported = unreported_changes(self.base_dir)
        if unreported is not None:
            self._broken = unreported
            return
        with contextlib.suppress(OSError):
            store = os.stat(self.store_root)
            self._store_id = file_id(store)
        self._base_id = file_id(base)
        self._stop_r, self._stop_w = os.pipe()
        with self._lock:
            self._open()
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
            self._close_inotify()
        for fd in (self._stop_r, self._stop_w):
            if fd >= 0:
                os.close(fd)
        self._stop_r = self._stop_w = -1

    def _open(self) -> None:
        """A new inotify instance with every watch added (the lock held)."""
        self._close_inotify()
        self._inotify = _new_inotify()
        self._watch_path(".")

    def _close_inotify(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        self._dirs.clear()
        self._wds.clear()
        self._unwatchable.clear()

    # ------------------------------------------------------------------ status

    @property
    def watched_dirs(self) -> int:
        """How many directories carry a watch now."""
        return len(self._dirs)

    @property
    def broken(self) -> str | None:
        """Why this watch can never promise anything (every drain is full), or None."""
        return self._broken

    # ------------------------------------------------------------------ adding watches

    def _add(self, path: str) -> bool:
        """Watch the directory ``path``; False if it is not (or no longer) a directory, or
        cannot be watched. A full watch table breaks the watch."""
        assert self._inotify is not None
        if path in self._wds:
            return True
        absolute = self.base_dir if path == "." else os.path.join(self.base_dir, path)
        try:
            wd = self._inotify.add_watch(absolute, WATCH_MASK)
        except OSError as error:
            if error.errno == errno.ENOSPC:
                self._broken = (
                    "the inotify watch limit is reached (raise fs.inotify.max_user_watches)"
                )
            elif error.errno in (errno.EACCES, errno.EPERM):
                self._unwatchable.add(path)
            return False
        stale = self._dirs.get(wd)
        if stale is not None and stale != path:
            self._wds.pop(stale, None)
        self._dirs[wd] = path
        self._wds[path] = wd
        return True

    def _add_tree(self, top: str) -> None:
        """Watch ``top`` and every directory below it, not following symlinks and skipping
        the store's own root and other storage roots (which no checkpoint records)."""
        pending = [top]
        while pending:
            path = pending.pop()
            if not self._add(path):
                continue
            absolute = self.base_dir if path == "." else os.path.join(self.base_dir, path)
            try:
                with os.scandir(absolute) as listing:
                    children = [c for c in listing if c.is_dir(follow_symlinks=False)]
            except OSError as error:
                if error.errno in (errno.EACCES, errno.EPERM):
                    self._unwatchable.add(path)
                continue
            for child in children:
                child_path = join(path, child.name)
                with contextlib.suppress(OSError):
                    info = child.stat(follow_symlinks=False)
                    if file_id(info) == self._store_id:
                        continue
                    if self._base_id is not None and info.st_dev != self._base_id[0]:
                        unreported = unreported_changes(child.path)
                        if unreported is not None:
                            self._broken = unreported
                            continue
                pending.append(child_path)

    def _watch_path(self, path: str) -> None:
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

    def _unwatch(self, path: str) -> None:
        """Drop the watches on ``path`` and below (it was moved away or removed)."""
        assert self._inotify is not None
        for watched in [p for p in self._wds if under(p, path)]:
            wd = self._wds.pop(watched)
            self._dirs.pop(wd, None)
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)
        self._unwatchable = {p for p in self._unwatchable if not under(p, path)}

    # ------------------------------------------------------------------ events

    def _follow(self) -> None:
        """The thread: read events as they arrive until ``close``. A byte on the control pipe
        wakes it: ``x`` to stop, anything else to pick up a new inotify instance."""
        while True:
            with self._lock:
                fd = None if self._inotify is None else self._inotify.fileno()
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
        if self._inotify is None:
            return
        try:
            events = self._inotify.read(timeout=0)
        except OSError as error:
            self._doubt(f"reading inotify events failed: {error}", reset=True)
            return
        for event in events:
            self.events_seen += 1
            self._record(event.wd, event.mask, event.name)

    def _doubt(self, reason: str, *, reset: bool = False) -> None:
        """Nothing can be promised until the next full scan; ``reset`` rebuilds the watches
        first (events were lost, so watches on new directories may be missing)."""
        if self._full is None:
            self._full = reason
        self._reset_needed = self._reset_needed or reset

    def _changed(self, path: str, *, tree: bool) -> None:
        """Record one changed path, mapped onto what the requested paths record."""
        name = path.rsplit("/", 1)[-1]
        if name in EXCLUDE_FILES:
            self._doubt(f"{path} changed, and with it what is excluded")
            return
        if name == MARKER_FILE and "/" in path:
            path, tree = parent_of(path), True
        for requested in self.paths:
            if under(path, requested):
                (self._rescan if tree else self._refresh).add(path)
            elif tree and under(requested, path):
                self._rescan.add(requested)
        if len(self._rescan) + len(self._refresh) > MAX_TRACKED:
            self._doubt(f"more than {MAX_TRACKED} paths changed")

    def _record(self, wd: int, mask: int, name: str) -> None:
        """Turn one inotify event into changed paths (and watch changes)."""
        if mask & IN_Q_OVERFLOW:
            self._doubt("the inotify event queue overflowed", reset=True)
            return
        directory = self._dirs.get(wd)
        if directory is None:
            return
        if mask & IN_IGNORED:
            self._dirs.pop(wd, None)
            if self._wds.get(directory) == wd:
                del self._wds[directory]
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
                self._changed(directory, tree=False)
            return
        path = join(directory, name)
        is_dir = bool(mask & IN_ISDIR)
        if mask & _NAME_CHANGES:
            self._changed(path, tree=True)
            self._changed(directory, tree=False)
            if mask & (IN_DELETE | IN_MOVED_FROM) and is_dir:
                self._unwatch(path)
            if mask & (IN_CREATE | IN_MOVED_TO) and is_dir:
                self._watch_path(path)
        else:
            self._changed(path, tree=not is_dir)

    # ------------------------------------------------------------------ drain

    def drain(self) -> Changes:
        """Everything that changed since the previous drain, and start afresh. Call it just
        before a checkpoint's scan begins: what changes from then on is in the next one."""
        with self._lock:
            if self._broken is not None:
                return Changes(full=self._broken)
            self._read_events()
            self._check_base()
            if self._reset_needed:
                self._open()
                self._reset_needed = False
                if self._stop_w >= 0:
                    os.write(self._stop_w, b"r")
            changes = Changes(
                self._full if self._full is not None else self._broken,
                frozenset(self._rescan | self._unwatchable),
                frozenset(self._refresh),
                self._since_ns,
            )
            self._full = None
            self._rescan.clear()
            self._refresh.clear()
            self._since_ns = time.monotonic_ns()
        return minimal(changes)

    def _check_base(self) -> None:
        """The base directory's path must still name the directory watched (a directory
        above it may have been renamed, which no watch here reports)."""
        try:
            info = os.stat(self.base_dir)
            same = file_id(info) == self._base_id
        except OSError:
            same = False
        if not same:
            self._doubt(f"{self.base_dir} is no longer the directory being watched", reset=True)
            with contextlib.suppress(OSError):
                info = os.stat(self.base_dir)
                self._base_id = file_id(info)


class IncrementalCreate(Protocol):
    """Commit a checkpoint built on ``parent`` given the changes ``changes()`` returns (it
    drains the watch): ``SnapStore.create_incremental``, or a stand-in in tests.
    ``arguments`` are the keyword arguments of ``SnapStore.create``."""

    def __call__(
        self,
        store: SnapStore,
        arguments: dict[str, Any],
        parent: SnapshotInfo | None,
        changes: ChangeSource,
        progress: Progress | None,
    ) -> IncrementalReport: ...


def library_create(
    store: SnapStore,
    arguments: dict[str, Any],
    parent: SnapshotInfo | None,
    changes: ChangeSource,
    progress: Progress | None,
) -> IncrementalReport:
    """The library's incremental create (the ``IncrementalCreate`` a server uses)."""
    return store.create_incremental(**arguments, parent=parent, changes=changes, progress=progress)


def as_changed_paths(changes: Changes) -> ChangedPaths | None:
    """A drain as the library takes it: None when the watch vouches for nothing."""
    from snapstore.worktree.incremental import ChangedPaths

    if changes.full is not None:
        return None
    return ChangedPaths(changes.rescan, changes.refresh, changes.since_ns)


def apply_changes(
    parent: Iterable[FileEntry],
    changes: Changes,
    fresh: Callable[[str], Iterable[FileEntry]],
    refreshed: Callable[[str], FileEntry | None],
) -> list[FileEntry]:
    """The entries of the incremental checkpoint: ``parent``'s, with every entry at or below
    a ``rescan`` path replaced by ``fresh(path)`` (what a scan of it finds now: the path and
    everything below it, or nothing if it is gone) and every ``refresh`` directory's own
    entry by ``refreshed(path)``. The reference semantics of ``IncrementalCreate``."""
    if changes.full is not None:
        raise ValueError("a full change set has no incremental result")
    by_path = {entry.path: entry for entry in parent}
    for root in changes.rescan:
        for path in [p for p in by_path if under(p, root)]:
            del by_path[path]
        for entry in fresh(root):
            by_path[entry.path] = entry
    for path in changes.refresh:
        if path in by_path:
            found = refreshed(path)
            if found is None:
                del by_path[path]
            else:
                by_path[path] = found
    return [by_path[path] for path in sorted(by_path)]


@dataclass
class _Watched:
    """One watch and the checkpoint its next incremental create builds on."""

    watcher: TreeWatcher
    options: tuple[Any, ...]
    parent: SnapshotInfo | None = None
    status: dict[str, Any] = field(default_factory=dict)


class WatchSet:
    """The watches of one server, by base directory and requested paths."""

    def __init__(self, store_root: str, incremental: IncrementalCreate = library_create) -> None:
        self.store_root = store_root
        self.incremental = incremental
        self._watched: dict[tuple[str, tuple[str, ...]], _Watched] = {}

    def _key(self, paths: Iterable[str], base_dir: str) -> tuple[str, tuple[str, ...]]:
        base = os.path.abspath(base_dir)
        return base, tuple(sorted({relative_path(base, p) for p in paths}))

    def start(
        self,
        paths: list[str],
        base_dir: str = ".",
        exclude: Iterable[str] = (),
        default_excludes: bool = True,
        gitignore: bool = False,
    ) -> dict[str, Any]:
        """Watch ``paths`` under ``base_dir`` (no-op if already watched); the watch status."""
        watched = self._get(paths, base_dir, (tuple(exclude), default_excludes, gitignore))
        return self._status(watched, scan=None, reason=None)

    def _get(self, paths: Iterable[str], base_dir: str, options: tuple[Any, ...]) -> _Watched:
        key = self._key(paths, base_dir)
        watched = self._watched.get(key)
        if watched is None:
            if len(self._watched) >= MAX_WATCHERS:
                raise WatchError(f"this server already watches {MAX_WATCHERS} path sets")
            watcher = TreeWatcher(key[0], key[1], self.store_root)
            watcher.start()
            watched = self._watched[key] = _Watched(watcher, options)
        elif watched.options != options:
            watched.options, watched.parent = options, None
        return watched

    def stop(self, paths: list[str], base_dir: str = ".") -> bool:
        """Stop watching ``paths`` under ``base_dir``; False if they were not watched."""
        watched = self._watched.pop(self._key(paths, base_dir), None)
        if watched is None:
            return False
        watched.watcher.close()
        return True

    def close(self) -> None:
        """Stop every watch."""
        for watched in self._watched.values():
            watched.watcher.close()
        self._watched.clear()

    def create(
        self, store: SnapStore, arguments: dict[str, Any], progress: Progress | None
    ) -> tuple[SnapshotInfo, dict[str, Any]]:
        """``SnapStore.create(**arguments)`` for a watched base directory, built on the
        checkpoint this watch's previous create committed, with the changes drained once the
        library holds the base directory's lock. Returns the header and the watch status."""
        options = (
            tuple(arguments["exclude"]),
            arguments["default_excludes"],
            arguments["gitignore"],
        )
        watched = self._get(arguments["paths"], arguments["base_dir"], options)
        parent, watched.parent = watched.parent, None
        drained: list[Changes] = []

        def changes() -> ChangedPaths | None:
            drained.append(watched.watcher.drain())
            return as_changed_paths(drained[-1])

        try:
            report = self.incremental(store, arguments, parent, changes, progress)
        except BaseException:
            if not drained:
                watched.parent = parent
            raise
        watched.parent = report.info
        reason = report.reason
        if drained and drained[-1].full is not None:
            reason = drained[-1].full
        status = self._status(watched, scan=report.scan, reason=reason)
        if report.scan == "incremental":
            status["rescanned"] = report.rescanned
            status["refreshed"] = report.refreshed
        return report.info, status

    def _status(self, watched: _Watched, *, scan: str | None, reason: str | None) -> dict[str, Any]:
        watcher = watched.watcher
        status: dict[str, Any] = {
            "base_dir": watcher.base_dir,
            "paths": list(watcher.paths),
            "active": watcher.broken is None,
            "watched_dirs": watcher.watched_dirs,
        }
        if watcher.broken is not None:
            status["reason"] = watcher.broken
        if scan is not None:
            status["scan"] = scan
            status["reason"] = reason
        return status


def entries_below(entries: Iterable[FileEntry], root: str) -> Iterator[FileEntry]:
    """The entries at or below ``root``."""
    return (entry for entry in entries if under(entry.path, root))
