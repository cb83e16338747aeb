"""What a commit records: a snapshot's header but for the times and number it takes when it
is committed, and the manifest bytes it becomes.

``Repository.commit_snapshot`` is the one place a new manifest is written (checkpoints, undo
backups and state values alike); this module holds the pure part of it, so the repository
keeps only the steps that touch the store: the check that the blobs are there, the session's
lock, its number, the write and the head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from snapstore.format.manifest import TreeRef, encode
from snapstore.format.times import expiry_ns, ns_to_time
from snapstore.models import SkippedPath, SnapshotInfo, SnapshotKind

IF_EXISTS = ("replace", "error")
"""What a commit does when the session holds a snapshot of the same name: replace it, or
refuse (SnapshotExistsError)."""


@dataclass(frozen=True)
class Draft:
    """A snapshot about to be committed: its header without the creation and expiry times
    (taken at the commit, under the session's lock, so they order as the commits do), and
    what its manifest names: a file snapshot's root ``tree``, or a state snapshot's
    ``value``. ``ttl``: seconds from the commit to its expiry (None: it never expires)."""

    session: str
    name: str
    kind: SnapshotKind
    ttl: float | None = None
    file_count: int = 0
    total_bytes: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    base_dir: str = ""
    skipped: tuple[SkippedPath, ...] = ()
    roots: tuple[str, ...] = ()
    backup_of: str | None = None
    excludes: tuple[str, ...] = ()
    stored_bytes: int | None = None
    tree: TreeRef | None = None
    value: Any = None

    def check(self) -> None:
        """InvalidValueError for a ``ttl`` no commit could turn into an expiry time (checked
        before anything is written or locked)."""
        expiry_ns(0, self.ttl)

    def header(self, created_ns: int) -> SnapshotInfo:
        """The snapshot's header if it is committed at ``created_ns``."""
        expires_ns = expiry_ns(created_ns, self.ttl)
        return SnapshotInfo(
            session=self.session,
            name=self.name,
            kind=self.kind,
            created_at=ns_to_time(created_ns),
            expires_at=None if expires_ns is None else ns_to_time(expires_ns),
            file_count=self.file_count,
            total_bytes=self.total_bytes,
            meta=self.meta,
            base_dir=self.base_dir,
            skipped=self.skipped,
            roots=self.roots,
            backup_of=self.backup_of,
            excludes=self.excludes,
            stored_bytes=self.stored_bytes,
        )

    def manifest(self, created_ns: int, seq: int) -> tuple[SnapshotInfo, bytes]:
        """The header and the manifest bytes of the snapshot committed at ``created_ns`` as
        number ``seq`` of its session (InvalidValueError for metadata or a value msgpack
        refuses)."""
        info = self.header(created_ns)
        data = encode(
            info,
            created_ns=created_ns,
            expires_ns=expiry_ns(created_ns, self.ttl),
            tree=self.tree,
            value=self.value,
            seq=seq,
        )
        return info, data
