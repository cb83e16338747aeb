"""The change set a watch drains, and how it is gathered between two drains.

The contract of ``Changes``, which the library's incremental create relies on:

    Every path whose recorded entry (kind, mode, size, mtime, digest, link target) differs
    from the previous checkpoint's, or that appeared or disappeared, lies at or below a path
    of ``rescan``, or is a directory listed in ``refresh`` (only its own entry changed: a
    chmod, or a name added or removed in it, which moves its mtime). Or ``full`` is set, and
    nothing is promised: scan everything.

``PendingChanges`` maps each changed path onto what the requested paths record, and turns to
``full`` when an exclude file changes (what is recorded changes with it) or too many paths
changed to be worth tracking. ``apply_changes`` is the reference semantics of a change set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from snapstore.backend.layout import MARKER_FILE
from snapstore.worktree.basepaths import relative_to_base
from snapstore.worktree.changes import ChangedPaths, outermost, under

if TYPE_CHECKING:
    from snapstore.models import FileEntry

MAX_TRACKED = 10_000
"""More changed paths than this, and the next checkpoint is a full scan (it would read most
of what a scan reads anyway, and the server's memory stays bounded)."""

EXCLUDE_FILES = frozenset({".snapstoreignore", ".gitignore"})
"""Names whose change changes which paths a checkpoint records: a full scan follows."""


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


def requested_paths(base_dir: str, paths: Iterable[str]) -> tuple[str, ...]:
    """The paths a watch of ``base_dir`` follows, normalized as ``SnapStore.create`` records
    them (UnsafePathError as it raises it), sorted and without repeats: what identifies a
    watch, whichever way its paths were spelled."""
    return tuple(sorted({relative_to_base(base_dir, path) for path in paths}))


def minimal(changes: Changes) -> Changes:
    """The same changes without redundancy: no rescan path below another, no refresh of a
    directory that is rescanned anyway."""
    if changes.full is not None:
        return Changes(full=changes.full, since_ns=changes.since_ns)
    kept = outermost(changes.rescan)
    refresh = {p for p in changes.refresh if not any(under(p, other) for other in kept)}
    return Changes(rescan=frozenset(kept), refresh=frozenset(refresh), since_ns=changes.since_ns)


class PendingChanges:
    """The changes seen since the last drain of a watch of the requested ``paths``. The first
    drain is ``full``: nothing was watched before."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths
        self.full: str | None = "the watch has just started"
        self._rescan: set[str] = set()
        self._refresh: set[str] = set()
        self._since_ns = time.monotonic_ns()

    def doubt(self, reason: str) -> None:
        """Nothing can be promised until the next drain (the first reason given stands)."""
        if self.full is None:
            self.full = reason

    def changed(self, path: str, *, tree: bool) -> None:
        """Record one changed path (with everything below it if ``tree``, else its own entry
        alone), mapped onto what the requested paths record. A storage root's marker that
        appears or goes makes its directory enter or leave what is recorded."""
        name = path.rsplit("/", 1)[-1]
        if name in EXCLUDE_FILES:
            self.doubt(f"{path} changed, and with it what is excluded")
            return
        if name == MARKER_FILE and "/" in path:
            path, tree = parent_of(path), True
        for requested in self.paths:
            if under(path, requested):
                (self._rescan if tree else self._refresh).add(path)
            elif tree and under(requested, path):
                self._rescan.add(requested)
        if len(self._rescan) + len(self._refresh) > MAX_TRACKED:
            self.doubt(f"more than {MAX_TRACKED} paths changed")

    def take(self, always_rescan: Iterable[str]) -> Changes:
        """What changed since the previous ``take``, with ``always_rescan`` among the rescanned
        paths, and start afresh. Not yet ``minimal``."""
        changes = Changes(
            self.full,
            frozenset(self._rescan.union(always_rescan)),
            frozenset(self._refresh),
            self._since_ns,
        )
        self.full = None
        self._rescan.clear()
        self._refresh.clear()
        self._since_ns = time.monotonic_ns()
        return changes


def as_changed_paths(changes: Changes) -> ChangedPaths | None:
    """A drain as the library takes it: None when the watch vouches for nothing."""
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


def entries_below(entries: Iterable[FileEntry], root: str) -> Iterator[FileEntry]:
    """The entries at or below ``root``."""
    return (entry for entry in entries if under(entry.path, root))
