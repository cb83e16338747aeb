"""A manifest's header as listings use it, and the compact list a cache keeps of one.

The header's fields on disk, and their validation, are ``snapstore.format.manifest``'s; this
module holds what is built from them once they are valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, NamedTuple

import msgpack

from snapstore.format.times import ns_to_time
from snapstore.models import SkippedPath, SnapshotInfo, SnapshotKind, frozen_from_fields

CLOCK_TOLERANCE_NS = 60_000_000_000
"""How far a recorded creation time may lie from its manifest file's modification time before
the file's time is trusted instead (clocks of hosts sharing a store differ a little)."""


def snapshot_info(
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
    stored_bytes: int | None,
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
            "stored_bytes": stored_bytes,
            "replaced": False,
        },
    )


class Header(NamedTuple):
    """A manifest's header as ``list()`` reads it: info plus raw timestamps and the sequence
    number (a named tuple: a listing makes one per snapshot).

    ``seq`` orders the snapshots of one session: the commit that wrote it took the next
    number under the session's lock, so no clock can invert two commits. 0 for a manifest
    written before snapshots were numbered (they all come before the numbered ones).

    ``order_ns`` is what orders snapshots of different sessions, and unnumbered ones within a
    session: the recorded creation time, unless it lies more than ``CLOCK_TOLERANCE_NS`` after
    the manifest file's own modification time (set by the filesystem when it was written),
    which then replaces it. ``age_ns`` is what ages (time to live) go by: the creation time,
    unless it lies more than the tolerance from the file's time on either side, which then
    replaces it: neither a clock running ahead nor one running behind makes a snapshot look
    younger or older than it is.
    """

    info: SnapshotInfo
    created_ns: int
    expires_ns: int | None
    order_ns: int = 0
    seq: int = 0
    age_ns: int = 0

    def with_file_time(self, mtime_ns: int) -> Header:
        """This header, ordered and aged as its file's modification time ``mtime_ns`` allows."""
        created = self.created_ns
        order = created if created <= mtime_ns + CLOCK_TOLERANCE_NS else mtime_ns
        age = created if abs(created - mtime_ns) <= CLOCK_TOLERANCE_NS else mtime_ns
        if order == self.order_ns and age == self.age_ns:
            return self
        return self._replace(order_ns=order, age_ns=age)

    @property
    def effective_expires_ns(self) -> int | None:
        """The expiry, moved as far as the creation time was to age it (see ``age_ns``)."""
        if self.expires_ns is None:
            return None
        return self.expires_ns + (self.age_ns - self.created_ns)

    @property
    def ahead_ns(self) -> int:
        """How far the recorded creation time lies ahead of the manifest file's own time."""
        return self.created_ns - self.order_ns

    @property
    def session_order(self) -> tuple[int, int, str]:
        """The key that orders the snapshots of one session, oldest first."""
        return (self.seq, self.order_ns, self.info.name)


ROW_TIMESTAMPS = 3
"""How rows are decoded: ``msgpack.unpackb(..., use_list=False, timestamp=ROW_TIMESTAMPS)``
(arrays as tuples, msgpack timestamps as aware UTC datetimes: decoded in C); they are packed
with ``datetime=True``."""


def header_row(header: Header, name_dir: str, written_ns: int) -> tuple[Any, ...]:
    """The compact form the header cache keeps of a header decoded here, with the snapshot
    directory name and modification time of its manifest (``header_from_row`` reads it
    back): the metadata map packed on its own (None when empty), so that the row decodes
    with arrays as tuples; the times also as the datetimes the header's info holds, packed
    as msgpack timestamps (``ROW_DATETIMES``), which decode to equal ones."""
    info = header.info
    return (
        name_dir,
        info.name,
        info.kind,
        header.created_ns,
        info.created_at,
        header.expires_ns,
        info.expires_at,
        info.file_count,
        info.total_bytes,
        msgpack.packb(info.meta, use_bin_type=True) if info.meta else None,
        info.base_dir,
        tuple((s.path, s.error) for s in info.skipped),
        info.roots,
        info.backup_of,
        info.excludes,
        header.seq,
        info.stored_bytes,
        written_ns,
    )


