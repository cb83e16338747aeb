"""Writing an object through an encrypted backend whose name is known only at the end (a
blob, a pack): segments are sealed as they fill, the last one, which binds the name, at
``commit`` (``sealing``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from snapstore.backend.sealing import SEGMENT_BYTES, ObjectCipher
from snapstore.backend.seam import Kind, StagedObject
from snapstore.errors import ConcurrentWriteError, CorruptBlobError
from snapstore.format.hashing import new_hasher


def holds_blob(chunks: Callable[[], Iterable[bytes]], name: str) -> bool:
    """True if the blob ``chunks`` reads (through the encrypting layer) opens and hashes to
    its name ``name``: another writer stored the same file, sealed under another salt."""
    hasher = new_hasher()
    try:
        for chunk in chunks():
            hasher.update(chunk)
    except (OSError, CorruptBlobError):
        return False
    return bool(hasher.hexdigest() == name)


class SealedStage:
    """An object of ``kind`` being written through an encrypted backend: full segments are
    sealed as they fill, the last one (which binds the object's name) at ``commit``."""

    def __init__(
        self,
        cipher: ObjectCipher,
        kind: Kind,
        inner: StagedObject,
        stored_name: Callable[[str], str],
        already_there: Callable[[str], bool],
    ) -> None:
        self.cipher = cipher
        self.stored_name = stored_name
        self.already_there = already_there
        self.kind = kind
        self.inner = inner
        self.size = 0
        self._start()

    def _start(self) -> None:
        header, self._prefix = self.cipher.header()
        self.inner.write(header)
        self._number = 0
        self._pending = b""
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        pending = self._pending + bytes(data)
        full = len(pending) // SEGMENT_BYTES
        cipher, kind = self.cipher, self.kind.value
        for index in range(full):
            piece = pending[index * SEGMENT_BYTES : (index + 1) * SEGMENT_BYTES]
            self.inner.write(
                cipher.seal_segment(self._prefix, self._number, piece, kind, "", final=False)
            )
            self._number += 1
        self._pending = pending[full * SEGMENT_BYTES :]

    def restart(self) -> None:
        self.inner.restart()
        self._start()

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        last = self.cipher.seal_segment(
            self._prefix, self._number, self._pending, self.kind.value, name, final=True
        )
        self.inner.write(last)
        try:
            self.inner.commit(self.stored_name(name), name_durable=name_durable)
        except ConcurrentWriteError:
            if self.kind is Kind.BLOB and self.already_there(name):
                return
            raise

    def abort(self) -> None:
        self.inner.abort()
