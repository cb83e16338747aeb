"""Tree objects: one directory's listing, stored as a content-addressed blob (format 2).

A snapshot's paths are stored as a tree of these, as git and restic do: a directory whose
contents did not change between two snapshots has the same bytes, hence the same digest, and
is stored once; a change to one file costs one new tree per directory above it. Each row is
``[name, kind, mode, size, mtime_ns, digest, target]``, sorted by name. Besides the entry
kinds, ``parent`` marks a directory that is not itself recorded but holds recorded paths.
For ``dir`` and ``parent`` rows, ``digest`` and ``size`` name the subtree object (nil and 0
for a recorded directory with nothing recorded below it). A ``file`` row may carry an eighth
element, its attributes: ``extents`` (its digest names an extent map: a file with holes) and
``link`` (the path of the first file of its hard-link group). Byte layout: docs/format.md,
"Trees".
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple, TypeAlias

import blake3
import msgpack

from snapstore.errors import CorruptManifestError, UnsafePathError
from snapstore.format.paths import MAX_COMPONENT_BYTES, check_relative_path

TREE_MAGIC = b"SNAPTRE\x02"
DIGEST_BYTES = 32
MAX_TREE_BYTES = 64 << 20
TREE_KINDS = ("file", "symlink", "dir", "absent", "parent")
SUBTREE_KINDS = ("dir", "parent")
FileAttrs: TypeAlias = dict[str, Any]
"""A file row's attributes: ``{"extents": True}`` and/or ``{"link": path}``, in that order."""
TreeRow = tuple[str, str, int, int, int, bytes | None, str | None, FileAttrs | None]
"""A decoded row; the attributes are None for a row of seven elements."""
ATTR_KEYS = ("extents", "link")


class CorruptTreeError(CorruptManifestError):
    """A tree object of a snapshot fails to decode or validate (the snapshot is corrupt)."""


class TreeRef(NamedTuple):
    """A tree object by digest, with the size of its bytes."""

    digest: bytes
    size: int


def encode_tree(rows: list[tuple[Any, ...]]) -> bytes:
    """A tree object's bytes for ``rows`` (already sorted by name and valid; seven elements,
    or eight for a file row with attributes, keys in ``ATTR_KEYS`` order)."""
    packed = msgpack.packb(rows, use_bin_type=True)
    assert isinstance(packed, bytes)
    return TREE_MAGIC + packed


def tree_ref(data: bytes) -> TreeRef:
    """The digest and size of a tree object's bytes."""
    return TreeRef(blake3.blake3(data).digest(), len(data))


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CorruptTreeError(message)


def decode_tree(data: bytes) -> list[TreeRow]:
    """The rows of a tree object; CorruptTreeError for anything that breaks the rules
    (the caller has checked the bytes against the tree's digest)."""
    _require(data[: len(TREE_MAGIC)] == TREE_MAGIC, "a tree object lacks its magic bytes")
    try:
        rows = msgpack.unpackb(
            data[len(TREE_MAGIC) :], raw=False, strict_map_key=True, use_list=True
        )
    except Exception as error:
        raise CorruptTreeError(f"a tree object does not decode: {error}") from None
    _require(type(rows) is list, "a tree object is not an array")
    if rows and not _rows_look_valid(rows):
        for row in rows:
            check_tree_row(row)
    names = [row[0] for row in rows]
    _require(all(map(operator.lt, names, names[1:])), "a tree's names are not sorted or repeat")
    return [(*row, None) if len(row) == 7 else tuple(row) for row in rows]


def _rows_look_valid(rows: list[Any]) -> bool:
    """A cheap sufficient test, column by column, that every row passes ``check_tree_row``."""
    if set(map(type, rows)) != {list} or set(map(len, rows)) != {7}:
        return False
    names, kinds, modes, sizes, mtimes, digests, targets = zip(*rows, strict=True)
    if set(map(type, names)) | set(map(type, kinds)) != {str} or not set(kinds) <= {*TREE_KINDS}:
        return False
    joined = "".join(names)
    if (
        not joined.isascii()
        or "/" in joined
        or "\\" in joined
        or "\x00" in joined
        or "" in names
        or "." in names
        or ".." in names
        or max(map(len, names)) > MAX_COMPONENT_BYTES
    ):
        return False
    for column, low, high in (
        (modes, 0, 0o7777),
        (sizes, 0, 2**63 - 1),
        (mtimes, -(2**63), 2**63 - 1),
    ):
        if set(map(type, column)) != {int} or min(column) < low or max(column) > high:
            return False
    return all(map(_row_fields_fit, kinds, sizes, digests, targets))


def file_attrs(extents: bool, link: str | None) -> FileAttrs | None:
    """The attributes of a file row, or None for a plain file."""
    if not extents and link is None:
        return None
    attrs: FileAttrs = {"extents": True} if extents else {}
    if link is not None:
        attrs["link"] = link
    return attrs


def _attrs_fit(attrs: Any) -> bool:
    """Whether a row's eighth element is valid file attributes."""
    if type(attrs) is not dict or not attrs or not set(attrs) <= set(ATTR_KEYS):
        return False
    if "extents" in attrs and attrs["extents"] is not True:
        return False
    link = attrs.get("link")
    if link is None:
        return "link" not in attrs
    if type(link) is not str:
        return False
    try:
        check_relative_path(link)
    except UnsafePathError:
        return False
    return True


def _row_fields_fit(kind: str, size: int, digest: Any, target: Any) -> bool:
    if kind == "file":
        ok = type(digest) is bytes and len(digest) == DIGEST_BYTES
    elif kind in SUBTREE_KINDS:
        ok = (type(digest) is bytes and len(digest) == DIGEST_BYTES and size > 0) or (
            digest is None and size == 0 and kind == "dir"
        )
    else:
        ok = digest is None and size == 0
    if kind == "symlink":
        return ok and type(target) is str and bool(target) and "\x00" not in target
    return ok and target is None


def check_tree_row(raw: Any) -> None:
    """Raise CorruptTreeError, saying why, unless ``raw`` is a valid tree row."""
    _require(type(raw) is list and len(raw) in (7, 8), "a tree row is not a 7- or 8-item array")
    name, kind, mode, size, mtime_ns, digest, target = raw[:7]
    _require(type(name) is str and bool(name), f"a tree row has a bad name {name!r}")
    _require(
        name not in (".", "..") and not any(c in name for c in "/\\\x00"), f"bad name {name!r}"
    )
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise CorruptTreeError(f"tree row name {name!r} is not valid UTF-8") from None
    _require(len(encoded) <= MAX_COMPONENT_BYTES, f"tree row name {name[:40]!r} is too long")
    _require(kind in TREE_KINDS, f"tree row {name!r} has unknown kind {kind!r}")
    # type() is int: msgpack decodes integers as plain int, never bool or a subclass.
    _require(type(mode) is int and 0 <= mode <= 0o7777, f"tree row {name!r} has a bad mode")
    _require(type(size) is int and 0 <= size < 2**63, f"tree row {name!r} has a bad size")
    _require(
        type(mtime_ns) is int and -(2**63) <= mtime_ns < 2**63, f"tree row {name!r} has bad mtime"
    )
    _require(
        _row_fields_fit(kind, size, digest, target),
        f"{kind} row {name!r} has a digest, size or link target its kind does not allow",
    )
    if len(raw) == 8:
        _require(
            kind == "file" and _attrs_fit(raw[7]),
            f"tree row {name!r} has attributes {raw[7]!r:.80} that do not fit a file row",
        )
