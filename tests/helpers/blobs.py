"""Reach a stored blob's bytes wherever they are (a loose file or a range of a pack), to damage,
remove or move them in tests of what readers do then."""

from __future__ import annotations

import os
from pathlib import Path

from snapstore import SnapStore
from snapstore.format.codec import CODEC_NONE
from snapstore.internals import repository
from snapstore.repo.packs import PackWriter


def _pack_files(store: SnapStore, pack_id: str) -> list[Path]:
    """The pack file and its index file, if it has one (an appendable pack has none)."""
    pack = Path(repository(store).blobs.packs.pack_path(pack_id))
    index = pack.with_suffix(".idx")
    return [pack, index] if index.exists() else [pack]


def two_file_packs(store: SnapStore) -> SnapStore:
    """Make ``store`` write every pack with an index file of its own (as gc, folding, object
    storage and encrypted stores do), instead of appending small creates to a pack it keeps
    open: for tests of what readers do with index files."""
    repository(store).blobs.open_pack.available = False
    return store


def corrupt_blob(store: SnapStore, digest: bytes) -> None:
    """Flip the first byte of the blob's stored bytes (its size stays the same); for a blob
    in a compressed block, the first byte of the block (every blob of it reads as corrupt)."""
    repository(store).blobs.refresh()
    location = repository(store).blobs.packs.locate(digest)
    if location is None:
        path, offset = Path(repository(store).blobs.path(digest)), 0
    else:
        path = _pack_files(store, location.pack_id)[0]
        offset = location.block.offset
        if location.block.codec == CODEC_NONE:
            offset += location.offset
    path.chmod(0o644)
    with open(path, "r+b") as file:
        file.seek(offset)
        first = file.read(1)
        file.seek(offset)
        file.write(bytes([first[0] ^ 0xFF]))


def remove_blob(store: SnapStore, digest: bytes) -> None:
    """Remove the blob's stored copy: its loose file, or its record in its pack (the pack is
    rewritten without it, so the other blobs and tree objects it held stay)."""
    repository(store).blobs.refresh()
    location = repository(store).blobs.packs.locate(digest)
    if location is None:
        os.unlink(repository(store).blobs.path(digest))
        return
    packs = repository(store).blobs.packs
    (index,) = [i for i in packs.indexes() if i.pack_id == location.pack_id]
    others = [d for d in index.entries if d != digest]
    if others:
        writer = PackWriter(repository(store).backend)
        for other in sorted(others, key=lambda d: index.blocks[index.entries[d][0]].kind):
            writer.add(
                other,
                repository(store).blobs.read(other),
                index.blocks[index.entries[other][0]].kind,
            )
        writer.publish()
    packs.announce_deletions()
    for path in _pack_files(store, location.pack_id):
        path.chmod(0o644)
        path.unlink()
    repository(store).blobs.refresh(full=True)


def loosen(store: SnapStore, digest: bytes) -> Path:
    """Keep the blob as a loose file only (its pack rewritten without it); return the loose
    file's path."""
    repository(store).blobs.refresh()
    data = repository(store).blobs.read(digest)
    location = repository(store).blobs.packs.locate(digest)
    assert location is not None
    repository(store).blobs.loose.put_bytes(data)
    repository(store).blobs.loose.sync()
    remove_blob(store, digest)
    repository(store).blobs.refresh()
    return Path(repository(store).blobs.path(digest))
