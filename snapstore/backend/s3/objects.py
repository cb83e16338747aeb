"""The requests of the object storage backend: one store's objects in its bucket, each
operation one request (or a few, for a body re-read after a dropped connection), with S3's
errors translated into the OSErrors the backend seam speaks (``s3client.translate``).

What to keep on this host instead, what to remember of listings, and which conditions a
write carries are ``s3.S3Backend``'s decisions; every write made here first checks that the
leases held by this process are still good (LeaseLostError otherwise).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import IO, Any

from snapstore.backend.names import check_name
from snapstore.backend.s3.client import (
    StoreUrl,
    client_errors,
    datetime_ns,
    error_code,
    is_not_found,
    server_now_ns,
    translate,
    was_retried,
)
from snapstore.backend.s3.lease import Leases
from snapstore.backend.s3.leaseobjects import UNSUPPORTED
from snapstore.backend.seam import Handle, Kind, ObjectInfo
from snapstore.fs.reading import UnfitFileError
from snapstore.logs import get_logger

WRITE_KEY = "write"
"""The metadata entry (``x-amz-meta-write``) holding the nonce of the write that made an
object: how a write whose answer was lost recognises, when its retry is refused, that it
was applied."""

LIST_PAGE_KEYS = 1000
"""Keys asked for per listing request (S3's most)."""

READ_ATTEMPTS = 3
"""Reads of a body whose connection dropped, before the failure is raised."""

logger = get_logger(__name__)


class BucketObjects:
    """The objects of the store at ``url``: their keys, and the requests on them."""

    def __init__(self, client: Any, url: StoreUrl, leases: Leases) -> None:
        self.client = client
        self.url = url
        self.bucket, self.prefix = url.bucket, url.prefix
        self.leases = leases

    def key(self, handle: Handle) -> str:
        """The object key of a handle (kinds kept in the bucket only)."""
        check_name(handle)
        kind, name = handle.kind, handle.name
        if kind is Kind.MARKER:
            return self.prefix + "FORMAT"
        if kind is Kind.BLOB:
            return f"{self.prefix}blobs/{name}"
        if kind is Kind.PACK:
            return f"{self.prefix}packs/{name}.pack"
        if kind is Kind.INDEX:
            return f"{self.prefix}packs/{name}.idx"
        if kind is Kind.MANIFEST:
            return f"{self.prefix}sessions/{name}"
        if kind is Kind.KEY:
            return f"{self.prefix}keys/{name}"
        raise ValueError(f"{kind} objects are kept on this host, not in the bucket")

    def describe(self, handle: Handle) -> str:
        """Where the object is, for messages: its URL (the store's, for the marker)."""
        if handle.kind is Kind.MARKER:
            check_name(handle)
            return str(self.url)
        return f"s3://{self.bucket}/{self.key(handle)}"

    def failed(self, error: BaseException, where: Handle | str) -> OSError:
        """The OSError a failed request on ``where`` (an object, or a URL) means."""
        return translate(error, where if isinstance(where, str) else self.describe(where))

    @staticmethod
    def info(response: dict[str, Any], size: int) -> ObjectInfo:
        """The info of an object of ``size`` bytes from the response that returned it."""
        return ObjectInfo(size, str(response["ETag"]), datetime_ns(response["LastModified"]))

    # ------------------------------------------------------------------ reading

    def head(self, handle: Handle) -> ObjectInfo:
        """The object's size, version and write time; FileNotFoundError if missing."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self.key(handle))
        except client_errors() as error:
            raise self.failed(error, handle) from None
        return self.info(response, int(response["ContentLength"]))

    def get(
        self, handle: Handle, byte_range: str | None = None, version: str | None = None
    ) -> dict[str, Any]:
        """A GET response (its body still to be read); empty for a range past the end,
        FileNotFoundError if missing (ConcurrentWriteError if not in ``version``)."""
        extra = {} if byte_range is None else {"Range": byte_range}
        if version is not None:
            extra["IfMatch"] = version
        try:
            response: dict[str, Any] = self.client.get_object(
                Bucket=self.bucket, Key=self.key(handle), **extra
            )
        except client_errors() as error:
            if error_code(error) == "InvalidRange":
                return {}
            raise self.failed(error, handle) from None
        return response

    def body(
        self, handle: Handle, byte_range: str | None = None, *, max_bytes: int | None = None
    ) -> tuple[bytes, dict[str, Any]]:
        """A whole response body, fetched again if the connection drops while it is read;
        UnfitFileError, reading nothing, if the response is over ``max_bytes``."""
        for attempt in range(READ_ATTEMPTS):
            response = self.get(handle, byte_range)
            if not response:
                return b"", response
            if max_bytes is not None and int(response["ContentLength"]) > max_bytes:
                response["Body"].close()
                raise UnfitFileError(errno.EFBIG, f"{self.describe(handle)} is over {max_bytes}")
            try:
                return response["Body"].read(), response
            except Exception as error:  # a dropped connection surfaces as any of several types
                if attempt == READ_ATTEMPTS - 1:
                    raise self.failed(error, handle) from None
                logger.warning("reading %s failed, retrying: %s", self.describe(handle), error)
        raise AssertionError("unreachable")

    def stream(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        """The object's bytes in chunks of at most ``chunk_bytes``; a connection dropped
        part-way is taken up again where it broke (a ranged GET of the same version), up to
        ``READ_ATTEMPTS`` times."""
        response = self.get(handle)
        if not response:
            return
        version = str(response["ETag"])
        done = 0
        for attempt in range(READ_ATTEMPTS):
            try:
                for chunk in response["Body"].iter_chunks(chunk_bytes):
                    done += len(chunk)
                    yield chunk
                return
            except Exception as error:  # a dropped connection surfaces as any of several types
                if attempt == READ_ATTEMPTS - 1:
                    raise self.failed(error, handle) from None
                logger.warning("reading %s failed, resuming: %s", self.describe(handle), error)
            finally:
                response["Body"].close()
            response = self.get(handle, f"bytes={done}-", version)
            if not response:
                return

    def server_now_ns(self) -> int | None:
        """The server's clock now (the ``Date`` of a HEAD of the format marker), if it says."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self.prefix + "FORMAT")
        except client_errors() as error:
            response = getattr(error, "response", None) or {}
        return server_now_ns(response)

    def list(self, key_prefix: str) -> Iterator[tuple[str, ObjectInfo]]:
        """Every key under ``key_prefix`` with its info, in order, one request per
        ``LIST_PAGE_KEYS`` keys."""
        paginator = self.client.get_paginator("list_objects_v2")
        pages = {"PageSize": LIST_PAGE_KEYS}
        try:
            for page in paginator.paginate(
                Bucket=self.bucket, Prefix=key_prefix, PaginationConfig=pages
            ):
                for item in page.get("Contents", []):
                    info = ObjectInfo(
                        int(item["Size"]), str(item["ETag"]), datetime_ns(item["LastModified"])
                    )
                    yield str(item["Key"]), info
        except client_errors() as error:
            raise self.failed(error, f"s3://{self.bucket}/{key_prefix}") from None

    # ------------------------------------------------------------------ writing

    def put(
        self, handle: Handle, body: bytes | IO[bytes], nonce: str | None = None, **conditions: str
    ) -> str:
        """One PUT of a whole object under the given conditions, carrying ``nonce`` in its
        metadata (see ``written_by``); its new version."""
        self.leases.check()
        extra = {} if nonce is None else {"Metadata": {WRITE_KEY: nonce}}
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=self.key(handle), Body=body, **extra, **conditions
            )
        except client_errors() as error:
            raise self.failed(error, handle) from None
        return str(response["ETag"])

    def written_by(self, handle: Handle, nonce: str) -> ObjectInfo | None:
        """The object's info if the write carrying ``nonce`` made the version there now
        (a write refused on retry, whose first attempt was applied), else None."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self.key(handle))
        except client_errors() as error:
            if is_not_found(error):
                return None
            raise self.failed(error, handle) from None
        if response.get("Metadata", {}).get(WRITE_KEY) != nonce:
            return None
        return self.info(response, int(response["ContentLength"]))

    def delete(self, handle: Handle, **conditions: str) -> bool:
        """Delete the object under the given conditions; False, deleting nothing, if the
        provider does not support conditional deletes.

        A conditional delete the client had to send again and that is then answered 404 was
        applied by an earlier attempt: the version it names was there when the caller read
        it, under its session's lease, and no other writer deletes that session's manifests
        while it is held. So it counts as done (S3 answers a plain delete of a missing key
        with success anyway)."""
        self.leases.check()
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key(handle), **conditions)
        except client_errors() as error:
            if conditions and error_code(error) in UNSUPPORTED:
                return False
            if conditions and is_not_found(error) and was_retried(error):
                logger.info("%s: deleted by an earlier attempt", self.describe(handle))
                return True
            raise self.failed(error, handle) from None
        return True
