"""Encode, decode and validate manifests: the committed description of one snapshot.

A manifest file is a fixed prelude, a msgpack header (what ``list()`` needs) and a msgpack
body: in format 2 the reference to the snapshot's root tree (``snapstore.format.tree``), or
the state value; in format 1, still read, the flat list of every entry. The prelude carries
both parts' lengths and blake3 checksums, so a header can be read and checked without
reading the body. See docs/format.md.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import blake3
import msgpack

from snapstore.errors import CorruptManifestError, InvalidValueError, UnsafePathError
from snapstore.format.paths import check_relative_path
from snapstore.format.rows import (
    MAX_ENTRIES,
    EntryRow,
    check_entry_row,
    decode_entries,
    entry_rows,
    rows_need_no_row_checks,
)
from snapstore.format.tree import DIGEST_BYTES, MAX_TREE_BYTES, TreeRef
from snapstore.models import FileEntry, SkippedPath, SnapshotInfo, SnapshotKind, frozen_from_fields

__all__ = [
    "MAX_ENTRIES",
    "EntryRow",
    "TreeRef",
    "check_entry_row",
    "entry_rows",
    "rows_need_no_row_checks",
]

MAGIC = b"SNAPMAN\x02"
MAGIC_V1 = b"SNAPMAN\x01"
FORMAT_VERSION = 2
VERSIONS = (1, 2)
PRELUDE = struct.Struct("<8sIQ16s16s")
CHECKSUM_BYTES = 16
MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_BODY_BYTES = 1 << 30
MAX_MANIFEST_BYTES = PRELUDE.size + MAX_HEADER_BYTES + MAX_BODY_BYTES
CLOCK_TOLERANCE_NS = 60_000_000_000
"""How far a recorded creation time may lie ahead of its manifest file's modification time
before the file's time is trusted instead (clocks of hosts sharing a store differ a little)."""
SNAPSHOT_KINDS: tuple[SnapshotKind, ...] = ("files", "state")


@dataclass(frozen=True)
class Manifest:
    """A decoded manifest: header info, and the root tree (a format 2 file snapshot), the
    entries (format 1) or the value (a state snapshot). ``version`` is its format."""

    info: SnapshotInfo
    entries: tuple[FileEntry, ...] = ()
    value: Any = None
    tree: TreeRef | None = None
    version: int = FORMAT_VERSION


def _checksum(*parts: bytes) -> bytes:
    hasher = blake3.blake3()
    for part in parts:
        hasher.update(part)
    return hasher.digest(length=CHECKSUM_BYTES)


def _pack(value: Any, what: str, *, check_readable: bool = True) -> bytes:
    """msgpack-encode ``value``; with ``check_readable``, also refuse what would not decode
    back (map keys that are not strings), so nothing unreadable is ever committed."""
    try:
        packed = msgpack.packb(value, use_bin_type=True, strict_types=False)
    except (TypeError, ValueError, OverflowError) as error:
        raise InvalidValueError(f"{what} cannot be stored: {error}") from None
    assert isinstance(packed, bytes)
    if check_readable:
        try:
            _unpack(packed, what)
        except CorruptManifestError as error:
            raise InvalidValueError(f"{what} cannot be stored: {error}") from None
    return packed


def _unpack(data: bytes, what: str) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as error:
        raise CorruptManifestError(f"{what} does not decode: {error}") from None


