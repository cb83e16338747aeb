"""The plain data types the public API returns: snapshot metadata, entries and reports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypeVar

EntryKind = Literal["file", "symlink", "dir", "absent"]
SnapshotKind = Literal["files", "state"]
ENTRY_KINDS: tuple[EntryKind, ...] = ("file", "symlink", "dir", "absent")


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
"""The field names of each dataclass ``_jsonable`` met, in order (``dataclasses.fields`` per
instance was most of the cost of listing 50,000 headers as JSON)."""


def _jsonable(value: Any) -> Any:
    """Turn report field values into JSON-friendly ones (datetimes, bytes, tuples)."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return value
    names = _FIELD_NAMES.get(kind)
    if names is not None:
        return {name: _jsonable(getattr(value, name)) for name in names}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, FileEntry):
        return dict(zip(value._fields, map(_jsonable, value), strict=True))
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[kind] = tuple(field.name for field in dataclasses.fields(value))
        return {name: _jsonable(getattr(value, name)) for name in names}
    return value


_Frozen = TypeVar("_Frozen")


def frozen_from_fields(cls: type[_Frozen], fields: dict[str, Any]) -> _Frozen:
    """An instance of the frozen dataclass ``cls`` holding ``fields`` (every field, already
    validated), built without its __init__: a frozen __init__ sets each field through
    ``object.__setattr__``, which is most of the cost of decoding 10,000 headers."""
    instance = object.__new__(cls)
    object.__setattr__(instance, "__dict__", fields)
    return instance


class _ToDict:
    """Mixin giving dataclasses a JSON-ready ``to_dict()``."""

    def to_dict(self) -> dict[str, Any]:
        result = _jsonable(self)
        assert isinstance(result, dict)
        return result


class FileEntry(NamedTuple):
    """One path of a snapshot: what was there when the snapshot was taken. An immutable
    named tuple, laid out like a manifest row: decoding 50,000 entries builds one each."""

    path: str
    kind: EntryKind
    mode: int = 0
    size: int = 0
    mtime_ns: int = 0
    digest: bytes | None = None
    target: str | None = None
    extents: bool = False
    """A file stored as an extent map (a file with holes, or any file of 1 MiB or more, cut
    into content-defined chunks): ``digest`` names the map (its data pieces, by offset), not
    its bytes. ``SnapStore.read`` gives its bytes either way, holes as zeros."""
    link: str | None = None
    """A file hard-linked, when the snapshot was taken, to the file at this path (the first
    path of its link group), which records the same content; a restore links them again."""

    def to_dict(self) -> dict[str, Any]:
        """The entry's fields, JSON-ready (the digest as hex)."""
        result = _jsonable(self)
        assert isinstance(result, dict)
        return result


@dataclass(frozen=True)
class SkippedPath(_ToDict):
    """A path that ``create(..., skip_unreadable=True)`` could not store, and why."""

    path: str
    error: str


@dataclass(frozen=True)
class SnapshotInfo(_ToDict):
    """A snapshot's header: who, when, how big; loaded without touching any blob."""

    session: str
    name: str
    kind: SnapshotKind
    created_at: datetime
    expires_at: datetime | None
    file_count: int
    total_bytes: int
    meta: dict[str, Any]
    base_dir: str
    skipped: tuple[SkippedPath, ...] = ()
    roots: tuple[str, ...] = ()
    """The requested paths whose directories were recorded completely ("." is the base dir):
    a restore removes what the target holds in them beyond the snapshot."""
    backup_of: str | None = None
    """Set on undo backups only: the name of the snapshot whose restore this backup was taken
    before (undo backups are listed by ``SnapStore.backups``, never by ``list``)."""
    excludes: tuple[str, ...] = ()
    """The exclude rules the snapshot was taken with (gitignore syntax, relative to its base
    directory, in order); a restore leaves what they match alone."""
    stored_bytes: int | None = None
    """The compressed bytes this checkpoint added to the store when it was made: the packs
    and loose blobs its create wrote (what it did not share with what was already stored),
    recorded in its manifest. None for state values and for snapshots made before it was
    recorded."""
    replaced: bool = False
    """Set only on what ``create`` returns: it replaced a snapshot of the same name."""

    @property
    def is_backup(self) -> bool:
        """True for an undo backup (kept by a restore), False for a checkpoint."""
        return self.backup_of is not None


