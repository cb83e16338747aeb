"""Garbage collection of packs, under the exclusive gc lock: delete packs no manifest needs,
rewrite packs that are mostly garbage, and merge small packs geometrically (as git's
``repack --geometric=2``: after a gc each pack is at least twice the size of all smaller ones
together, so the number of packs stays logarithmic in the store's size), taking small loose
blobs into packs on the way.

A rewrite publishes the new pack and its index (flushed) before it deletes an old index, and
deletes an old index before its pack, so at every instant each live blob is in some indexed
pack: a crash anywhere leaves at most duplicates and unindexed packs, which the next gc drops.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import blake3

from snapstore.errors import CorruptBlobError, MissingBlobError
from snapstore.format.packfile import PACK_MAGIC, RECORD_HEAD, PackIndex
from snapstore.repo.batch import PackSeries, is_small
from snapstore.repo.blobs import Blobs
from snapstore.repo.packset import Location

REWRITE_GARBAGE_SHARE = 0.5
GEOMETRIC_FACTOR = 2

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
    ``REWRITE_GARBAGE_SHARE``; merge the smallest of the others as ``geometric_merge`` says."""
    result = PackGcPlan()
    kept = []
    for index in sorted(indexes, key=lambda i: i.pack_id):
        total = index.total_bytes
        live = sum(size for d, (_, size) in index.entries.items() if d in referenced)
        if not any(digest in referenced for digest in index.entries):  # empty blobs count
            result.delete.append(index)
        elif total - live > REWRITE_GARBAGE_SHARE * total:
            result.rewrite.append(index)
        else:
            kept.append(index)
    rewritten = sum(index.pack_size for index in result.rewrite)
    result.rewrite.extend(geometric_merge(kept, rewritten))
    return result


def geometric_merge(indexes: list[PackIndex], extra_bytes: int = 0) -> list[PackIndex]:
    """The smallest packs to merge (with ``extra_bytes`` of blobs being repacked anyway) so
    that each pack left is at least ``GEOMETRIC_FACTOR`` times the size of all smaller ones
    together, the merged pack included."""
    by_size = sorted(indexes, key=lambda index: (index.pack_size, index.pack_id))
    split, smaller = 0, extra_bytes
    for position, index in enumerate(by_size):
        if index.pack_size < GEOMETRIC_FACTOR * smaller:
            split = position + 1
        smaller += index.pack_size
    merged = by_size[:split]
    return merged if len(merged) + (extra_bytes > 0) >= 2 else []


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
    loose = _small_loose(storage, referenced)
    if not dry_run and (todo.rewrite or loose):
        try:
            written = _rewrite(storage, todo, referenced, loose)
        except (CorruptBlobError, MissingBlobError) as error:
            logger.warning("packs were not rewritten: %s", error)
            result.problems.append(f"packs were not rewritten: {error}")
            todo.rewrite, loose = [], {}
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
        for digest in loose:
            old_bytes += storage.loose.delete(digest)  # it is in a published pack now
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
        written_bytes = _rewritten_bytes(todo, referenced)
    result.packs_deleted = len(todo.delete) + len(todo.rewrite)
    result.blobs_deleted = len(dead)
    result.bytes_freed = max(0, old_bytes - written_bytes)
    return result


def _rewritten_bytes(todo: PackGcPlan, referenced: set[bytes]) -> int:
    """What rewriting would write (the live blobs of the packs to rewrite, as one pack): the
    estimate a dry run subtracts from what it would delete."""
    live = {
        digest: size
        for index in todo.rewrite
        for digest, (_, size) in index.entries.items()
        if digest in referenced
    }
    if not live:
        return 0
    return len(PACK_MAGIC) + sum(RECORD_HEAD.size + size for size in live.values())


def _small_loose(storage: Blobs, referenced: set[bytes]) -> dict[bytes, int]:
    """Referenced loose blobs small enough to belong in a pack (stores made before every small
    blob was packed hold many), by digest, with their sizes."""
    loose: dict[bytes, int] = {}
    packed = storage.packs.by_digest()
    for digest in storage.loose.iter_digests():
        if digest in referenced and digest not in packed:
            size = storage.loose.size(digest)
            if is_small(size):
                loose[digest] = size
    return loose


def _rewrite(
    storage: Blobs, todo: PackGcPlan, referenced: set[bytes], loose: dict[bytes, int]
) -> list[PackIndex]:
    """Copy the live blobs of the packs to rewrite (skipping blobs a kept pack or a loose copy
    also holds), and the small ``loose`` blobs, into new packs; publish them and return their
    indexes. Every blob is verified on the way."""
    packs = storage.packs
    going = {index.pack_id for index in todo.delete + todo.rewrite}
    kept = {d for i in packs.indexes() if i.pack_id not in going for d in i.entries}
    series = PackSeries(storage)
    try:
        for index in todo.rewrite:
            for digest, (offset, size) in sorted(index.entries.items()):
                if digest not in referenced or digest in kept or digest in loose:
                    continue
                if digest in series or storage.loose.has(digest, expected_size=size):
                    continue
                data = packs.read_unverified(Location(index.pack_id, offset, size))
                if blake3.blake3(data).digest() != digest:
                    raise CorruptBlobError(
                        f"blob {digest.hex()} in pack {index.pack_id} is corrupt; that pack "
                        "is kept as it is (run verify)"
                    )
                series.add(digest, data)
        for digest, size in sorted(loose.items()):
            series.add(digest, storage.loose.read(digest, size))
        series.finish()
    finally:
        series.abort()
    return series.published
