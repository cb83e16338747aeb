"""The storage seam: named objects by kind, and the locks, behind one interface.

Everything a store keeps is an object with a kind and a name: the format marker, loose blobs
(named by their digest), packs and their indexes (by pack id), manifests (by the directory
names of their session and snapshot), restore journals, and caches. A backend stores them and
owns their durability: when a call that writes returns, what it wrote survives a crash, except
where a call says otherwise (the names of staged objects become durable at ``flush``; caches
are never flushed). A backend also provides the named locks of the store.

Implementations: ``local.LocalBackend`` (a directory on a POSIX filesystem, the on-disk format
of docs/format.md), ``s3.S3Backend`` (an S3-compatible bucket shared by several hosts,
docs/object-storage.md) and ``memory.MemoryBackend`` (for tests).
``tests/backend/contract/`` (``BackendContract``) is the suite every backend must pass, and
docs/backends.md describes this contract in prose.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from snapstore.backend.packlog import PackLog


class Kind(enum.Enum):
    """What an object is; each kind has its own namespace of names."""

    MARKER = "marker"
    BLOB = "blob"
    PACK = "pack"
    INDEX = "index"
    MANIFEST = "manifest"
    JOURNAL = "journal"
    CACHE = "cache"
    KEY = "key"
    """An encrypted store's config and wrapped keys (docs/encryption.md), kept in the clear."""

    __hash__ = object.__hash__
    """By identity (a member is its only instance, and equal only to itself): Enum's own
    hash is a Python call, made at every lookup of a kind's directory."""


class Handle(NamedTuple):
    """An object's kind and name (a manifest's name is ``<session-dir>/<name-dir>``)."""

    kind: Kind
    name: str


Version = Hashable
"""What changes whenever an object is written (local: inode, size, mtime, ctime, device;
object storage: an ETag). Two reads returning the same version returned the same bytes."""


class ObjectInfo(NamedTuple):
    """An object's size, version, and when it was last written (nanoseconds since the epoch,
    by the clock of whatever stored it). A named tuple: a listing makes one per object."""

    size: int
    version: Version
    written_ns: int


class Properties(NamedTuple):
    """What a backend guarantees, for callers and the contract suite to check against."""

    durable: bool
    """Writes survive a crash once they return (False: ``durable=False`` stores, memory)."""
    local_root: str | None
    """The directory holding the store, if it is one on this machine (a scan of a tree that
    contains it must leave it out); None for a store elsewhere."""
    parallel_reads: int = 1
    """How many reads a restore keeps in flight: 1 where a read is a local system call,
    more where each is a request with a round trip (object storage)."""
    write_once: frozenset[Kind] = frozenset()
    """Kinds (of blobs, packs, indexes) whose objects are created once and never replaced:
    a ``write`` of one that is there with other bytes raises ConcurrentWriteError (the same
    bytes again succeed). Other kinds, and every kind of a backend not listing it, are
    replaced by a ``write``."""
    appends: bool = False
    """Whether ``stage_appendable`` offers packs a writer appends to (a local store)."""
    fresh_listings: bool = True
    """Whether ``names``, ``infos`` and ``stat`` of blobs, packs and indexes always see what
    other writers added or removed. False: they may answer from what this backend listed
    before, until it next takes the ``gc`` lock (such objects are added by anyone and
    removed only under that lock held exclusively, so what was seen holds until then)."""


class StagedObject(Protocol):
    """An object being written whose name is only known at the end (a blob, named by the
    digest of its bytes; a pack). Nothing of it is visible before ``commit``."""

    size: int

    def write(self, data: bytes | memoryview) -> None:
        """Append bytes."""
        ...

    def restart(self) -> None:
        """Drop what was written so far and start again (the source changed)."""
        ...

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        """Publish the bytes as ``name`` of the staged kind; the bytes are durable when this
        returns, the name when ``flush`` returns (or now, with ``name_durable``)."""
        ...

    def abort(self) -> None:
        """Drop the staged bytes."""
        ...


class AppendableObject(StagedObject, Protocol):
    """A staged object its writer keeps open once committed, to append to it (an appendable
    pack): ``commit`` makes its bytes and its name durable; each ``append`` then extends it,
    durable at the next ``sync``. Readers never see bytes before they are written whole,
    but may see an append in progress (a torn tail), which the object's format tells apart."""

    def append(self, data: bytes | memoryview) -> None:
        """Write ``data`` after the bytes written so far."""
        ...

    def sync(self) -> None:
        """Make every byte appended so far durable."""
        ...

    def truncate(self, size: int) -> None:
        """Cut the object back to its first ``size`` bytes (a writer taking back an append
        that failed, so that no reader takes it for whole)."""
        ...

    def current(self) -> bool:
        """Whether the committed object is still the one its name holds (not deleted or
        replaced since: a writer appends only to an object still in the store)."""
        ...

    def close(self) -> None:
        """Stop appending (release the open file)."""
        ...


