"""What changed between two sides, and unified diffs of text files, for the web UI.

A side is a checkpoint (session, name) or a directory as it is now. Every comparison names its
direction explicitly: ``changes(old, new)`` and ``file_diff(old, new, change)`` read "from
``old`` to ``new``" in git's sense (a line only in ``new`` is a ``+`` line, a path only in
``new`` is ``added``). The UI compares a checkpoint with the one before it (``old`` = the
previous one), two checkpoints (older to newer) and a checkpoint with its directory
(``old`` = the checkpoint, ``new`` = the directory).

Built on the public ``SnapStore`` API only: entries from ``get``, bytes from ``read``, and the
set of paths where a directory differs from ``diff(..., target=)`` (only which paths; the
direction of its ``added``/``removed`` labels is not relied on). This module is the one place
the UI computes diffs, so it can delegate to a library API for text diffs once there is one.

Bounds: a side larger than ``MAX_SIDE_BYTES`` is not read (``too-large``); a NUL byte in the
first ``BINARY_PROBE`` bytes of either side makes a file ``binary`` (named, not shown); a diff
longer than ``MAX_DIFF_LINES`` lines is cut (``truncated``).
"""

from __future__ import annotations

import difflib
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from snapstore.models import FileEntry, SnapshotInfo

if TYPE_CHECKING:
    from snapstore.store import SnapStore

MAX_SIDE_BYTES = 512 * 1024
"""The largest side (bytes) a text diff reads."""
BINARY_PROBE = 8192
"""How many leading bytes are looked at for a NUL byte (git looks at the first 8000)."""
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
        ``add``, ``delete`` or ``context``."""
        found: list[tuple[str, str]] = []
        for index, line in enumerate(self.lines):
            if index < 2:
                kind = "header"
            elif line.startswith("@@"):
                kind = "hunk"
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
    """What ``directory`` holds at the relative ``path`` now (never following a symlink)."""
    try:
        info = os.lstat(os.path.join(directory, path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Version("symlink", 0, mode, None, os.readlink(os.path.join(directory, path)))
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


def _side_bytes(store: SnapStore, side: Side, path: str, version: Version | None) -> bytes:
    """The bytes a side holds at ``path`` (empty where it holds no file)."""
    if version is None or version.kind != "file":
        return b""
    if side.name is not None:
        return store.read(side.session, side.name, path)
    if side.directory is None:
        return b""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(os.path.join(side.directory, path), flags)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(MAX_SIDE_BYTES + 1)


def _shown_as_text(version: Version | None) -> bool:
    """Whether a side's content takes part in a text diff (files; nothing at all)."""
    return version is None or version.kind == "file"


def is_binary(data: bytes) -> bool:
    """A NUL byte among the first ``BINARY_PROBE`` bytes, as git decides."""
    return b"\0" in data[:BINARY_PROBE]


def _symlink_lines(version: Version | None) -> list[str]:
    """A symlink shown as one line naming its target."""
    return [] if version is None or version.target is None else [f"-> {version.target}"]


def file_diff(store: SnapStore, old: Side, new: Side, change: Change) -> TextDiff:
    """The unified diff of ``change.path`` from ``old`` to ``new``, within the bounds above."""
    before, after = change.old, change.new
    kinds = {version.kind for version in (before, after) if version is not None}
    if kinds == {"symlink"}:
        return _unified(change, old, new, _symlink_lines(before), _symlink_lines(after))
    if not (_shown_as_text(before) and _shown_as_text(after)):
        return TextDiff(change, "not-a-file")
    if any(version.size > MAX_SIDE_BYTES for version in (before, after) if version is not None):
        return TextDiff(change, "too-large")
    old_bytes = _side_bytes(store, old, change.path, before)
    new_bytes = _side_bytes(store, new, change.path, after)
    if len(old_bytes) > MAX_SIDE_BYTES or len(new_bytes) > MAX_SIDE_BYTES:
        return TextDiff(change, "too-large")
    if is_binary(old_bytes) or is_binary(new_bytes):
        return TextDiff(change, "binary")
    if old_bytes == new_bytes:
        return TextDiff(change, "same")
    return _unified(change, old, new, _text_lines(old_bytes), _text_lines(new_bytes))


def _text_lines(data: bytes) -> list[str]:
    """A file's lines, decoded as UTF-8 (undecodable bytes shown as U+FFFD)."""
    return data.decode("utf-8", errors="replace").splitlines()


def _unified(change: Change, old: Side, new: Side, before: list[str], after: list[str]) -> TextDiff:
    """The unified diff of two lists of lines, cut at ``MAX_DIFF_LINES``."""
    lines: list[str] = []
    truncated = False
    for line in difflib.unified_diff(
        before,
        after,
        fromfile=f"{old.label}/{change.path}",
        tofile=f"{new.label}/{change.path}",
        n=CONTEXT_LINES,
        lineterm="",
    ):
        if len(lines) >= MAX_DIFF_LINES:
            truncated = True
            break
        lines.append(line)
    if not lines:
        return TextDiff(change, "same")
    return TextDiff(change, "text", tuple(lines), truncated)
