"""Blob garbage collection: delete what no manifest in the store references.

Runs under the exclusive gc lock (announced through the gc-intent lock while it waits), so no
writer holds uncommitted blobs and no reader is reading: it converts what is left of format 1
(``upgrade``), marks from every manifest there now (through their trees), removes stale temp
objects, deletes unreferenced loose blobs, and deletes or rewrites packs (``packgc``). A
corrupt manifest, or one whose trees cannot be read, stops blob deletion, since its references
are unknown.
"""

from __future__ import annotations

from snapstore.errors import LockTimeout
from snapstore.maintenance import packgc
from snapstore.maintenance.checks import clean_temp
from snapstore.maintenance.checks import referenced as referenced_blobs
from snapstore.maintenance.upgrade import convert_manifests
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
        report.skipped = report.locked = True
        report.reason = f"the store is busy: {error}"
        return report
    if report.problems:
        report.reason = "; ".join(report.problems)
    return report


def _collect_locked(repo: Repository, report: GcReport, *, dry_run: bool) -> None:
    repo.blobs.refresh(full=True)
    if not dry_run:
        repo.require_current_format()
        conversion = convert_manifests(repo)
        report.manifests_converted = conversion.converted
        report.problems += conversion.problems
    marks, corrupt, _ = referenced_blobs(repo)
    referenced = set(marks.sizes)
    report.temp_files_removed = clean_temp(repo.backend, dry_run)
    if corrupt:
        report.skipped = True
        report.problems.append(
            f"{len(corrupt)} corrupt manifest(s) hide which blobs are in use; no blob was "
            f"deleted (run verify): {corrupt[0]}"
        )
        return
    loose = repo.blobs.loose
    for digest in list(loose.iter_digests()):
        if digest in referenced:
            continue
        report.bytes_freed += loose.size(digest) if dry_run else loose.delete(digest)
        report.blobs_deleted += 1
    packed = packgc.collect(repo.blobs, marks, dry_run=dry_run)
    report.blobs_deleted += packed.blobs_deleted
    report.bytes_freed += packed.bytes_freed
    report.packs_deleted = packed.packs_deleted
    report.packs_written = packed.packs_written
    report.problems += packed.problems
    if not dry_run:
        repo.catalog.tidy()
