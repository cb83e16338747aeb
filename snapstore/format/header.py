"""A manifest's header as listings use it, and the compact list a cache keeps of one.

The header's fields on disk, and their validation, are ``snapstore.format.manifest``'s; this
module holds what is built from them once they are valid.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from snapstore.format.times import ns_to_time
from snapstore.models import SkippedPath, SnapshotInfo, SnapshotKind, frozen_from_fields

CLOCK_TOLERANCE_NS = 60_000_000_000
"""How far a recorded creation time may lie ahead of its manifest file's modification time
before the file's time is trusted instead (clocks of hosts sharing a store differ a little)."""


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
    info = snapshot_info(
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
