"""What listings of the bucket said about its immutable objects, remembered per backend.

Listings are cheap on object storage and per-object requests are not. Blobs, packs and
indexes are written once and never changed, and disappear only under the gc lock, so what a
listing (or a create, or a HEAD) said of them holds until this process next takes the gc
lock: ``stat`` of such an object, and ``infos`` of their kinds, are answered from here, with
at most one listing of ``blobs/`` and one of ``packs/`` in between.
"""

from __future__ import annotations

import threading

from snapstore.backend.s3.objects import BucketObjects
from snapstore.backend.seam import Handle, Kind, ObjectInfo

IMMUTABLE = frozenset({Kind.BLOB, Kind.PACK, Kind.INDEX})
"""The kinds whose objects never change once written."""


class ListingMemo:
    """The known immutable objects of a bucket, with their infos. Threads may share one."""

    def __init__(self, objects: BucketObjects) -> None:
        self.objects = objects
        self._mutex = threading.Lock()
        self._known: dict[Handle, ObjectInfo] = {}
        self._listed: set[str] = set()

    def forget_all(self) -> None:
        """Forget what earlier listings said (the gc lock was just taken: objects may have
        gone while it was not held)."""
        with self._mutex:
            self._known.clear()
            self._listed.clear()

    def known(self, handle: Handle) -> ObjectInfo | None:
        """What is known of ``handle``, or None (not immutable, or not seen)."""
        with self._mutex:
            return self._known.get(handle)

    def remember(self, handle: Handle, info: ObjectInfo | None) -> None:
        """Note that an immutable object is there with ``info`` (None: gone)."""
        if handle.kind not in IMMUTABLE:
            return
        with self._mutex:
            if info is None:
                self._known.pop(handle, None)
            else:
                self._known[handle] = info

    def infos(self, kind: Kind, prefix: str) -> dict[str, ObjectInfo | None]:
        """The objects of an immutable ``kind`` whose names start with ``prefix``."""
        self._list_once(kind)
        with self._mutex:
            return {
                h.name: info
                for h, info in self._known.items()
                if h.kind is kind and h.name.startswith(prefix)
            }

    def _list_once(self, kind: Kind) -> None:
        """List ``blobs/`` or ``packs/`` once since the gc lock was last taken."""
        directory = "blobs/" if kind is Kind.BLOB else "packs/"
        with self._mutex:
            if directory in self._listed:
                return
        found: dict[Handle, ObjectInfo] = {}
        base = self.objects.prefix + directory
        for key, info in self.objects.list(base):
            name = key[len(base) :]
            if kind is Kind.BLOB:
                found[Handle(Kind.BLOB, name)] = info
            elif name.endswith(".pack"):
                found[Handle(Kind.PACK, name[: -len(".pack")])] = info
            elif name.endswith(".idx"):
                found[Handle(Kind.INDEX, name[: -len(".idx")])] = info
        with self._mutex:
            kinds = {Kind.BLOB} if kind is Kind.BLOB else {Kind.PACK, Kind.INDEX}
            for handle in [h for h in self._known if h.kind in kinds]:
                del self._known[handle]
            self._known.update(found)
            self._listed.add(directory)