def time_to_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime."""
    if moment.tzinfo is None:
        raise InvalidValueError(f"datetime {moment!r} must be timezone-aware")
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def ns_to_time(ns: int) -> datetime:
    """An aware UTC datetime from nanoseconds since the epoch."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def encode(
    info: SnapshotInfo,
    *,
    created_ns: int,
    expires_ns: int | None,
    tree: TreeRef | None = None,
    value: Any = None,
    rows: Sequence[EntryRow] | None = None,
) -> bytes:
    """Serialize a format 2 manifest (a file snapshot names its root ``tree``), or, given
    ``rows`` instead, a format 1 manifest listing them (what older stores hold; tests and
    tools make them so; ``FileEntry`` objects are taken as rows, see ``entry_rows``). Raises
    InvalidValueError for metadata or values msgpack refuses; rows are not validated."""
    version = FORMAT_VERSION if rows is None else 1
    header = {
        "v": version,
        "kind": info.kind,
        "session": info.session,
        "name": info.name,
        "created_ns": created_ns,
        "expires_ns": expires_ns,
        "file_count": info.file_count,
        "total_bytes": info.total_bytes,
        "meta": info.meta,
        "base_dir": info.base_dir,
        "skipped": [[s.path, s.error] for s in info.skipped],
        "roots": list(info.roots),
    }
    if info.backup_of is not None:
        header["backup_of"] = info.backup_of
    if info.excludes:
        header["excludes"] = list(info.excludes)
    header_bytes = _pack(header, "snapshot metadata")
    if info.kind == "state":
        body_value: dict[str, Any] = {"value": value}
    elif rows is not None:
        body_value = {"entries": entry_rows(rows) if rows and len(rows[0]) > 7 else rows}
    else:
        assert tree is not None
        body_value = {"tree": tree.digest, "tree_size": tree.size}
    body_bytes = _pack(
        body_value,
        "state value" if info.kind == "state" else "entries",
        check_readable=info.kind == "state",
    )
    lengths = struct.pack("<IQ", len(header_bytes), len(body_bytes))
    prelude = PRELUDE.pack(
        MAGIC if version == FORMAT_VERSION else MAGIC_V1,
        len(header_bytes),
        len(body_bytes),
        _checksum(lengths, header_bytes),
        _checksum(lengths, body_bytes),
    )
    return prelude + header_bytes + body_bytes


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CorruptManifestError(message)


def _is_safe_path(path: Any) -> bool:
    try:
        check_relative_path(path)
    except UnsafePathError:
        return False
    return True


def _is_int(value: Any, low: int = 0, high: int = 2**64 - 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class _Prelude:
    header_length: int
    body_length: int
    header_checksum: bytes
    body_checksum: bytes

    @property
    def total(self) -> int:
        return PRELUDE.size + self.header_length + self.body_length

    @property
    def lengths(self) -> bytes:
        return struct.pack("<IQ", self.header_length, self.body_length)


def _read_prelude(data: bytes, file_size: int) -> _Prelude:
    _require(len(data) >= PRELUDE.size, "manifest is shorter than its prelude")
    magic, header_length, body_length, header_sum, body_sum = PRELUDE.unpack_from(data)
    if magic[:7] == MAGIC[:7] and magic[7] not in VERSIONS:
        raise CorruptManifestError(f"manifest has unsupported format version {magic[7]}")
    _require(magic[:7] == MAGIC[:7], "manifest does not start with the snapstore magic bytes")
    _require(header_length <= MAX_HEADER_BYTES, "manifest header length is implausible")
    prelude = _Prelude(header_length, body_length, header_sum, body_sum)
    _require(
        prelude.total == file_size,
        f"manifest is {file_size} bytes but its prelude says {prelude.total} (truncated?)",
    )
    return prelude


def _decode_info(header: Any, version: int) -> tuple[SnapshotInfo, int, int | None]:
    _require(isinstance(header, dict), "manifest header is not a map")
    _require(header.get("v") == version, f"unknown manifest version {header.get('v')!r}")
    kind = header.get("kind")
    _require(kind in SNAPSHOT_KINDS, f"unknown snapshot kind {kind!r}")
    for key in ("session", "name", "base_dir"):
        _require(isinstance(header.get(key), str), f"manifest field {key!r} is not a string")
    _require(bool(header["session"]) and bool(header["name"]), "empty session or name")
    created_ns = header.get("created_ns")
    expires_ns = header.get("expires_ns")
    _require(_is_int(created_ns, -(2**63), 2**63 - 1), "bad creation time")
    _require(expires_ns is None or _is_int(expires_ns, -(2**63), 2**63 - 1), "bad expiry time")
    _require(_is_int(header.get("file_count")), "bad file count")
    _require(_is_int(header.get("total_bytes")), "bad total size")
    _require(isinstance(header.get("meta"), dict), "metadata is not a map")
    skipped_raw = header.get("skipped")
    _require(isinstance(skipped_raw, list), "skipped list is not a list")
    skipped = []
    for item in skipped_raw:
        _require(
            isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item),
            "bad skipped item",
        )
        skipped.append(SkippedPath(item[0], item[1]))
    roots = header.get("roots")
    _require(isinstance(roots, list), "roots is not a list")
    for root in roots:
        _require(root == "." or _is_safe_path(root), f"bad root path {root!r}")
    if kind == "files":
        _require(header["base_dir"].startswith("/"), "base_dir is not an absolute path")
    backup_of = header.get("backup_of")
    _require(backup_of is None or isinstance(backup_of, str), "backup_of is not a string")
    excludes = header.get("excludes", [])
    _require(
        isinstance(excludes, list) and all(isinstance(p, str) for p in excludes),
        "excludes is not a list of strings",
    )
    info = _snapshot_info(
        header["session"],
        header["name"],
        kind,
        created_ns,
        expires_ns,
        header["file_count"],
        header["total_bytes"],
        header["meta"],
        header["base_dir"],
        tuple(skipped),
        tuple(roots),
        backup_of,
        tuple(excludes),
    )
    return info, created_ns, expires_ns


