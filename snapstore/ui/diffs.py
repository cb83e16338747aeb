"""What changed between two sides, and unified diffs of text files, for the web UI.

A side is a checkpoint (session, name) or a directory as it is now. Every comparison names its
direction explicitly: ``changes(old, new)`` and ``file_diff(old, new, change)`` read "from
``old`` to ``new``" in git's sense (a line only in ``new`` is a ``+`` line, a path only in
``new`` is ``added``). The UI compares a checkpoint with the one before it (``old`` = the
previous one), two checkpoints (older to newer) and a checkpoint with its directory
(``old`` = the checkpoint, ``new`` = the directory).

Built on the public API only: entries from ``SnapStore.get``, bytes from ``SnapStore.read``,
the set of paths where a directory differs from ``SnapStore.diff(..., target=)`` (only which
paths; the direction of its ``added``/``removed`` labels is not relied on), and one file's
binary detection and hunks from ``snapstore.patch.file_patch`` (what ``SnapStore.patch``
computes). What is the UI's own: which paths changed between the sides it compares, reading
one file at a time (the page loads diffs lazily), the row kinds its templates render, and its
bounds.

Bounds: a side larger than ``MAX_SIDE_BYTES`` is not read (``too-large``); a NUL byte in the
first 8 KiB of either side makes a file ``binary`` (named, not shown; ``snapstore.patch``
decides, as git does); a diff longer than ``MAX_DIFF_LINES`` lines is cut (``truncated``).
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from snapstore.models import FileEntry, SnapshotInfo
from snapstore.patch import FilePatch, file_patch

if TYPE_CHECKING:
    from snapstore.store import SnapStore

MAX_SIDE_BYTES = 512 * 1024
"""The largest side (bytes) a text diff reads."""
MAX_DIFF_LINES = 3000
"""The most lines of one file's unified diff that are shown."""
CONTEXT_LINES = 3

Status = Literal["added", "modified", "removed"]
Rendering = Literal["text", "binary", "too-large", "not-a-file", "same"]


@dataclass(frozen=True)
class Version:
    """What one side holds at a path (content is compared by ``digest`` where known)."""

    kind: str
    size: int
    mode: int
    digest: str | None = None
    target: str | None = None

    @classmethod
    def of_entry(cls, entry: FileEntry) -> Version | None:
        """The version a checkpoint records; None for a path recorded absent."""
        if entry.kind == "absent":
            return None
        digest = entry.digest.hex() if entry.digest is not None else None
        return cls(entry.kind, entry.size, entry.mode & 0o7777, digest, entry.target)

    def same_as(self, other: Version) -> bool:
        """Whether both sides hold the same thing (mtime is not compared, as ``diff``)."""
        return (self.kind, self.mode, self.size, self.digest, self.target) == (
            other.kind,
            other.mode,
            other.size,
            other.digest,
            other.target,
        )


@dataclass(frozen=True)
class Side:
    """One side of a comparison: checkpoint ``name`` of ``session``, or ``directory``, or
    neither: nothing at all (what the first checkpoint of a session is compared with)."""

    session: str
    name: str | None = None
    directory: str | None = None

    @property
    def label(self) -> str:
        """How the UI names this side."""
        if self.name is not None:
            return self.name
        return "nothing" if self.directory is None else f"{self.directory} (now)"


@dataclass(frozen=True)
class Change:
    """A path that differs from ``old`` to ``new`` (None: not there on that side)."""

    path: str
    status: Status
    old: Version | None
    new: Version | None


@dataclass(frozen=True)
class TextDiff:
    """One file's change as a unified diff from ``old`` to ``new``, or why it is not shown."""

    change: Change
    rendering: Rendering
    lines: tuple[str, ...] = ()
    truncated: bool = False

    @property
    def rows(self) -> list[tuple[str, str]]:
        """Each line of the diff with what it is: ``header`` (the two file lines), ``hunk``,
        ``add``, ``delete``, ``context`` or ``marker`` (``\\ No newline at end of file``)."""
        found: list[tuple[str, str]] = []
        for index, line in enumerate(self.lines):
            if index < 2:
                kind = "header"
            elif line.startswith("@@"):
                kind = "hunk"
            elif line.startswith("\\"):
                kind = "marker"
            else:
                kind = {"+": "add", "-": "delete"}.get(line[:1], "context")
            found.append((kind, line))
        return found