@dataclass(frozen=True)
class Snapshot(_ToDict):
    """A snapshot's header and entries; blob contents load lazily via ``SnapStore.read``."""

    info: SnapshotInfo
    entries: tuple[FileEntry, ...]

    def entry(self, path: str) -> FileEntry | None:
        """The entry recorded for ``path``, or None."""
        for candidate in self.entries:
            if candidate.path == path:
                return candidate
        return None


@dataclass(frozen=True)
class PathVersion(_ToDict):
    """One change of a path across a session's checkpoints: the snapshot where it changed, and
    the path's entry there (None: the path is gone, or absent, from that snapshot on)."""

    snapshot: SnapshotInfo
    entry: FileEntry | None


@dataclass(frozen=True)
class FileSlice(_ToDict):
    """Part of one file of a snapshot (``SnapStore.read_slice``): its recorded ``size``, the
    ``data`` from ``offset`` on, and whether the file is binary (a NUL byte in its first
    8 KiB, as git decides)."""

    path: str
    size: int
    offset: int
    data: bytes
    binary: bool

    @property
    def end(self) -> int:
        """The offset just after ``data``: where the next part starts."""
        return self.offset + len(self.data)

    @property
    def complete(self) -> bool:
        """Whether ``data`` reaches the end of the file."""
        return self.end >= self.size


@dataclass
class RestoreReport(_ToDict):
    """What a restore wrote, removed and left alone (or would, with ``dry_run``)."""

    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    dry_run: bool = False
    target: str = ""
    backup: str | None = None
    """The undo backup this restore kept of what it replaced (``SnapStore.undo``)."""
    kept: list[str] = field(default_factory=list)
    """Paths left alone whatever the snapshot records: storage roots, paths the snapshot
    could not record, excluded paths, special files."""


@dataclass
class DiffReport(_ToDict):
    """What changed from a snapshot to a directory, or from one snapshot to another, read as
    ``git diff`` reads: ``added``, in the directory (or second snapshot) but not in the
    snapshot (a restore would remove it); ``removed``, in the snapshot but not in the
    directory (a restore would put it back); ``modified``, in both but different.
    """

    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when a restore would change anything."""
        return bool(self.added or self.modified or self.removed)


@dataclass
class SweepReport(_ToDict):
    """The (session, name) pairs a sweep deleted, and those whose recorded creation time lies
    ahead of when their manifest was written (a writer's clock ran ahead: they are aged and
    ordered by the earlier time)."""

    deleted: list[tuple[str, str]] = field(default_factory=list)
    future_stamped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class GcReport(_ToDict):
    """What blob garbage collection freed, or that it was skipped because the store was busy."""

    blobs_deleted: int = 0
    bytes_freed: int = 0
    temp_files_removed: int = 0
    skipped: bool = False
    reason: str | None = None
    """Why it was skipped, or what damage stopped part of it: ``problems`` joined, or that
    the store was busy."""
    locked: bool = False
    """Skipped because the gc lock could not be taken within the lock timeout."""
    problems: list[str] = field(default_factory=list)
    """Damage that stopped part of the collection (a corrupt manifest, a pack that could not
    be rewritten, a manifest that could not be converted); ``verify`` says more."""
    packs_deleted: int = 0
    packs_written: int = 0
    manifests_converted: int = 0
    """Format 1 manifests this run replaced by their format 2 form (see ``SnapStore.upgrade``)."""


@dataclass
class VerifyReport(_ToDict):
    """Damage to committed data (``problems``) and leftovers gc would clean (``garbage``)."""

    ok: bool = True
    problems: list[str] = field(default_factory=list)
    garbage: list[str] = field(default_factory=list)
    snapshots_checked: int = 0
    blobs_checked: int = 0
