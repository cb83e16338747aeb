"""Copying an unencrypted store into an encrypted one (``snapstore encrypt --to``).

A store's object names all change when it is encrypted (they are sealed), so it is not
rewritten in place: its objects are copied, through the encrypting layer, into a new
encrypted store, and the old one is left as it was, to be removed by its owner once the new
one is in use. Safe to stop anywhere (a kill, a power cut): the source is only read; in the
destination, blobs, packs and their indexes are copied before any manifest (so no manifest
there names what is not), each object whole or not at all (staged, or an atomic write); a
run that is stopped is taken up by the next, which copies the blobs, packs and indexes
missing and every manifest again (a state value or snapshot replaced in the source since
is copied as it is now; one deleted there is deleted in the copy). The source's
gc lock is held, exclusive, for the whole copy: no create, restore or gc runs on it
meanwhile, so what is copied is one consistent store. Caches and heads are not copied (each
is rebuilt); a store with a restore in progress (a journal) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import blake3

from snapstore.backend.layout import FORMAT_MAJOR
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.errors import EncryptionError
from snapstore.format.hashing import CHUNK_BYTES
from snapstore.format.manifest import MAX_MANIFEST_BYTES
from snapstore.format.packfile import PackIndex
from snapstore.logs import get_logger
from snapstore.repo.packs import copy_as_pack
from snapstore.repo.repository import Repository

COPIED_KINDS = (Kind.BLOB, Kind.PACK, Kind.INDEX, Kind.MANIFEST)
"""In this order: what a manifest names is there before it is."""
MAX_INDEX_BYTES = 1 << 30

logger = get_logger(__name__)


@dataclass
class CopyReport:
    """What a copy into an encrypted store did."""

    copied: int = 0
    """Objects copied by this run."""
    present: int = 0
    """Objects the destination held already (copied by an earlier run that was stopped)."""
    bytes_copied: int = 0


def copy_into_encrypted(source: Repository, destination: Backend) -> CopyReport:
    """Copy every blob, pack, index and manifest of ``source`` into ``destination`` (an
    encrypted store's backend) that is not there yet; see the module docstring."""
    if source.format_major < FORMAT_MAJOR:
        raise EncryptionError("the store is of an older format: run 'snapstore upgrade' first")
    report = CopyReport()
    with source.gc_lock.exclusive():
        if source.backend.names(Kind.JOURNAL):
            raise EncryptionError(
                "a restore into the store is in progress (or was killed): "
                "let it finish, or open the store to recover it, first"
            )
        source.blobs.refresh(full=True)
        appendable = {i.pack_id: i for i in source.blobs.packs.indexes() if i.segments}
        for kind in COPIED_KINDS:
            present = set(destination.names(kind))
            names = source.backend.names(kind)
            for name in names:
                if kind is Kind.PACK and name in appendable:
                    _copy_appendable(appendable[name], source.backend, destination, report)
                    continue
                if name in present and kind is not Kind.MANIFEST:
                    report.present += 1
                    continue
                report.bytes_copied += _copy(source.backend, destination, Handle(kind, name))
                report.copied += 1
            if kind is Kind.MANIFEST:
                for gone in present - set(names):
                    destination.delete(Handle(kind, gone))
            destination.flush()
    logger.info("copied %d objects (%d there already)", report.copied, report.present)
    return report


def _copy_appendable(
    index: PackIndex, source: Backend, destination: Backend, report: CopyReport
) -> None:
    """Copy an appendable pack as a pack with an index file of its own (an encrypted store
    writes every object whole), named for the pack and the segments copied: a run taken up
    again finds it by its index, or writes it again over what a stopped run left."""
    name = blake3.blake3(f"{index.pack_id}:{index.pack_size}".encode()).hexdigest()[:32]
    if destination.names(Kind.INDEX, name) == [name]:
        report.present += 1
        return
    if destination.names(Kind.PACK, name) == [name]:
        destination.delete(Handle(Kind.PACK, name))
    report.bytes_copied += copy_as_pack(source, index, destination, name)
    report.copied += 1


def _copy(source: Backend, destination: Backend, handle: Handle) -> int:
    """Copy one object whole; its size."""
    if handle.kind in (Kind.MANIFEST, Kind.INDEX):
        limit = MAX_MANIFEST_BYTES if handle.kind is Kind.MANIFEST else MAX_INDEX_BYTES
        data, _ = source.read(handle, max_bytes=limit)
        destination.write(handle, data)
        return len(data)
    staged = destination.stage(handle.kind, source.stat(handle).size)
    try:
        for chunk in source.chunks(handle, CHUNK_BYTES):
            staged.write(chunk)
        staged.commit(handle.name)
    except BaseException:
        staged.abort()
        raise
    return staged.size
