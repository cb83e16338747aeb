"""Garbage collection of packs, under the exclusive gc lock: delete packs no manifest needs,
rewrite packs that are mostly garbage (and merge many small packs) into new ones.

A rewrite publishes the new pack and its index (flushed) before it deletes an old index, and
deletes an old index before its pack, so at every instant each live blob is in some indexed
pack: a crash anywhere leaves at most duplicates and unindexed packs, which the next gc drops.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import blake3

from snapstore.errors import CorruptBlobError, MissingBlobError
from snapstore.format.packfile import PackIndex
from snapstore.repo.batch import PACK_MAX_BYTES
from snapstore.repo.blobs import Blobs
from snapstore.repo.packs import PackWriter
from snapstore.repo.packset import Location

REWRITE_GARBAGE_SHARE = 0.5
SMALL_PACK_BYTES = 16 << 20
MERGE_SMALL_PACKS = 16

logger = logging.getLogger(__name__)


@dataclass
class PackGcPlan:
    """What gc does to the packs: which to delete outright, which to rewrite."""

    delete: list[PackIndex] = field(default_factory=list)
    rewrite: list[PackIndex] = field(default_factory=list)

    def dead(self, referenced: set[bytes]) -> list[tuple[str, bytes, int]]:
        """(pack id, digest, size) of every unreferenced blob this plan drops."""
        return [
            (index.pack_id, digest, size)
            for index in self.delete + self.rewrite
            for digest, (_, size) in sorted(index.entries.items())
            if digest not in referenced
        ]


@dataclass
class PackGcResult:
    """What a pack gc did."""

    blobs_deleted: int = 0
    bytes_freed: int = 0
    packs_deleted: int = 0
    packs_written: int = 0
    problems: list[str] = field(default_factory=list)


def plan(indexes: list[PackIndex], referenced: set[bytes]) -> PackGcPlan:
    """Delete packs with no referenced blob; rewrite those whose unreferenced bytes exceed
    ``REWRITE_GARBAGE_SHARE``, and, once ``MERGE_SMALL_PACKS`` small packs pile up (one per
    create), merge them all."""
    result = PackGcPlan()
    small = []
    for index in sorted(indexes, key=lambda i: i.pack_id):
        total = index.total_bytes
        live = sum(size for d, (_, size) in index.entries.items() if d in referenced)
        if live == 0:
            result.delete.append(index)
        elif total - live > REWRITE_GARBAGE_SHARE * total:
            result.rewrite.append(index)
        elif index.pack_size < SMALL_PACK_BYTES:
            small.append(index)
    if len(small) >= MERGE_SMALL_PACKS:
        result.rewrite.extend(small)
    return result


def collect(storage: Blobs, referenced: set[bytes], *, dry_run: bool) -> PackGcResult:
    """Carry out the plan for the packs on disk; returns what was freed."""
    packs = storage.packs
    result = PackGcResult()
    todo = plan(packs.indexes(), referenced)
    logger.debug(
        "pack gc%s: %d packs hold no live blob, %d are worth rewriting",
        " (dry run)" if dry_run else "",
        len(todo.delete),
        len(todo.rewrite),
    )
    dead = todo.dead(referenced)
    old_bytes = sum(i.pack_size for i in todo.delete + todo.rewrite)
    written_bytes = 0
    if not dry_run and todo.rewrite:
        try:
            written = _rewrite(storage, todo, referenced)
        except (CorruptBlobError, MissingBlobError) as error:
            logger.warning("packs were not rewritten: %s", error)
            result.problems.append(f"packs were not rewritten: {error}")
            todo.rewrite = []
            dead = todo.dead(referenced)
            old_bytes = sum(i.pack_size for i in todo.delete)
            written = []
        written_bytes = sum(i.pack_size for i in written)
        result.packs_written = len(written)
        if written:
            logger.info(
                "rewrote the live blobs of %d packs into %d new packs (%d bytes)",
                len(todo.rewrite),
                len(written),
                written_bytes,
            )
    if not dry_run:
        for index in todo.delete + todo.rewrite:
            packs.delete(index.pack_id)
            logger.info(
                "deleted pack %s (%d bytes, %d blobs, %d of them unreferenced)",
                index.pack_id,
                index.pack_size,
                len(index.entries),
                sum(1 for digest in index.entries if digest not in referenced),
            )
        for orphan in packs.orphans():
            old_bytes += packs.delete_orphan(orphan)
            logger.info("deleted pack %s, which no index names", orphan)
    else:
        old_bytes += sum(packs.size_of(orphan) for orphan in packs.orphans())
    result.packs_deleted = len(todo.delete) + len(todo.rewrite)
    result.blobs_deleted = len(dead)
    result.bytes_freed = max(0, old_bytes - written_bytes)
    return result


def _rewrite(storage: Blobs, todo: PackGcPlan, referenced: set[bytes]) -> list[PackIndex]:
    """Copy the live blobs of the packs to rewrite into new packs (skipping blobs a kept pack
    or a loose file also holds); publish them and return their indexes."""
    packs = storage.packs
    going = {index.pack_id for index in todo.delete + todo.rewrite}
    kept = {d for i in packs.indexes() if i.pack_id not in going for d in i.entries}
    written: list[PackIndex] = []
    writer: PackWriter | None = None
    try:
        for index in todo.rewrite:
            for digest, (offset, size) in sorted(index.entries.items()):
                if digest not in referenced or digest in kept:
                    continue
                if writer is not None and digest in writer:
                    continue
                if storage.loose.has(digest, expected_size=size):
                    continue
                data = packs.read_unverified(Location(index.pack_id, offset, size))
                if blake3.blake3(data).digest() != digest:
                    raise CorruptBlobError(
                        f"blob {digest.hex()} in pack {index.pack_id} is corrupt; that pack "
                        "is kept as it is (run verify)"
                    )
                if writer is None:
                    writer = PackWriter(storage.backend)
                writer.add(digest, data)
                if writer.size >= PACK_MAX_BYTES:
                    written.append(writer.publish())
                    packs.register(written[-1])
                    writer = None
        if writer is not None:
            written.append(writer.publish())
            packs.register(written[-1])
            writer = None
    finally:
        if writer is not None:
            writer.abort()
    return written
