"""A stand-in for the store that ``gc --dry-run`` writes its rewritten packs to: it keeps
nothing but counts the bytes, so a dry run compresses and lays out the new packs exactly as
gc would and reports the same packs written and bytes freed, without writing anything."""

from __future__ import annotations

from snapstore.backend.seam import Handle
from snapstore.format.packfile import PackIndex
from snapstore.repo.blobs import Blobs


class _CountedObject:
    """A staged object whose bytes are counted and dropped."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self.size += len(data)

    def restart(self) -> None:
        self.size = 0

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        pass

    def abort(self) -> None:
        pass


class _CountingBackend:
    """The part of a backend a pack writer uses: objects staged and written are dropped."""

    def stage(self, kind: object, size_hint: int | None = None) -> _CountedObject:
        return _CountedObject()

    def write(self, handle: Handle, data: bytes | memoryview, **options: object) -> None:
        pass

    def stat(self, handle: Handle) -> object:
        raise FileNotFoundError(str(handle))

    def describe(self, handle: Handle) -> str:
        return f"dry run ({handle.kind.value} {handle.name})"


class _UnregisteredPacks:
    def register(self, index: PackIndex) -> None:
        pass


class MeasuringBlobs:
    """What ``PackSeries`` needs of ``Blobs`` (a backend to stage packs in, packs to register
    them with), writing nowhere; ``storage`` is the real store, read from."""

    def __init__(self, storage: Blobs) -> None:
        self.storage = storage
        self.backend = _CountingBackend()
        self.packs = _UnregisteredPacks()
