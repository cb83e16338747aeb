"""Reach a stored blob's bytes wherever they are (a loose file or a range of a pack), to damage,
remove or move them in tests of what readers do then."""

from __future__ import annotations

import os
from pathlib import Path

from snapstore import SnapStore


def _pack_files(store: SnapStore, pack_id: str) -> list[Path]:
    pack = Path(store.blobs.packs.pack_path(pack_id))
    return [pack, pack.with_suffix(".idx")]


def corrupt_blob(store: SnapStore, digest: bytes) -> None:
    """Flip the first byte of the blob's stored bytes (its size stays the same)."""
    store.blobs.refresh()
    location = store.blobs.packs.locate(digest)
    if location is None:
        path, offset = Path(store.blobs.path(digest)), 0
    else:
        path, offset = _pack_files(store, location.pack_id)[0], location.offset
    path.chmod(0o644)
    with open(path, "r+b") as file:
        file.seek(offset)
        first = file.read(1)
        file.seek(offset)
        file.write(bytes([first[0] ^ 0xFF]))


def remove_blob(store: SnapStore, digest: bytes) -> None:
    """Remove the blob's stored copy (for a packed blob: its whole pack and index)."""
    store.blobs.refresh()
    location = store.blobs.packs.locate(digest)
    if location is None:
        os.unlink(store.blobs.path(digest))
        return
    for path in _pack_files(store, location.pack_id):
        path.chmod(0o644)
        path.unlink()


def loosen(store: SnapStore, digest: bytes) -> Path:
    """Keep the blob as a loose file only (its pack, holding nothing else, removed); return
    the loose file's path."""
    store.blobs.refresh()
    data = store.blobs.read(digest)
    location = store.blobs.packs.locate(digest)
    assert location is not None and len(store.blobs.packs.indexes()) >= 1
    store.blobs.loose.put_bytes(data)
    store.blobs.loose.sync()
    remove_blob(store, digest)
    store.blobs.refresh()
    return Path(store.blobs.path(digest))
