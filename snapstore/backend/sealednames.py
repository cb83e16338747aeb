"""Which names an encrypted store seals, and how (``sealing.NameCipher``): every component of
the names that carry user data (sessions, snapshots, caches, journals), a blob's digest after
a keyed shard; the marker, key objects and the random ids of packs stay as they are."""

from __future__ import annotations

from snapstore.backend.sealing import NameCipher
from snapstore.backend.seam import Kind
from snapstore.logs import get_logger

CLEAR_NAMES = frozenset({Kind.MARKER, Kind.KEY, Kind.PACK, Kind.INDEX})

logger = get_logger(__name__)


def stored_name(names: NameCipher, kind: Kind, name: str) -> str:
    """The name an object of ``kind`` called ``name`` is stored under."""
    if kind in CLEAR_NAMES:
        return name
    if kind is Kind.BLOB:
        return names.shard(name[:2]) + names.seal(kind.value, name)
    return "/".join(names.seal(kind.value, part) for part in name.split("/"))


def plain_name(names: NameCipher, kind: Kind, stored: str) -> str | None:
    """The name of the object stored as ``stored`` (None: no name sealed by this key)."""
    if kind in CLEAR_NAMES:
        return stored
    if kind is Kind.BLOB:
        name = names.open(kind.value, stored[2:])
        return name if name is not None and names.shard(name[:2]) == stored[:2] else None
    parts = [names.open(kind.value, part) for part in stored.split("/")]
    if any(part is None for part in parts):
        logger.warning("%s: not an object of this store, left out", stored)
        return None
    return "/".join(part for part in parts if part is not None)


def listing_prefix(names: NameCipher, kind: Kind, prefix: str) -> str | None:
    """The stored prefix a listing of ``prefix`` lists under (None: list every object, and
    keep those whose name starts with ``prefix``)."""
    if kind in CLEAR_NAMES:
        return prefix
    if kind is Kind.BLOB:
        return names.shard(prefix[:2]) if len(prefix) >= 2 else None
    head, slash, _ = prefix.rpartition("/")
    return stored_name(names, kind, head) + "/" if slash else None