class Lock(Protocol):
    """One named lock of the store, shared or exclusive, with a timeout (LockTimeout)."""

    name: str
    timeout: float

    def shared(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the lock together with other shared holders."""
        ...

    def exclusive(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the lock alone."""
        ...

    def exclusive_if_free(self) -> contextlib.AbstractContextManager[bool]:
        """Hold the lock alone if nobody holds it now (yields True), else yield False."""
        ...


class Backend(Protocol):
    """Where a store's objects live. Reads of a missing object raise FileNotFoundError; a
    name no object of its kind can have (``names.check_name``) raises InvalidNameError."""

    properties: Properties

    def open(self, *, create: bool) -> bool:
        """Check (or, with ``create``, make) the store; True if this process may write it."""
        ...

    def stat(self, handle: Handle) -> ObjectInfo:
        """An object's size and version (UnfitFileError for something that is no object)."""
        ...

    def read(self, handle: Handle, *, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        """An object's bytes and the version they are; refuses (UnfitFileError) one larger
        than ``max_bytes`` before reading it."""
        ...

    def read_range(self, handle: Handle, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer only if the object ends sooner)."""
        ...

    def read_head(self, handle: Handle, length: int) -> tuple[bytes, ObjectInfo]:
        """Up to ``length`` leading bytes of an object, and its info."""
        ...

    def chunks(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        """An object's bytes in pieces of at most ``chunk_bytes`` (never whole in memory)."""
        ...

    def stage(self, kind: Kind, size_hint: int = 0) -> StagedObject:
        """Start writing an object of ``kind`` whose name is chosen at commit."""
        ...

    def stage_appendable(self, kind: Kind) -> AppendableObject | None:
        """Start writing an object of ``kind`` that its writer appends to once committed;
        None where the backend cannot (``properties.appends`` is False)."""
        ...

    def write(self, handle: Handle, data: bytes, *, durable: bool = True) -> None:
        """Create or replace an object atomically (a reader sees the old bytes or the new)."""
        ...

    def delete(
        self, handle: Handle, *, durable: bool = True, version: Version | None = None
    ) -> None:
        """Remove an object (FileNotFoundError if it is not there); with ``version``, only
        that version of it (ConcurrentWriteError if another writer replaced it since it was
        read: a deletion decided from what was read never removes what was not)."""
        ...

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        """The names of the objects of ``kind`` now (starting with ``prefix``, any string),
        sorted; the marker is never listed."""
        ...

    def infos(self, kind: Kind, prefix: str = "") -> dict[str, ObjectInfo | None]:
        """The objects of ``kind`` now (starting with ``prefix``), each with its info: what
        ``names`` and a ``stat`` of each give, in one listing where the backend can. None
        for a name holding something that is no object (``stat`` raises UnfitFileError)."""
        ...

    def listing_stamp(self, kind: Kind, prefix: str) -> Hashable | None:
        """A value, read in one cheap call, that changes whenever an object of ``kind`` whose
        name starts with ``prefix`` (the manifests of one session: ``<session-dir>/``) is
        added, replaced or removed; None if the backend cannot tell without listing them."""
        ...

    def listing_stamps(self, kind: Kind, prefix: str = "") -> dict[str, Hashable | None] | None:
        """The groups of objects of ``kind`` (manifests: the sessions, by session directory)
        whose names start with ``prefix`` (``""`` or ``<session-dir>/``), each with its
        *settled* listing stamp: a ``listing_stamp`` that no later change of the group can
        leave as it is, or None for a group whose stamp cannot promise that now (local: its
        directory changed within the last seconds). None for the whole if the backend
        cannot tell without listing the objects."""
        ...

    def pack_log(self) -> PackLog | None:
        """The store's pack log (``packlog``: how a process learns of packs others published
        without listing them all), or None if the backend keeps none (its packs are listed
        at every refresh)."""
        ...

    def note_existing(self, handle: Handle) -> None:
        """Count on an object another writer made: the next ``flush`` makes its name durable
        too (that writer may have died before doing so)."""
        ...

    def flush(self) -> None:
        """Make durable the names of objects committed (and noted) by this thread."""
        ...

    def flush_deletions(self, kind: Kind, names: Sequence[str] | None = None) -> None:
        """Make durable every deletion of an object of ``kind`` (of one of ``names``, if
        given) made so far, by any process (gc, before it deletes the blobs of manifests it
        found gone: a deleter killed before its flush must not have them come back after a
        power cut). Where a deletion is durable when it returns (object storage), nothing."""
        ...

    def lock(self, name: str, label: str | None = None) -> Lock:
        """The store's lock called ``name`` (``gc``, ``gc-intent``, ``sessions/<session-dir>``
        or ``targets/<key>``); ``label`` is how errors name it (default: ``name``)."""
        ...

    def tidy(self) -> None:
        """Remove what deletes may have left empty, each session under its lock (sessions
        whose lock is held are left for the next time)."""
        ...

    def stale_temps(self) -> list[str]:
        """Half-written objects of writers that died (only while no writer is running)."""
        ...

    def remove_stale_temps(self) -> int:
        """Remove them; how many were removed."""
        ...

    def describe(self, handle: Handle) -> str:
        """How to show an object to a person (the local backend: its path)."""
        ...

    def now_ns(self) -> int:
        """Now, by the clock that stamps this store's objects with their write times (the
        server's, for object storage): what ages and expiries are judged by."""
        ...

    def close(self) -> None:
        """Release what the backend keeps open."""
        ...
