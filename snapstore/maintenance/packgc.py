"""Garbage collection of packs: plan which packs no manifest needs (to delete) and which to
rewrite that are mostly garbage, and merge small packs geometrically (as git's
``repack --geometric=2``: after a gc each pack is at least twice the size of all smaller ones
together, so the number of packs stays logarithmic in the store's size), taking small loose
blobs into packs on the way.

``prepare`` copies the live blobs of the packs to rewrite into new packs, published and
flushed, before ``gcsteps`` deletes any old index, and an old index goes before its pack, so
at every instant each live blob is in some indexed pack: a crash anywhere leaves at most
duplicates and unindexed packs, which the next gc drops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import blake3

from snapstore.errors import CorruptBlobError, MissingBlobError
from snapstore.format.codec import REPACK_LEVEL
from snapstore.format.extents import CHUNKED_MAGIC, EXTENT_MAGIC
from snapstore.format.packfile import (
    KIND_DATA,
    KIND_TREE,
    RECORD_HEAD,
    PackIndex,
)
from snapstore.logs import get_logger
from snapstore.maintenance.measure import MeasuringBlobs
from snapstore.repo.batch import PackSeries, is_small
from snapstore.repo.blobs import Blobs
from snapstore.repo.packset import Location, PackSet
from snapstore.repo.trees import Marks

REWRITE_GARBAGE_SHARE = 0.5
FORMAT_VERSION = 2
"""Packs of an older format are always rewritten (gc converts a format 1 store)."""
GEOMETRIC_FACTOR = 2

logger = get_logger(__name__)


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
            for digest, (_, _, size) in sorted(index.entries.items())
            if digest not in referenced
        ]


def plan(indexes: list[PackIndex], referenced: set[bytes]) -> PackGcPlan:
    """Delete packs with no referenced blob; rewrite format 1 packs and those whose
    unreferenced bytes exceed ``REWRITE_GARBAGE_SHARE``; merge the smallest of the others as
    ``geometric_merge`` says."""
    result = PackGcPlan()
    kept = []
    for index in sorted(indexes, key=lambda i: i.pack_id):
        total = index.total_bytes
        live = sum(size for d, (_, _, size) in index.entries.items() if d in referenced)
        if not any(digest in referenced for digest in index.entries):  # empty blobs count
            result.delete.append(index)
        elif index.version < FORMAT_VERSION or total - live > REWRITE_GARBAGE_SHARE * total:
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


@dataclass
class PackWork:
    """What is left to do once the live blobs are copied: the packs to drop (every blob of
    them is garbage or held by a pack that stays), the loose blobs now held by a new pack,
    and the packs no index names. Carried out in steps by ``gcsteps``."""

    drop: list[PackIndex] = field(default_factory=list)
    packed_loose: list[bytes] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    written: list[PackIndex] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def prepare(storage: Blobs, marks: Marks, *, dry_run: bool) -> PackWork:
    """Plan the packs' collection and copy what the plan keeps of the packs it drops (and the
    small loose blobs) into new published packs; with ``dry_run`` only measure the copies.
    Called with the gc lock held (shared is enough: nothing is deleted here). A blob that
    cannot be copied (corrupt or missing) keeps every pack to rewrite as it is."""
    referenced = set(marks.sizes)
    todo = plan(storage.packs.read_whole(storage.packs.indexes()), referenced)
    logger.debug(
        "pack gc%s: %d packs hold no live blob, %d are worth rewriting",
        " (dry run)" if dry_run else "",
        len(todo.delete),
        len(todo.rewrite),
    )
    work = PackWork()
    loose = _small_loose(storage, referenced)
    if todo.rewrite or loose:
        try:
            work.written = _rewrite(storage, todo, marks, loose, measure=dry_run)
        except (CorruptBlobError, MissingBlobError) as error:
            verb = "would not be" if dry_run else "were not"
            logger.warning("packs %s rewritten: %s", verb, error)
            work.problems.append(f"packs {verb} rewritten: {error}")
            todo.rewrite, loose = [], {}
        if work.written and not dry_run:
            logger.info(
                "rewrote the live blobs of %d packs into %d new packs (%d bytes)",
                len(todo.rewrite),
                len(work.written),
                sum(i.pack_size for i in work.written),
            )
    work.drop = todo.delete + todo.rewrite
    work.packed_loose = sorted(loose)
    return work


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


def _copy_order(
    storage: Blobs, todo: PackGcPlan, marks: Marks, loose: dict[bytes, int]
) -> list[tuple[int, str, bytes, Location | None]]:
    """The blobs to copy, in the order to write them: file contents by path (the versions of
    one path side by side compress against each other), then trees. Blobs a kept pack or
    another copy in the list also holds are left out; a loose copy does not count (its
    writer may have died before flushing its name, and only its size would be known)."""
    packs = storage.packs
    going = {index.pack_id for index in todo.delete + todo.rewrite}
    indexes = packs.read_whole(packs.indexes())
    kept = {d for i in indexes if i.pack_id not in going for d in packs.durable(i)}
    order: dict[bytes, tuple[int, str, bytes, Location | None]] = {}
    for index in todo.rewrite:
        for digest, (number, offset, size) in index.entries.items():
            if digest not in marks.sizes or digest in kept or digest in loose or digest in order:
                continue
            kind = KIND_TREE if digest in marks.trees else KIND_DATA
            where = Location(index.pack_id, number, index.blocks[number], offset, size)
            order[digest] = (kind, marks.paths.get(digest, ""), digest, where)
    for digest in loose:
        order[digest] = (KIND_DATA, marks.paths.get(digest, ""), digest, None)
    return sorted(order.values(), key=lambda item: item[:3])


MAP_MAGICS = (EXTENT_MAGIC, CHUNKED_MAGIC)


def is_lone_map(where: Location, data: bytes) -> bool:
    """True if the packed blob ``data`` at ``where`` is an extent map that sits alone in its
    block (as every writer stores one): a copier keeps it alone, so that a create reusing
    its file never decompresses file data to read it."""
    return where.block.raw == RECORD_HEAD.size + len(data) and data.startswith(MAP_MAGICS)


def read_verified(packs: PackSet, where: Location, digest: bytes) -> bytes:
    """A packed blob's bytes to copy into a new pack, checked against ``digest``
    (CorruptBlobError naming its pack, which is then kept as it is)."""
    data = packs.read_unverified(where)
    if blake3.blake3(data).digest() != digest:
        raise CorruptBlobError(
            f"blob {digest.hex()} in pack {where.pack_id} is corrupt; that pack is kept as it "
            "is (run verify)"
        )
    return data


def _rewrite(
    storage: Blobs,
    todo: PackGcPlan,
    marks: Marks,
    loose: dict[bytes, int],
    *,
    measure: bool = False,
) -> list[PackIndex]:
    """Copy the live blobs of the packs to rewrite, and the small ``loose`` blobs, into new
    packs (see ``_copy_order``); publish them and return their indexes. Every blob is
    verified on the way. With ``measure`` (a dry run), the packs are compressed and laid
    out as they would be but written nowhere: their indexes say what gc would write."""
    packs = storage.packs
    target = MeasuringBlobs(storage) if measure else storage
    series = PackSeries(target, level=REPACK_LEVEL)  # type: ignore[arg-type]
    try:
        for kind, _, digest, where in _copy_order(storage, todo, marks, loose):
            if where is None:
                data = storage.loose.read(digest, loose[digest])
            else:
                data = read_verified(packs, where, digest)
            if digest in marks.maps:
                series.add_alone(digest, data, kind)  # as its writer stored it
            else:
                series.add(digest, data, kind)
        series.finish()
    finally:
        series.abort()
    return series.published