def _snapshot_info(
    session: str,
    name: str,
    kind: SnapshotKind,
    created_ns: int,
    expires_ns: int | None,
    file_count: int,
    total_bytes: int,
    meta: dict[str, Any],
    base_dir: str,
    skipped: tuple[SkippedPath, ...],
    roots: tuple[str, ...],
    backup_of: str | None,
    excludes: tuple[str, ...],
) -> SnapshotInfo:
    """The SnapshotInfo of header fields already validated (built without its __init__:
    listings build one per snapshot)."""
    return frozen_from_fields(
        SnapshotInfo,
        {
            "session": session,
            "name": name,
            "kind": kind,
            "created_at": ns_to_time(created_ns),
            "expires_at": None if expires_ns is None else ns_to_time(expires_ns),
            "file_count": file_count,
            "total_bytes": total_bytes,
            "meta": meta,
            "base_dir": base_dir,
            "skipped": skipped,
            "roots": roots,
            "backup_of": backup_of,
            "excludes": excludes,
            "replaced": False,
        },
    )


class Header(NamedTuple):
    """A manifest's header as ``list()`` reads it: info plus raw timestamps (a named tuple:
    a listing makes one per snapshot).

    ``order_ns`` is what ordering and ages go by: the recorded creation time, unless it lies
    more than ``CLOCK_TOLERANCE_NS`` after the manifest file's own modification time (set by
    the filesystem when it was written), which then replaces it. A writer whose clock ran
    ahead (or a forged header) cannot make a snapshot look newer than it was written; small
    differences (file times are coarser than the clock) keep the finer recorded order.
    """

    info: SnapshotInfo
    created_ns: int
    expires_ns: int | None
    order_ns: int = 0

    def with_file_time(self, mtime_ns: int) -> Header:
        """This header, ordered as its file's modification time ``mtime_ns`` allows."""
        if self.created_ns <= mtime_ns + CLOCK_TOLERANCE_NS:
            return self
        return self._replace(order_ns=mtime_ns)

    @property
    def effective_expires_ns(self) -> int | None:
        """The expiry, moved back as far as the creation time was (see ``order_ns``)."""
        if self.expires_ns is None:
            return None
        return self.expires_ns - (self.created_ns - self.order_ns)

    @property
    def ahead_ns(self) -> int:
        """How far the recorded creation time lies ahead of the manifest file's own time."""
        return self.created_ns - self.order_ns


def header_values(header: Header) -> list[Any]:
    """A header's fields as one list in a fixed order: the compact form caches keep of a
    header decoded here (``header_from_values`` reads it back)."""
    info = header.info
    return [
        info.session,
        info.name,
        info.kind,
        header.created_ns,
        header.expires_ns,
        info.file_count,
        info.total_bytes,
        info.meta,
        info.base_dir,
        [[s.path, s.error] for s in info.skipped],
        list(info.roots),
        info.backup_of,
        list(info.excludes),
    ]


