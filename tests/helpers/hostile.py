"""Hostile snapshots planted in a store: tree objects, blobs and a manifest naming them,
committed as they are (nothing validated), the way a damaged or forged store would hold
them. What a restore, a read or a verify then does is the test."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from snapstore import SnapStore
from snapstore.format.manifest import encode
from snapstore.format.packfile import KIND_DATA, KIND_TREE
from snapstore.format.tree import tree_ref
from snapstore.internals import repository
from snapstore.models import SnapshotInfo
from snapstore.repo.batch import BlobBatch


def hostile_info(
    file_count: int = 0, total_bytes: int = 0, *, session: str = "s", name: str = "bad"
) -> SnapshotInfo:
    """The header of a planted snapshot, claiming ``file_count`` files of ``total_bytes``."""
    return SnapshotInfo(
        session, name, "files", datetime.now(UTC), None, file_count, total_bytes, {}, "/nowhere"
    )


def plant_snapshot(
    store: SnapStore,
    root: bytes,
    *,
    trees: Iterable[bytes] = (),
    blobs: Iterable[bytes] = (),
    info: SnapshotInfo | None = None,
) -> None:
    """Store the tree objects ``trees`` and ``root`` and the data blobs ``blobs`` (each
    named by its digest), then commit a manifest (``info``'s session and name, by default
    ``s``/``bad``) whose root tree is ``root``."""
    info = info or hostile_info()
    repo = repository(store)
    with repo.blobs_in_use():
        batch = BlobBatch(repo.blobs)
        for data in blobs:
            batch.add(tree_ref(data).digest, data, KIND_DATA)
        for data in [*trees, root]:
            batch.add(tree_ref(data).digest, data, KIND_TREE)
        batch.finish()
        repo.catalog.commit(
            info.session,
            info.name,
            encode(info, created_ns=time.time_ns(), expires_ns=None, tree=tree_ref(root)),
        )


def plant_manifest(store: SnapStore, session: str, name: str, data: bytes) -> Path:
    """Put ``data`` in place of the manifest file of (session, name) in a local store,
    atomically (a replaced one included: a committed manifest is read-only); its path."""
    path = Path(repository(store).catalog.manifest_path(session, name))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.planted")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    return path