def header_from_row(session: str, row: tuple[Any, ...]) -> Header | None:
    """The Header of a snapshot of ``session`` from its ``header_row`` (decoded as
    ``ROW_TIMESTAMPS`` says), ordered as its manifest's modification time allows; None if
    the row is not one (its fields were validated when their manifest was decoded; a cache
    that holds them checks its own integrity, and a row of the wrong shape or type is only a
    miss). One call per snapshot of a listing: kept lean."""
    try:
        (
            _,
            name,
            kind,
            created,
            created_at,
            expires,
            expires_at,
            file_count,
            total_bytes,
            meta,
            base_dir,
            skipped,
            roots,
            backup_of,
            excludes,
            seq,
            stored_bytes,
            written_ns,
        ) = row
        if type(name) is not str or type(created) is not int or type(seq) is not int:
            return None
        if type(created_at) is not datetime or type(written_ns) is not int:
            return None
        info = _new_object(SnapshotInfo)
        _set_attribute(
            info,
            "__dict__",
            {
                "session": session,
                "name": name,
                "kind": kind,
                "created_at": created_at,
                "expires_at": expires_at,
                "file_count": file_count,
                "total_bytes": total_bytes,
                "meta": {} if meta is None else _unpacked_meta(meta),
                "base_dir": base_dir,
                "skipped": tuple(SkippedPath(p, e) for p, e in skipped) if skipped else (),
                "roots": roots if type(roots) is tuple else tuple(roots),
                "backup_of": backup_of,
                "excludes": excludes if type(excludes) is tuple else tuple(excludes),
                "stored_bytes": stored_bytes,
                "replaced": False,
            },
        )
        order = created if created <= written_ns + CLOCK_TOLERANCE_NS else written_ns
        age = created if abs(created - written_ns) <= CLOCK_TOLERANCE_NS else written_ns
    except Exception:  # a row of another shape is only a cache miss
        return None
    return _new_header(Header, (info, created, expires, order, seq, age))


def _unpacked_meta(packed: bytes) -> dict[str, Any]:
    meta = msgpack.unpackb(packed, raw=False, strict_map_key=True, use_list=True)
    if type(meta) is not dict:
        raise ValueError("metadata is not a map")
    return meta


_new_header = tuple.__new__
_new_object = object.__new__

_set_attribute = object.__setattr__

Row = tuple[Any, ...]
"""A cached header: ``header_row``."""

ROW_LENGTH = 18
_ROW_COLUMNS: tuple[tuple[int, frozenset[type]], ...] = (
    (0, frozenset({str})),  # the snapshot directory name
    (1, frozenset({str})),  # name
    (3, frozenset({int})),  # created_ns
    (4, frozenset({datetime})),  # created_at
    (5, frozenset({type(None), int})),  # expires_ns
    (6, frozenset({type(None), datetime})),  # expires_at
    (7, frozenset({int})),  # file_count
    (8, frozenset({int})),  # total_bytes
    (9, frozenset({type(None), bytes})),  # the packed metadata
    (11, frozenset({tuple})),  # skipped
    (12, frozenset({tuple})),  # roots
    (13, frozenset({type(None), str})),  # backup_of
    (14, frozenset({tuple})),  # excludes
    (15, frozenset({int})),  # seq
    (16, frozenset({type(None), int})),  # stored_bytes
    (17, frozenset({int})),  # the manifest's modification time
)
"""The columns a listing orders by or builds from, and the types each may hold (a row
decoded as ``ROW_TIMESTAMPS`` says holds arrays as tuples); ``kind`` and ``base_dir`` are
checked apart."""
_KINDS = frozenset({"files", "state"})
_NAME_DIR, _KIND, _META, _BASE_DIR, _SKIPPED, _ROOTS, _EXCLUDES = 0, 2, 9, 10, 11, 12, 14
ROW_NAME, ROW_CREATED_NS, ROW_BACKUP_OF, ROW_SEQ, ROW_WRITTEN_NS = (
    itemgetter(1),
    itemgetter(3),
    itemgetter(13),
    itemgetter(15),
    itemgetter(17),
)