def header_from_values(values: list[Any]) -> Header:
    """The Header whose ``header_values`` these are (not validated again: they were when
    their manifest was decoded; a cache that holds them checks its own integrity)."""
    (
        session,
        name,
        kind,
        created_ns,
        expires_ns,
        file_count,
        total_bytes,
        meta,
        base_dir,
        skipped,
        roots,
        backup_of,
        excludes,
    ) = values
    info = _snapshot_info(
        session,
        name,
        kind,
        created_ns,
        expires_ns,
        file_count,
        total_bytes,
        meta,
        base_dir,
        tuple(SkippedPath(path, error) for path, error in skipped) if skipped else (),
        tuple(roots),
        backup_of,
        tuple(excludes),
    )
    return Header(info, created_ns, expires_ns, created_ns)


def decode_header(data: bytes, file_size: int) -> Header:
    """Decode and verify only the header; ``data`` needs at least prelude + header bytes."""
    prelude = _read_prelude(data, file_size)
    end = PRELUDE.size + prelude.header_length
    _require(len(data) >= end, "manifest header is truncated")
    header_bytes = data[PRELUDE.size : end]
    _require(
        _checksum(prelude.lengths, header_bytes) == prelude.header_checksum,
        "manifest header fails its checksum",
    )
    info, created_ns, expires_ns = _decode_info(_unpack(header_bytes, "manifest header"), data[7])
    return Header(info, created_ns, expires_ns, created_ns)


def header_bytes_needed(prelude_bytes: bytes) -> int:
    """How many leading bytes of a manifest hold its prelude and header."""
    _require(len(prelude_bytes) >= PRELUDE.size, "manifest is shorter than its prelude")
    _, header_length, _, _, _ = PRELUDE.unpack_from(prelude_bytes)
    return int(PRELUDE.size + min(header_length, MAX_HEADER_BYTES))


def decode(data: bytes) -> Manifest:
    """Decode and validate a manifest of either format; anything wrong raises
    CorruptManifestError. A format 2 file snapshot's trees are read apart (its entries
    are checked as they are walked)."""
    header = decode_header(data, len(data))
    prelude = _read_prelude(data, len(data))
    body_bytes = data[PRELUDE.size + prelude.header_length :]
    _require(
        _checksum(prelude.lengths, body_bytes) == prelude.body_checksum,
        "manifest body fails its checksum",
    )
    body = _unpack(body_bytes, "manifest body")
    info = header.info
    version = data[7]
    if info.kind == "state":
        _require(isinstance(body, dict) and "value" in body, "state manifest lacks its value")
        _require(info.file_count == 0 and info.total_bytes == 0, "state manifest lists files")
        return Manifest(info, (), body["value"], version=version)
    if version == 1:
        return Manifest(info, decode_entries(body, info), version=1)
    _require(isinstance(body, dict), "manifest body is not a map")
    digest, size = body.get("tree"), body.get("tree_size")
    _require(
        type(digest) is bytes and len(digest) == DIGEST_BYTES and _is_int(size, 1, MAX_TREE_BYTES),
        "manifest does not name a valid root tree",
    )
    return Manifest(info, tree=TreeRef(digest, size))


def ttl_seconds(ttl: float | int | timedelta | None) -> float | None:
    """A TTL given as seconds or a timedelta, as seconds."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        return ttl.total_seconds()
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise InvalidValueError(f"ttl must be seconds or a timedelta, not {type(ttl).__name__}")
    return float(ttl)


def expiry_ns(created_ns: int, ttl_seconds: float | None) -> int | None:
    """The expiry time for a TTL, or None for no TTL."""
    if ttl_seconds is None:
        return None
    if not math.isfinite(ttl_seconds) or ttl_seconds <= 0:
        raise InvalidValueError(f"ttl must be a positive number of seconds, got {ttl_seconds!r}")
    return created_ns + int(ttl_seconds * 1e9)
