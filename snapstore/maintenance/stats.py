"""Stats: what a store holds and what it costs, per session and as a whole, read under the
shared gc lock (so no blob goes while it is counted).

Sizes of blobs are their *stored* sizes: a loose blob's file, and for a packed blob its share
of its compressed block (the block's stored bytes times the blob's part of its raw bytes).
A snapshot references its tree objects, its files' blobs and, for files with holes, their
extent maps and pieces (``Marks``, as gc marks them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from snapstore.backend.seam import Kind
from snapstore.errors import CorruptManifestError
from snapstore.maintenance.checks import committed_manifests, mark_manifest
from snapstore.maintenance.sweep import choose_victims
from snapstore.models import SnapshotInfo, _ToDict
from snapstore.repo.repository import Repository
from snapstore.repo.trees import Marks


@dataclass
class SessionStats(_ToDict):
    """One session: its snapshots, sizes, and what a sweep would free."""

    session: str
    checkpoints: int = 0
    states: int = 0
    backups: int = 0
    logical_bytes: int = 0
    """The bytes its file checkpoints hold, as files (each checkpoint counted in full)."""
    stored_bytes: int = 0
    """The stored bytes of the blobs its snapshots reference (shared ones counted in full)."""
    unique_bytes: int = 0
    """The stored bytes of the blobs no other session references: what deleting the session
    and a gc would free."""
    newest: SnapshotInfo | None = None
    """Its newest file checkpoint."""
    sweep_deletes: int = 0
    """Snapshots a sweep with the options given would delete."""
    sweep_frees: int = 0
    """The stored bytes that sweep and the next gc would free (blobs only those snapshots
    reference)."""


@dataclass
class StoreStats(_ToDict):
    """The whole store, and each session (``sessions``, by name)."""

    format: int = 0
    manifests: int = 0
    blobs: int = 0
    packed_blobs: int = 0
    loose_blobs: int = 0
    packs: int = 0
    stored_bytes: int = 0
    """The stored bytes of every blob (referenced or not)."""
    referenced_bytes: int = 0
    """The stored bytes of the blobs some snapshot references."""
    garbage_bytes: int = 0
    """The stored bytes of blobs no snapshot references: what the next gc frees (roughly:
    packs are rewritten only when mostly garbage)."""
    disk_bytes: int = 0
    """The size of the store's objects: packs, indexes, loose blobs, manifests, journals and
    caches."""
    sweep: dict[str, Any] = field(default_factory=dict)
    """The sweep options the ``sweep_*`` figures assume."""
    sweep_deletes: int = 0
    sweep_frees: int = 0
    sessions: list[SessionStats] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Manifests that could not be read (their blobs are not counted)."""


def session_counts(infos: Iterable[SnapshotInfo]) -> dict[str, SessionStats]:
    """Each session's checkpoints, state values, undo backups, logical size and newest
    checkpoint, from the headers ``infos`` (oldest first), by session."""
    per_session: dict[str, SessionStats] = {}
    for info in infos:
        item = per_session.setdefault(info.session, SessionStats(info.session))
        if info.is_backup:
            item.backups += 1
        elif info.kind == "state":
            item.states += 1
        else:
            item.checkpoints += 1
            item.logical_bytes += info.total_bytes
            item.newest = info
    return per_session


def blob_sizes(repo: Repository) -> tuple[dict[bytes, float], int, int]:
    """Each stored blob's stored size, how many are packed, and how many packs there are."""
    sizes: dict[bytes, float] = {}
    indexes = repo.blobs.packs.read_whole(repo.blobs.packs.indexes())
    for index in indexes:
        for digest, (number, _, size) in index.entries.items():
            block = index.blocks[number]
            sizes[digest] = size * block.stored / block.raw if block.raw else 0.0
    packed = len(sizes)
    for name, info in repo.backend.infos(Kind.BLOB).items():
        try:
            digest = bytes.fromhex(name.replace("/", ""))
        except ValueError:
            continue
        if len(digest) == 32 and digest not in sizes and info is not None:
            sizes[digest] = float(info.size)
    return sizes, packed, len(indexes)


