"""``WatchSet``: the watches of one server, and the watched create that builds each checkpoint
on the one before it with only the changes its watch saw scanned again."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from snapstore.service.confine import os_path_text
from snapstore.service.protocol import WatchError
from snapstore.service.watch.changes import Changes, as_changed_paths, requested_paths
from snapstore.service.watch.tree import TreeWatcher

if TYPE_CHECKING:
    from snapstore import SnapStore
    from snapstore.models import SnapshotInfo
    from snapstore.worktree.changes import ChangedPaths, ChangeSource
    from snapstore.worktree.incremental import IncrementalReport

Progress = Callable[[int, int], None]

MAX_WATCHERS = 32
"""Watched (base directory, paths) pairs per server: each is an inotify instance, of which
a user gets 128 by default (``fs.inotify.max_user_instances``)."""


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


@dataclass
class _Watched:
    """One watch and the checkpoint its next incremental create builds on."""

    watcher: TreeWatcher
    options: tuple[Any, ...]
    parent: SnapshotInfo | None = None


class WatchSet:
    """The watches of one server, by base directory and requested paths."""

    def __init__(self, store_root: str, incremental: IncrementalCreate = library_create) -> None:
        self.store_root = store_root
        self.incremental = incremental
        self._watched: dict[tuple[str, tuple[str, ...]], _Watched] = {}

    def _key(self, paths: Iterable[str], base_dir: str) -> tuple[str, tuple[str, ...]]:
        base = os.path.abspath(os_path_text(base_dir, "base_dir"))
        return base, requested_paths(base, paths)

    def start(
        self,
        paths: list[str],
        base_dir: str = ".",
        exclude: Iterable[str] = (),
        default_excludes: bool = True,
        gitignore: bool = True,
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
