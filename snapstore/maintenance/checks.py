"""What gc and verify share: reading every committed manifest, temp files, blob checks."""

from __future__ import annotations

from collections.abc import Iterator

from snapstore.backend.seam import Backend
from snapstore.errors import CorruptBlobError, CorruptManifestError, MissingBlobError
from snapstore.format.manifest import Manifest
from snapstore.logs import get_logger
from snapstore.repo.blobs import Blobs
from snapstore.repo.catalog import Catalog
from snapstore.repo.repository import Repository
from snapstore.repo.trees import Marks

logger = get_logger(__name__)


def committed_manifests(catalog: Catalog) -> Iterator[Manifest | CorruptManifestError]:
    """Every manifest on disk now, fully decoded, or the error for one that is corrupt."""
    for item in catalog.manifests():
        if isinstance(item, CorruptManifestError):
            yield item
            continue
        try:
            yield catalog.read_named(item.name)
        except FileNotFoundError:
            continue
        except CorruptManifestError as error:
            yield error


def mark_manifest(
    repo: Repository, manifest: Manifest, marks: Marks, *, validate: bool = False
) -> str | None:
    """Mark what one manifest references (its trees read); why it cannot be, if a tree of it
    is missing or damaged (its references are then unknown). With ``validate``, every entry
    is also checked as a read of the whole snapshot would (paths, counts)."""
    try:
        marks.add_manifest(repo.trees, manifest)
        if validate:
            repo.trees.entries(manifest)
    except (CorruptManifestError, CorruptBlobError, MissingBlobError) as error:
        info = manifest.info
        return f"snapshot {info.name!r} of session {info.session!r} cannot be read: {error}"
    return None


def referenced(repo: Repository, *, validate: bool = False) -> tuple[Marks, list[str], int]:
    """What committed manifests reference, the manifests that may hide more (corrupt, or
    with trees that cannot be read; with ``validate``, also those a full read refuses), and
    how many manifests there are. Blobs must be in use (the gc lock held) and refreshed.

    Creates may commit while this runs (gc marks holding the gc lock shared): a manifest
    whose trees are not found is marked again after the view of the packs is brought up to
    date, and counts as damaged only if that fails too."""
    marks = Marks()
    corrupt: list[str] = []
    count = 0
    for manifest in committed_manifests(repo.catalog):
        count += 1
        if isinstance(manifest, CorruptManifestError):
            corrupt.append(str(manifest))
            continue
        problem = mark_manifest(repo, manifest, marks, validate=validate)
        if problem is not None:
            repo.blobs.refresh()  # its trees may be in a pack published since
            problem = _mark_again(repo, manifest, marks, validate=validate)
        if problem is not None:
            corrupt.append(problem)
    logger.debug("manifests reference %d blobs; %d are corrupt", len(marks.sizes), len(corrupt))
    return marks, corrupt, count


def _mark_again(
    repo: Repository, manifest: Manifest, marks: Marks, *, validate: bool
) -> str | None:
    """``mark_manifest`` from scratch (the trees a failed attempt marked would otherwise be
    skipped, and the damage below them not seen again); what it marks joins ``marks`` only
    if it succeeds."""
    fresh = Marks()
    problem = mark_manifest(repo, manifest, fresh, validate=validate)
    if problem is None:
        marks.sizes.update(fresh.sizes)
        marks.trees |= fresh.trees
        marks.maps |= fresh.maps
        for digest, path in fresh.paths.items():
            marks.paths.setdefault(digest, path)
    return problem


def clean_temp(backend: Backend, dry_run: bool) -> int:
    """Remove the half-written objects of writers that died (gc holds the gc lock exclusively,
    so no writer is running); how many there were."""
    if dry_run:
        return len(backend.stale_temps())
    removed = backend.remove_stale_temps()
    if removed:
        logger.info("removed %d stale temp files", removed)
    return removed


def check_blob(blobs: Blobs, digest: bytes, size: int, *, deep: bool) -> str | None:
    """A problem with one referenced blob (missing, wrong size, or with ``deep`` corrupt)."""
    try:
        if not blobs.has(digest, size):
            if blobs.has(digest):
                return f"blob {digest.hex()} has the wrong size (expected {size} bytes)"
            return f"blob {digest.hex()} is missing from the store"
        if deep:
            blobs.verify(digest, size)
    except (MissingBlobError, CorruptBlobError) as error:
        return str(error)
    return None