COUNTED_KINDS = (Kind.BLOB, Kind.PACK, Kind.INDEX, Kind.MANIFEST, Kind.JOURNAL, Kind.CACHE)
"""The kinds of objects whose sizes make up ``disk_bytes`` (the marker is a few bytes, and
no backend lists it)."""


def _disk_bytes(repo: Repository) -> int:
    total = 0
    for kind in COUNTED_KINDS:
        total += sum(info.size for info in repo.backend.infos(kind).values() if info is not None)
    return total


def _total(digests: Iterable[bytes], sizes: dict[bytes, float]) -> int:
    return round(sum(sizes.get(digest, 0.0) for digest in digests))


def collect_stats(
    repo: Repository,
    *,
    session: str | None,
    ttl: float | None,
    keep_last: int | None,
    now_ns: int,
) -> StoreStats:
    """The store's stats; per session only ``session``'s if given."""
    stats = StoreStats(format=repo.format_major, sweep={"ttl": ttl, "keep_last": keep_last})
    with repo.blobs_in_use():
        sizes, stats.packed_blobs, stats.packs = blob_sizes(repo)
        found = sorted(repo.catalog.headers(), key=lambda item: item.header.order_ns)
        victims = {
            (item.header.info.session, item.header.info.name)
            for item in choose_victims(found, ttl=ttl, keep_last=keep_last, now_ns=now_ns)
        }
        by_snapshot: dict[tuple[str, str], set[bytes]] = {}
        for manifest in committed_manifests(repo.catalog):
            stats.manifests += 1
            if isinstance(manifest, CorruptManifestError):
                stats.problems.append(str(manifest))
                continue
            marks = Marks()
            problem = mark_manifest(repo, manifest, marks)
            if problem is not None:
                stats.problems.append(problem)
            by_snapshot[(manifest.info.session, manifest.info.name)] = set(marks.sizes)
        stats.disk_bytes = _disk_bytes(repo)
    _fill(
        stats,
        found_infos=[item.header.info for item in found],
        sizes=sizes,
        by_snapshot=by_snapshot,
        victims=victims,
        only=session,
    )
    return stats


def _fill(
    stats: StoreStats,
    *,
    found_infos: list[SnapshotInfo],
    sizes: dict[bytes, float],
    by_snapshot: dict[tuple[str, str], set[bytes]],
    victims: set[tuple[str, str]],
    only: str | None,
) -> None:
    """The figures, from each snapshot's referenced blobs."""
    users: dict[bytes, set[str]] = defaultdict(set)
    remaining: set[bytes] = set()
    for (session, name), digests in by_snapshot.items():
        for digest in digests:
            users[digest].add(session)
        if (session, name) not in victims:
            remaining |= digests
    stats.blobs = len(sizes)
    stats.loose_blobs = stats.blobs - stats.packed_blobs
    stats.stored_bytes = _total(sizes, sizes)
    stats.referenced_bytes = _total(users, sizes)
    stats.garbage_bytes = _total((d for d in sizes if d not in users), sizes)
    freed_by_sweep: set[bytes] = set()
    per_session = session_counts(found_infos)
    for session, item in per_session.items():
        mine = set().union(*(d for (s, _), d in by_snapshot.items() if s == session))
        item.stored_bytes = _total(mine, sizes)
        item.unique_bytes = _total((d for d in mine if users[d] == {session}), sizes)
        swept = [key for key in victims if key[0] == session]
        item.sweep_deletes = len(swept)
        gone = set().union(*(by_snapshot.get(key, set()) for key in swept)) - remaining
        item.sweep_frees = _total(gone, sizes)
        freed_by_sweep |= gone
    stats.sweep_deletes = len(victims)
    stats.sweep_frees = _total(freed_by_sweep, sizes)
    stats.sessions = [
        per_session[name] for name in sorted(per_session) if only is None or name == only
    ]