def rows_valid(rows: Sequence[Row]) -> bool:
    """Whether every row of a cache entry is one ``header_from_row`` and ``infos_of_rows``
    can read: a tuple of the row's length, the columns a listing relies on of their types
    (roots and excludes tuples of strings, a known kind), metadata that unpacks to a map,
    skipped paths as pairs of strings, and no snapshot directory twice. Checked a column
    at a time, in C (a listing checks 10,000 rows), and each distinct value of the columns
    most rows share once."""
    try:
        if not set(map(type, rows)) <= {tuple} or not set(map(len, rows)) <= {ROW_LENGTH}:
            return False
        columns = list(zip(*rows, strict=True))
        if not columns:
            return True
        for column, allowed in _ROW_COLUMNS:
            if not set(map(type, columns[column])) <= allowed:
                return False
        if len(set(columns[_NAME_DIR])) != len(rows) or not set(columns[_KIND]) <= _KINDS:
            return False
        if not set(map(type, columns[_BASE_DIR])) <= {str}:
            return False
        for column in (_ROOTS, _EXCLUDES):  # each distinct value once: most rows share one
            if not set(map(type, chain.from_iterable(set(columns[column])))) <= {str}:
                return False
        for packed in set(columns[_META]) - {None}:
            _unpacked_meta(packed)
        for skipped in set(columns[_SKIPPED]):
            for path, error in skipped:
                if type(path) is not str or type(error) is not str:
                    return False
    except Exception:  # a row of another shape is only a cache miss
        return False
    return True


def row_order_ns(rows: Sequence[Row]) -> list[int]:
    """Each row's ``Header.order_ns``: its creation time, unless that lies more than the
    tolerance after its manifest file's modification time, which then counts instead."""
    created_and_written = zip(map(ROW_CREATED_NS, rows), map(ROW_WRITTEN_NS, rows), strict=True)
    return [
        created if created <= written + CLOCK_TOLERANCE_NS else written
        for created, written in created_and_written
    ]


def infos_of_rows(session: str, rows: Sequence[Row]) -> list[SnapshotInfo]:
    """The SnapshotInfos of the rows (``rows_valid``) of one session's cache entry, equal to
    what ``header_from_row`` builds, made in bulk: a dict per row, then the instances
    (without their __init__) and their dicts set by C loops. Equal kinds, base directories
    and tuples of roots and excludes are shared (they are immutable; most snapshots of a
    session have the same), so the memory of the rows' copies is freed with the rows."""
    share: dict[Any, Any] = {}
    same = share.setdefault
    fields = [
        {
            "session": session,
            "name": row[1],
            "kind": same(row[2], row[2]),
            "created_at": row[4],
            "expires_at": row[6],
            "file_count": row[7],
            "total_bytes": row[8],
            "meta": {} if row[9] is None else _unpacked_meta(row[9]),
            "base_dir": same(row[10], row[10]),
            "skipped": tuple(SkippedPath(p, e) for p, e in row[11]) if row[11] else (),
            "roots": same(row[12], row[12]),
            "backup_of": row[13],
            "excludes": same(row[14], row[14]),
            "stored_bytes": row[16],
            "replaced": False,
        }
        for row in rows
    ]
    infos: list[SnapshotInfo] = list(map(_new_object, repeat(SnapshotInfo, len(fields))))
    for _ in map(_set_attribute, infos, repeat("__dict__"), fields):
        pass
    return infos
