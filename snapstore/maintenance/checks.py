"""What gc and verify share: reading every committed manifest, temp files, blob checks."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from snapstore.errors import CorruptBlobError, CorruptManifestError, MissingBlobError
from snapstore.format.manifest import Manifest
from snapstore.fs.durable import TEMP_PREFIX
from snapstore.fs.seam import FileSystem
from snapstore.repo.blobs import BlobStorage
from snapstore.repo.catalog import Catalog

logger = logging.getLogger(__name__)


def committed_manifests(catalog: Catalog) -> Iterator[Manifest | CorruptManifestError]:
    """Every manifest on disk now, fully decoded, or the error for one that is corrupt."""
    for item in catalog.scan():
        if isinstance(item, CorruptManifestError):
            yield item
            continue
        try:
            yield catalog.read_path(item.path)
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


def temp_files(tmp_dir: str) -> list[str]:
    """Everything in ``tmp/``: garbage whenever no writer holds the gc lock."""
    return [os.path.join(tmp_dir, entry) for entry in os.listdir(tmp_dir)]


def clean_temp(fs: FileSystem, tmp_dir: str, dry_run: bool) -> int:
    """Remove stale staging files (gc holds the gc lock exclusively, so none is in use)."""
    removed = 0
    for path in temp_files(tmp_dir):
        if os.path.basename(path).startswith(TEMP_PREFIX):
            if not dry_run:
                with contextlib.suppress(FileNotFoundError):
                    fs.unlink(path)
                logger.info("removed stale temp file %s", path)
            removed += 1
    return removed


def check_blob(blobs: BlobStorage, digest: bytes, size: int, *, deep: bool) -> str | None:
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
