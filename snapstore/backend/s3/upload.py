"""Uploads of immutable objects to the bucket: staged on this host until their name is known,
then created create-only (``If-None-Match: *``) in one PUT, or in parts from
``MULTIPART_BYTES``. A failed or interrupted upload is never visible: a single PUT is atomic,
and a multipart upload is invisible until completed and aborted on failure (gc aborts what a
killed process left behind, ``pending_uploads``).
"""

from __future__ import annotations

import contextlib
import errno
import tempfile
from collections.abc import Callable
from typing import IO

from snapstore.backend.s3.client import (
    client_errors,
    is_no_such_upload,
    is_not_found,
)
from snapstore.backend.s3.objects import WRITE_KEY, BucketObjects
from snapstore.backend.seam import Handle, Kind

SPOOL_BYTES = 8 << 20
"""A staged object is kept in memory up to this size, then in a temp file of the host cache."""
MULTIPART_BYTES = 64 << 20
"""Objects of this size and more go up in parts."""
PART_BYTES = 16 << 20
MAX_PARTS = 10_000


class StagedUpload:
    """An object staged in memory (spilling to a temp file in ``tmp_dir``), handed to
    ``upload`` at ``commit`` (see ``backend.StagedObject``)."""

    def __init__(
        self, upload: Callable[[Handle, IO[bytes], int], None], kind: Kind, tmp_dir: str
    ) -> None:
        self._upload = upload
        self._kind = kind
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            max_size=SPOOL_BYTES, dir=tmp_dir
        )
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._file.write(data)
        self.size += len(data)

    def restart(self) -> None:
        self._file.seek(0)
        self._file.truncate()
        self.size = 0

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        try:
            self._file.seek(0)
            self._upload(Handle(self._kind, name), self._file, self.size)
        finally:
            self.abort()

    def abort(self) -> None:
        self._file.close()


def create_only(
    objects: BucketObjects, handle: Handle, file: IO[bytes], size: int, nonce: str
) -> str:
    """Create ``handle`` from ``file`` (``size`` bytes), carrying ``nonce`` in its metadata,
    unless an object is there (ConcurrentWriteError then; FileNotFoundError if a multipart
    upload was gone at its completion: either way the object there may be this very write,
    applied by an attempt whose answer was lost, see ``BucketObjects.written_by``); its
    version."""
    if size >= MULTIPART_BYTES:
        return _multipart(objects, handle, file, size, nonce)
    return objects.put(handle, file.read(), nonce, IfNoneMatch="*")


def _multipart(
    objects: BucketObjects, handle: Handle, file: IO[bytes], size: int, nonce: str
) -> str:
    """A large object in parts; invisible until the create-only completion, aborted on
    any failure (an abort that fails leaves an invisible upload that gc removes)."""
    client, bucket, key = objects.client, objects.bucket, objects.key(handle)
    part_bytes = max(PART_BYTES, -(-size // MAX_PARTS))
    objects.leases.check()
    try:
        upload_id = client.create_multipart_upload(
            Bucket=bucket, Key=key, Metadata={WRITE_KEY: nonce}
        )["UploadId"]
    except client_errors() as error:
        raise objects.failed(error, handle) from None
    try:
        parts = []
        number = 1
        while chunk := file.read(part_bytes):
            objects.leases.check()
            response = client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk
            )
            parts.append({"PartNumber": number, "ETag": response["ETag"]})
            number += 1
        objects.leases.check()
        done = client.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
            IfNoneMatch="*",
        )
        return str(done["ETag"])
    except BaseException as error:
        with contextlib.suppress(Exception):
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        if isinstance(error, client_errors()) and is_no_such_upload(error):
            where = objects.describe(handle)
            raise FileNotFoundError(errno.ENOENT, "the multipart upload is gone", where) from None
        if isinstance(error, client_errors()):
            raise objects.failed(error, handle) from None
        raise


UPLOADED_IN_PARTS = ("blobs/", "packs/")
"""Where, under a store's prefix, objects large enough to go up in parts live: the only
places its gc looks for abandoned uploads (a prefix may hold other stores and other data)."""


def pending_uploads(objects: BucketObjects) -> list[tuple[str, str]]:
    """(key, upload id) of the multipart uploads in progress in the store's own blob and
    pack directories."""
    found: list[tuple[str, str]] = []
    paginator = objects.client.get_paginator("list_multipart_uploads")
    for directory in UPLOADED_IN_PARTS:
        prefix = objects.prefix + directory
        try:
            for page in paginator.paginate(Bucket=objects.bucket, Prefix=prefix):
                found.extend((str(u["Key"]), str(u["UploadId"])) for u in page.get("Uploads", []))
        except client_errors() as error:
            if is_not_found(error):
                return []
            raise objects.failed(error, f"s3://{objects.bucket}/{prefix}") from None
    return found


def abort_upload(objects: BucketObjects, key: str, upload_id: str) -> bool:
    """Abort one multipart upload, so its parts are gone; False if it was gone already
    (an earlier attempt of this abort, whose answer was lost, or its writer finished it)."""
    try:
        objects.client.abort_multipart_upload(Bucket=objects.bucket, Key=key, UploadId=upload_id)
    except client_errors() as error:
        if is_no_such_upload(error) or is_not_found(error):
            return False
        raise objects.failed(error, f"s3://{objects.bucket}/{key}") from None
    return True
