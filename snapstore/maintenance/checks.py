"""What gc and verify share: reading every committed manifest, temp files, blob checks."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from snapstore.errors import CorruptBlobError, CorruptManifestError, MissingBlobError
from snapstore.format.manifest import Manifest
from snapstore.repo.backend import Backend
from snapstore.repo.blobs import Blobs
from snapstore.repo.catalog import Catalog

logger = logging.getLogger(__name__)


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


def referenced_digests(catalog: Catalog) -> tuple[set[bytes], list[str]]:
    """The digests committed manifests reference, and the corrupt manifests that may hide more."""
    referenced: set[bytes] = set()
    corrupt: list[str] = []
    for manifest in committed_manifests(catalog):
        if isinstance(manifest, CorruptManifestError):
            corrupt.append(str(manifest))
        else:
            referenced.update(e.digest for e in manifest.entries if e.digest is not None)
    logger.debug("manifests reference %d blobs; %d are corrupt", len(referenced), len(corrupt))
    return referenced, corrupt


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
