"""What the contract's parts share: the timeout bindings use, sample and hostile names,
the hooks' types, and payloads."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol

from snapstore.backend.seam import Backend, Kind, ObjectInfo
from snapstore.format.hashing import new_hasher

LOCK_TIMEOUT = 0.3
"""The ``lock_timeout`` a binding makes its backends with."""

SAMPLES = {
    Kind.BLOB: "ab" * 32,
    Kind.PACK: "1f" * 16,
    Kind.INDEX: "1f" * 16,
    Kind.MANIFEST: "s-0123456789abcdef/n-0123456789abcdef",
    Kind.JOURNAL: "0e" * 16,
    Kind.CACHE: "headers",
}
"""A well-formed name of each kind that is listed (the marker is read and written by handle)."""

HOSTILE_NAMES = [
    (Kind.BLOB, ""),
    (Kind.BLOB, "../" + "ab" * 31),
    (Kind.BLOB, "ab/" + "cd" * 31),
    (Kind.PACK, ".."),
    (Kind.PACK, "/etc/passwd"),
    (Kind.INDEX, "a\x00b"),
    (Kind.MANIFEST, "session-only"),
    (Kind.MANIFEST, "s/n/extra"),
    (Kind.MANIFEST, "../n"),
    (Kind.MANIFEST, "s/.."),
    (Kind.MANIFEST, "/s/n"),
    (Kind.JOURNAL, "../../outside"),
    (Kind.JOURNAL, "."),
    (Kind.CACHE, "heads//s"),
    (Kind.CACHE, "heads/../../outside"),
    (Kind.MARKER, "not-empty"),
]
"""Names no object of their kind can have: empty, absolute, with ``.``/``..`` or empty
components, NUL, or the wrong number of components."""


class MakeBackend(Protocol):
    def __call__(self, *, sharing: Backend | None = None) -> Backend: ...


Failing = Callable[[Backend], contextlib.AbstractContextManager[None]]


def digest(data: bytes) -> str:
    """The name of a blob holding ``data``."""
    return str(new_hasher(len(data)).update(data).hexdigest())


def same_object(one: ObjectInfo, other: ObjectInfo) -> bool:
    """Whether two infos describe the same version of an object (``written_ns`` may come from
    different clock readings: a create's own, or the store's)."""
    return (one.size, one.version) == (other.size, other.version)


def payload(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that differ at every offset from those of another seed."""
    return bytes((i * 7 + seed * 13 + (i >> 8)) % 256 for i in range(size))
