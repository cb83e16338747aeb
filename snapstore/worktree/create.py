"""The create pipeline: scan a base directory, store new blobs, commit the manifest last.

Runs with the gc lock already held shared (no blob it counts on can vanish); takes the
namespace lock only for the commit, after re-checking that every blob it references is
stored. Checkpoints and undo backups are both made here; they differ in their header.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from snapstore.errors import MissingBlobError, SnapshotExistsError
from snapstore.format.manifest import encode, expiry_ns, ns_to_time
from snapstore.models import SnapshotInfo
from snapstore.repo.batch import BlobBatch
from snapstore.worktree.excludes import Matcher, initial_patterns
from snapstore.worktree.ingest import ingest_scan
from snapstore.worktree.scan import Scanner
from snapstore.worktree.statcache import StatCache

if TYPE_CHECKING:
    from collections.abc import Callable

    from snapstore.store import SnapStore


@dataclass(frozen=True)
class Request:
    """What to snapshot: ``paths`` relative to ``base``, walked recursively unless listed in
    ``shallow`` (recorded alone)."""

    session: str
    name: str
    base: str
    paths: list[str]
    meta: dict[str, Any]
    ttl: float | None = None
    shallow: frozenset[str] = frozenset()
    skip_unreadable: bool = False
    rehash: bool = False
    backup_of: str | None = None
    exclude: tuple[str, ...] = ()
    default_excludes: bool = True
    gitignore: bool = False
    if_exists: str = "replace"


def take_snapshot(
    store: SnapStore,
    request: Request,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[SnapshotInfo, bool]:
    """Scan, ingest and commit ``request``; returns the committed header and whether it
    replaced an existing snapshot of the same name. The gc lock must be held shared.

    An undo backup (``backup_of`` set) records special files as skipped rather than failing,
    and leaves the stat cache alone (its files are about to be replaced)."""
    scan_start_ns = time.time_ns()
    cache = StatCache(store.backend, request.base, scan_start_ns)
    batch = BlobBatch(store.blobs)
    backup = request.backup_of is not None
    excludes = Matcher(
        ()
        if backup
        else initial_patterns(
            request.base, request.exclude, default_excludes=request.default_excludes
        )
    )
    scanner = Scanner(
        request.base,
        exclude_dirs=store.own_roots(),
        skip_unreadable=request.skip_unreadable,
        skip_special=backup,
        excludes=excludes,
        gitignore=request.gitignore and not backup,
        reuse=None if request.rehash else cache.reuse_hook(batch.claim),
    )
    try:
        for path in request.paths:
            scanner.add(path, recursive=path not in request.shallow)
        scanned = scanner.result
        rows = ingest_scan(
            scanned, batch, cache, skip_unreadable=request.skip_unreadable, progress=progress
        )
        batch.finish()
    except BaseException:
        batch.abort()
        raise
    file_rows = [row for row in rows if row[1] == "file"]
    with store.namespace_lock.exclusive():
        if request.if_exists == "error" and store.catalog.exists(request.session, request.name):
            raise SnapshotExistsError(request.session, request.name)
        missing = store.blobs.first_missing(file_rows)
        if missing is not None:
            path, _, _, _, _, digest, _ = missing
            assert digest is not None
            raise MissingBlobError(f"blob {digest.hex()} for {path!r} vanished before commit")
        created_ns = time.time_ns()
        expires_ns = expiry_ns(created_ns, request.ttl)
        info = SnapshotInfo(
            session=request.session,
            name=request.name,
            kind="files",
            created_at=ns_to_time(created_ns),
            expires_at=None if expires_ns is None else ns_to_time(expires_ns),
            file_count=len(file_rows),
            total_bytes=sum(map(itemgetter(3), file_rows)),
            meta=request.meta,
            base_dir=request.base,
            skipped=tuple(sorted(scanned.skipped, key=lambda s: s.path)),
            roots=tuple(sorted({p for p in request.paths if p not in request.shallow})),
            backup_of=request.backup_of,
            excludes=tuple(excludes.patterns),
        )
        data = encode(info, created_ns=created_ns, expires_ns=expires_ns, rows=rows)
        replaced = store.catalog.commit(request.session, request.name, data)
    if not backup:
        cache.save(keep_unseen=request.paths != ["."] or bool(request.shallow))
    return info, replaced
