"""Blob garbage collection: delete what no manifest in the store references.

Runs under the exclusive gc lock (announced through the gc-intent lock while it waits), so no
writer holds uncommitted blobs and no reader is reading: it marks from every manifest there
now, removes stale temp objects, deletes unreferenced loose blobs, and deletes or rewrites
packs (``packgc``). A corrupt manifest stops blob deletion, since its references are unknown.
"""

from __future__ import annotations

from snapstore.errors import LockTimeout
from snapstore.maintenance import packgc
from snapstore.maintenance.checks import clean_temp, referenced_digests
from snapstore.models import GcReport
from snapstore.repo.locks import exclusive_with_intent
from snapstore.repo.repository import Repository


def collect(repo: Repository, *, dry_run: bool) -> GcReport:
    """Collect the garbage of ``repo`` (``dry_run``: only report it); a store busy for longer
    than the lock timeout is reported as skipped."""
    report = GcReport()
    try:
        with exclusive_with_intent(repo.gc_lock, repo.gc_intent):
            _collect_locked(repo, report, dry_run=dry_run)
    except LockTimeout as error:
        report.skipped = True
        report.reason = f"the store is busy: {error}"
    return report


def _collect_locked(repo: Repository, report: GcReport, *, dry_run: bool) -> None:
    referenced, corrupt = referenced_digests(repo.catalog)
    report.temp_files_removed = clean_temp(repo.backend, dry_run)
    if corrupt:
        report.skipped = True
        report.reason = (
            f"{len(corrupt)} corrupt manifest(s) hide which blobs are in use; no blob was "
            f"deleted (run verify): {corrupt[0]}"
        )
        return
    repo.blobs.refresh()
    loose = repo.blobs.loose
    for digest in list(loose.iter_digests()):
        if digest in referenced:
            continue
        report.bytes_freed += loose.size(digest) if dry_run else loose.delete(digest)
        report.blobs_deleted += 1
    packed = packgc.collect(repo.blobs, referenced, dry_run=dry_run)
    report.blobs_deleted += packed.blobs_deleted
    report.bytes_freed += packed.bytes_freed
    report.packs_deleted = packed.packs_deleted
    report.packs_written = packed.packs_written
    if packed.problems:
        report.reason = "; ".join(packed.problems)
    if not dry_run:
        with repo.namespace_lock.exclusive():
            repo.catalog.tidy()
