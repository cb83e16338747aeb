"""``verify``: damage to what is committed (problems) and leftovers gc would clean (garbage).

Holds the gc lock shared (no blob disappears meanwhile). Every manifest, undo backups
included, must decode and every blob it references must be stored with its recorded size
(with ``deep``, also hash right). Temp objects, unreferenced loose blobs, packs without an
index and unreferenced blobs in packs gc would drop are garbage: they do not make ``ok`` False.
"""

from __future__ import annotations

from collections.abc import Callable

from snapstore.maintenance import packgc
from snapstore.maintenance.checks import check_blob
from snapstore.maintenance.checks import referenced as referenced_blobs
from snapstore.models import VerifyReport
from snapstore.repo.repository import Repository


def verify(
    repo: Repository, *, deep: bool, progress: Callable[[int, int], None] | None = None
) -> VerifyReport:
    """Check every committed snapshot of ``repo``; ``progress(done, total)`` counts blobs."""
    report = VerifyReport()
    with repo.blobs_in_use():
        repo.blobs.refresh(full=True)
        marks, corrupt, report.snapshots_checked = referenced_blobs(repo, validate=True)
        report.problems.extend(corrupt)
        referenced = marks.sizes
        for done, (digest, size) in enumerate(sorted(referenced.items()), 1):
            report.blobs_checked += 1
            problem = check_blob(repo.blobs, digest, size, deep=deep)
            if problem:
                report.problems.append(problem)
            if progress is not None:
                progress(done, len(referenced))
        packs = repo.blobs.packs
        report.problems.extend(packs.broken().values())
        report.problems.extend(packs.check_sizes())
        report.garbage.extend(_garbage(repo, set(referenced)))
    report.ok = not report.problems
    return report


def _garbage(repo: Repository, referenced: set[bytes]) -> list[str]:
    """What gc would remove, for people: stale temp objects, unreferenced loose blobs, packs
    no index names, and packs holding blobs gc would drop."""
    packs = repo.blobs.packs
    loose = repo.blobs.loose
    found = list(repo.backend.stale_temps())
    found += [loose.path(d) for d in loose.iter_digests() if d not in referenced]
    found += [packs.pack_path(pack_id) for pack_id in packs.orphans()]
    dead: dict[str, int] = {}
    for pack_id, _, _ in packgc.plan(packs.indexes(), referenced).dead(referenced):
        dead[pack_id] = dead.get(pack_id, 0) + 1
    found += [
        f"{packs.pack_path(pack_id)} ({count} unreferenced blobs)"
        for pack_id, count in sorted(dead.items())
    ]
    return found
