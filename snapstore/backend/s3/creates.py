"""Creating the immutable objects of the bucket (blobs, packs, indexes): create-only
(``If-None-Match: *``), and after a create is refused, telling whether the object there is
this very write (an attempt whose answer was lost, ``BucketObjects.written_by``), the same
object stored by another writer (counting on it is safe), or another object
(ConcurrentWriteError). What was created is remembered in the listing memo.
"""

from __future__ import annotations

import errno
import time
from typing import IO

from snapstore.backend.s3.client import new_nonce
from snapstore.backend.s3.listing import ListingMemo
from snapstore.backend.s3.objects import BucketObjects
from snapstore.backend.s3.upload import create_only
from snapstore.backend.seam import Handle, Kind, ObjectInfo
from snapstore.errors import ConcurrentWriteError
from snapstore.format.hashing import CHUNK_BYTES, new_hasher


class ImmutableCreates:
    """Create-only writes of one store's immutable objects."""

    def __init__(self, objects: BucketObjects, memo: ListingMemo) -> None:
        self.objects = objects
        self.memo = memo

    def write(self, handle: Handle, data: bytes) -> None:
        """Create ``handle`` holding ``data`` in one PUT, unless it is there already."""
        nonce = new_nonce()
        try:
            etag = self.objects.put(handle, data, nonce, IfNoneMatch="*")
        except (ConcurrentWriteError, FileNotFoundError):
            self._created(handle, nonce, len(data), data)
            return
        self._remember(handle, len(data), etag)

    def upload(self, handle: Handle, file: IO[bytes], size: int) -> None:
        """Create ``handle`` from ``file`` (``size`` bytes, in parts if large); a failed
        upload leaves nothing visible."""
        nonce = new_nonce()
        try:
            etag = create_only(self.objects, handle, file, size, nonce)
        except (ConcurrentWriteError, FileNotFoundError):
            self._created(handle, nonce, size, None)
            return
        self._remember(handle, size, etag)

    def _remember(self, handle: Handle, size: int, etag: str) -> None:
        """Remember the object just created (its version from the PUT's answer; written now
        by this host's clock, which only orders manifests and none is remembered here)."""
        self.memo.remember(handle, ObjectInfo(size, etag, time.time_ns()))

    def _created(self, handle: Handle, nonce: str, size: int, data: bytes | None) -> None:
        """After a create refused with 412 (or a multipart upload gone at its completion):
        done if the object there is this write, applied by an attempt whose answer was lost,
        or the same object written by another writer; ConcurrentWriteError otherwise."""
        mine = self.objects.written_by(handle, nonce)
        if mine is not None:
            self.memo.remember(handle, mine)
            return
        if not self._is_same_object(handle, size, data):
            raise ConcurrentWriteError(
                errno.EEXIST, f"{self.objects.describe(handle)} exists and holds other bytes"
            )

    def _is_same_object(self, handle: Handle, size: int, data: bytes | None) -> bool:
        """After a refused create of an immutable object that is not this write's: True if
        the object there holds what we meant to write, so that counting on it is safe. A blob
        (named by its digest, perhaps stored by another writer) is read back and hashed; an
        index is compared byte for byte; a pack's name is random, so another object there is
        never ours."""
        try:
            info = self.memo.known(handle) or self.objects.head(handle)
        except FileNotFoundError:
            return False
        if info.size != size or handle.kind is Kind.PACK:
            return False
        if handle.kind is Kind.BLOB:
            hasher = new_hasher(size)
            for chunk in self.objects.stream(handle, CHUNK_BYTES):
                hasher.update(chunk)
            return hasher.hexdigest() == handle.name
        if data is None:
            return False
        found, _ = self.objects.body(handle, max_bytes=size)
        return found == data
