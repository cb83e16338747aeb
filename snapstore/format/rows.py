"""Manifest rows: one recorded path each, and the rules a format 1 manifest's flat list of
them must follow (format 2 stores them as trees: ``snapstore.format.tree``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from snapstore.errors import CorruptManifestError, UnsafePathError
from snapstore.format.paths import all_plain_paths, check_relative_path, nearest_listed_ancestor
from snapstore.models import ENTRY_KINDS, EntryKind, FileEntry, SnapshotInfo

MAX_ENTRIES = 5_000_000
DIGEST_BYTES = 32

EntryRow = tuple[str, EntryKind, int, int, int, bytes | None, str | None]
"""One entry as a manifest records it: path, kind, mode, size, mtime_ns, digest, target
(a FileEntry is one, with names). ``create`` builds plain tuples: cheaper still."""


_NO_ATTRS = [False, None]
"""A format 1 row's file attributes: none (``FileEntry.extents``, ``FileEntry.link``)."""


def entry_rows(entries: Iterable[FileEntry]) -> list[EntryRow]:
    """FileEntry objects as format 1 manifest rows (their first seven fields). ValueError
    for an entry with file attributes, which a format 1 manifest cannot record (dropping
    ``extents`` would make a map's digest pass for the file's bytes)."""
    rows = []
    for entry in entries:
        if entry.extents or entry.link is not None:
            raise ValueError(f"{entry.path!r} has file attributes a format 1 row cannot hold")
        rows.append(entry[:7])
    return rows


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CorruptManifestError(message)


def rows_need_no_row_checks(rows: list[Any]) -> bool:
    """A cheap sufficient test that every row would pass ``check_entry_row``, done column by
    column with C-level passes (a Python check per row is most of the cost of decoding a
    large manifest). False only means: check each row."""
    if not rows:
        return True
    if set(map(type, rows)) != {list} or set(map(len, rows)) != {7}:
        return False
    paths, kinds, modes, sizes, mtimes, digests, targets = zip(*rows, strict=True)
    if set(map(type, paths)) | set(map(type, kinds)) != {str} or not set(kinds) <= {*ENTRY_KINDS}:
        return False
    if not all_plain_paths(paths):
        return False
    for column, low, high in (
        (modes, 0, 0o7777),
        (sizes, 0, 2**63 - 1),
        (mtimes, -(2**63), 2**63 - 1),
    ):
        # type() is int: msgpack decodes integers as plain int, never bool or a subclass.
        if set(map(type, column)) != {int} or min(column) < low or max(column) > high:
            return False
    file_digests = [d for k, d in zip(kinds, digests, strict=True) if k == "file"]
    link_targets = [t for k, t in zip(kinds, targets, strict=True) if k == "symlink"]
    return (
        len(file_digests) + digests.count(None) == len(rows)
        and set(map(type, file_digests)) <= {bytes}
        and set(map(len, file_digests)) <= {DIGEST_BYTES}
        and len(link_targets) + targets.count(None) == len(rows)
        and set(map(type, link_targets)) <= {str}
        and all(link_targets)
        and not any("\x00" in target for target in link_targets)
    )


def check_entry_row(raw: Any) -> None:
    """Raise CorruptManifestError, saying why, unless ``raw`` is a valid entry row."""
    _require(type(raw) is list and len(raw) == 7, "entry is not a 7-item array")
    path, kind, mode, size, mtime_ns, digest, target = raw
    try:
        check_relative_path(path)
    except UnsafePathError as error:
        raise CorruptManifestError(f"unsafe entry path: {error}") from None
    _require(kind in ENTRY_KINDS, f"entry {path!r} has unknown kind {kind!r}")
    # type() is int: msgpack decodes integers as plain int, never bool or a subclass.
    _require(type(mode) is int and 0 <= mode <= 0o7777, f"entry {path!r} has bad mode")
    _require(type(size) is int and 0 <= size < 2**63, f"entry {path!r} has bad size")
    _require(
        type(mtime_ns) is int and -(2**63) <= mtime_ns < 2**63, f"entry {path!r} has bad mtime"
    )
    if kind == "file":
        _require(
            isinstance(digest, bytes) and len(digest) == DIGEST_BYTES,
            f"file entry {path!r} lacks a valid digest",
        )
    else:
        _require(digest is None, f"{kind} entry {path!r} carries a digest")
    if kind == "symlink":
        _require(
            isinstance(target, str) and bool(target) and "\x00" not in target,
            f"symlink entry {path!r} has a bad target",
        )
    else:
        _require(target is None, f"{kind} entry {path!r} carries a link target")


def decode_entries(body: Any, info: SnapshotInfo) -> tuple[FileEntry, ...]:
    _require(isinstance(body, dict) and isinstance(body.get("entries"), list), "bad body")
    raw_entries = body["entries"]
    _require(len(raw_entries) <= MAX_ENTRIES, f"manifest has over {MAX_ENTRIES} entries")
    if not rows_need_no_row_checks(raw_entries):
        for raw in raw_entries:
            check_entry_row(raw)
    entries = tuple(FileEntry._make(raw + _NO_ATTRS) for raw in raw_entries)
    kinds = {entry.path: entry.kind for entry in entries}
    _require(len(kinds) == len(entries), "manifest lists a path twice")
    for entry in entries:
        # The nearest listed ancestor suffices: if it is a dir, its own check covers the rest.
        parent = nearest_listed_ancestor(entry.path, kinds)
        if parent is not None and kinds[parent] != "dir":
            raise CorruptManifestError(
                f"entry {entry.path!r} lies beneath {parent!r}, which is a {kinds[parent]}"
            )
    files = [e for e in entries if e.kind == "file"]
    _require(info.file_count == len(files), "file count does not match the entries")
    _require(info.total_bytes == sum(e.size for e in files), "total size does not match")
    return entries
