"""Encode, decode and validate manifests: the committed description of one snapshot.

A manifest file is a fixed prelude, a msgpack header (what ``list()`` needs) and a msgpack
body: in format 2 the reference to the snapshot's root tree (``snapstore.format.tree``), or
the state value; in format 1, still read, the flat list of every entry. The prelude carries
both parts' lengths and blake3 checksums, so a header can be read and checked without
reading the body. See docs/format.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

import blake3
import msgpack

from snapstore.errors import CorruptManifestError, InvalidValueError, UnsafePathError
from snapstore.format.header import Header, snapshot_info
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
from snapstore.models import FileEntry, SkippedPath, SnapshotInfo, SnapshotKind

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
SNAPSHOT_KINDS: tuple[SnapshotKind, ...] = ("files", "state")


class Manifest(NamedTuple):
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


MAX_VALUE_DEPTH = 64
"""How deeply metadata and state values may nest: what every reader can walk (recursively,
as JSON encoders do) without running out of stack."""


def nests_within(value: Any, limit: int = MAX_VALUE_DEPTH) -> bool:
    """Whether ``value``'s maps and lists nest no deeper than ``limit`` (walked without
    recursion, so a forged value of any depth is measured safely)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def _pack(
    value: Any, what: str, *, check_readable: bool = True, depth: int = MAX_VALUE_DEPTH + 1
) -> bytes:
    """msgpack-encode ``value``; with ``check_readable``, also refuse what would not decode
    back (map keys that are not strings), or nests deeper than ``depth`` (a map holding a
    value of ``MAX_VALUE_DEPTH``), so nothing unreadable is ever committed."""
    if check_readable and not nests_within(value, depth):
        raise InvalidValueError(f"{what} cannot be stored: nested over {MAX_VALUE_DEPTH} deep")
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


def encode(
    info: SnapshotInfo,
    *,
    created_ns: int,
    expires_ns: int | None,
    tree: TreeRef | None = None,
    value: Any = None,
    rows: Sequence[EntryRow] | None = None,
    seq: int = 0,
) -> bytes:
    """Serialize a format 2 manifest (a file snapshot names its root ``tree``), or, given
    ``rows`` instead, a format 1 manifest listing them (what older stores hold; tests and
    tools make them so; ``FileEntry`` objects are taken as rows, see ``entry_rows``). ``seq``:
    the snapshot's number in its session (0: none, as written before numbering). Raises
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
    if seq:
        header["seq"] = seq
    if info.stored_bytes is not None:
        header["stored_bytes"] = info.stored_bytes
    if info.meta:  # the one part of a header a caller chose: the rest is snapstore's own
        _pack(info.meta, "snapshot metadata", depth=MAX_VALUE_DEPTH)
    header_bytes = _pack(header, "snapshot metadata", check_readable=False)
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


class _Prelude(NamedTuple):
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
    _require(nests_within(header["meta"]), f"metadata nests over {MAX_VALUE_DEPTH} deep")
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
    stored_bytes = header.get("stored_bytes")
    _require(stored_bytes is None or _is_int(stored_bytes), "bad stored size")
    info = snapshot_info(
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
        stored_bytes,
    )
    return info, created_ns, expires_ns


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
    fields = _unpack(header_bytes, "manifest header")
    info, created_ns, expires_ns = _decode_info(fields, data[7])
    seq = fields.get("seq", 0)
    _require(seq == 0 or _is_int(seq, 1, 2**63 - 1), "bad sequence number")
    return Header(info, created_ns, expires_ns, created_ns, seq, created_ns)


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
        _require(nests_within(body["value"]), f"the value nests over {MAX_VALUE_DEPTH} deep")
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