class EntryCache:
    """The entries of the last few snapshots read, by (session, name, created_at): a
    timeline compares each checkpoint with the one before, so most are read twice."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._cached: OrderedDict[tuple[str, str, str], dict[str, Version | None]] = OrderedDict()

    def versions(self, store: SnapStore, info: SnapshotInfo) -> dict[str, Version | None]:
        """Each recorded path of the snapshot ``info`` and its version."""
        key = (info.session, info.name, info.created_at.isoformat())
        found = self._cached.get(key)
        if found is not None:
            self._cached.move_to_end(key)
            return found
        snapshot = store.get(info.session, info.name)
        found = {entry.path: Version.of_entry(entry) for entry in snapshot.entries}
        self._cached[key] = found
        while len(self._cached) > self.size:
            self._cached.popitem(last=False)
        return found


def _status(old: Version | None, new: Version | None) -> Status | None:
    """How a path changed from ``old`` to ``new``; None if it did not."""
    if old is None and new is None:
        return None
    if old is None:
        return "added"
    if new is None:
        return "removed"
    return None if old.same_as(new) else "modified"


def checkpoint_changes(
    old: dict[str, Version | None], new: dict[str, Version | None]
) -> list[Change]:
    """What changed from one checkpoint's versions to another's, sorted by path."""
    found: list[Change] = []
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        status = _status(before, after)
        if status is not None:
            found.append(Change(path, status, before, after))
    return found


def directory_version(directory: str, path: str) -> Version | None:
    """What ``directory`` holds at the relative ``path`` now, found through real directories
    only: a symlink, on the way or at the end, is never followed (a path below a symlink is
    not in the directory, as a restore sees it)."""
    current = directory
    *parents, name = path.split("/")
    for part in parents:
        current = os.path.join(current, part)
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return None
        except (FileNotFoundError, NotADirectoryError):
            return None
    full = os.path.join(current, name)
    try:
        info = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Version("symlink", 0, mode, None, os.readlink(full))
    if stat.S_ISDIR(info.st_mode):
        return Version("dir", 0, mode)
    if stat.S_ISREG(info.st_mode):
        return Version("file", info.st_size, mode)
    return Version("special", 0, mode)


def directory_changes(
    store: SnapStore, checkpoint: dict[str, Version | None], session: str, name: str, directory: str
) -> list[Change]:
    """What changed from checkpoint ``name`` to ``directory`` as it is now, sorted by path.

    Which paths differ is the library's (the paths a restore would change); what each holds
    on the directory's side is read from the directory."""
    report = store.diff(session, name, target=directory)
    found: list[Change] = []
    for path in sorted({*report.added, *report.modified, *report.removed}):
        before, after = checkpoint.get(path), directory_version(directory, path)
        status: Status
        if before is None and after is None:
            continue
        if before is None:
            status = "added"
        elif after is None:
            status = "removed"
        else:
            status = "modified"
        found.append(Change(path, status, before, after))
    return found


def _checkpoint_bytes(
    store: SnapStore, side: Side, path: str, version: Version | None
) -> bytes | None:
    """The bytes checkpoint ``side`` holds at ``path`` (None where it holds no file)."""
    if version is None or version.kind != "file" or side.name is None:
        return None
    return store.read(side.session, side.name, path)


def _shown_as_text(version: Version | None) -> bool:
    """Whether a side's content takes part in a text diff (files; nothing at all)."""
    return version is None or version.kind == "file"


def _symlink_text(version: Version | None) -> bytes | None:
    """A symlink shown as one line naming its target (None: no symlink on that side)."""
    if version is None or version.target is None:
        return None
    return f"-> {version.target}\n".encode("utf-8", "surrogateescape")


def file_diff(store: SnapStore, old: Side, new: Side, change: Change) -> TextDiff:
    """The unified diff of ``change.path`` from ``old`` to ``new``, within the bounds above.

    Binary detection and hunks are the library's (``snapstore.patch``): two checkpoints'
    bytes go through ``file_patch``; a checkpoint and its directory through
    ``SnapStore.patch``, which reads the directory through real directories only. The UI
    adds its bounds, its symlink line and the names of both sides."""
    before, after = change.old, change.new
    kinds = {version.kind for version in (before, after) if version is not None}
    if kinds == {"symlink"}:
        symlinks = file_patch(
            change.path, _symlink_text(before), _symlink_text(after), context=CONTEXT_LINES
        )
        return _rendered(change, old, new, symlinks)
    if not (_shown_as_text(before) and _shown_as_text(after)):
        return TextDiff(change, "not-a-file")
    if any(version.size > MAX_SIDE_BYTES for version in (before, after) if version is not None):
        return TextDiff(change, "too-large")
    if new.directory is not None and old.name is not None:
        found = store.patch(
            old.session,
            old.name,
            target=new.directory,
            paths=[change.path],
            context=CONTEXT_LINES,
            max_bytes=None,
            max_file_bytes=MAX_SIDE_BYTES,
        ).files
        return _rendered(change, old, new, found[0] if found else None)
    old_bytes = _checkpoint_bytes(store, old, change.path, before)
    new_bytes = _checkpoint_bytes(store, new, change.path, after)
    return _rendered(
        change, old, new, file_patch(change.path, old_bytes, new_bytes, context=CONTEXT_LINES)
    )


def _rendered(change: Change, old: Side, new: Side, patch: FilePatch | None) -> TextDiff:
    """A file's patch (None: nothing changed) as the UI shows it: named as binary or too
    large, or as lines naming both sides, then each hunk, cut at ``MAX_DIFF_LINES``."""
    if patch is None:
        return TextDiff(change, "same")
    if patch.too_large:
        return TextDiff(change, "too-large")
    if patch.binary:
        return TextDiff(change, "binary")
    if not patch.hunks:
        return TextDiff(change, "same")
    lines = [f"--- {old.label}/{change.path}", f"+++ {new.label}/{change.path}"]
    for hunk in patch.hunks:
        lines.append(hunk.header)
        for line in hunk.lines:
            lines.extend(line.split("\n"))
    truncated = len(lines) > MAX_DIFF_LINES
    return TextDiff(change, "text", tuple(lines[:MAX_DIFF_LINES]), truncated)
