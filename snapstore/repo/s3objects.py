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

from snapstore.fs.reading import UnfitFileError
from snapstore.logs import get_logger
from snapstore.repo.backend import Handle, Kind, ObjectInfo
from snapstore.repo.s3client import StoreUrl, client_errors, datetime_ns, error_code, translate
from snapstore.repo.s3lease import UNSUPPORTED, Leases

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
        raise ValueError(f"{kind} objects are kept on this host, not in the bucket")

    def describe(self, handle: Handle) -> str:
        """Where the object is, for messages: its URL (the store's, for the marker)."""
        if handle.kind is Kind.MARKER:
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

    def get(self, handle: Handle, byte_range: str | None = None) -> dict[str, Any]:
        """A GET response (its body still to be read); empty for a range past the end,
        FileNotFoundError if missing."""
        extra = {} if byte_range is None else {"Range": byte_range}
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

    def list(self, key_prefix: str) -> Iterator[tuple[str, ObjectInfo]]:
        """Every key under ``key_prefix`` with its info, one request per 1,000 keys."""
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=key_prefix):
                for item in page.get("Contents", []):
                    info = ObjectInfo(
                        int(item["Size"]), str(item["ETag"]), datetime_ns(item["LastModified"])
                    )
                    yield str(item["Key"]), info
        except client_errors() as error:
            raise self.failed(error, f"s3://{self.bucket}/{key_prefix}") from None

    # ------------------------------------------------------------------ writing

    def put(self, handle: Handle, body: bytes | IO[bytes], **conditions: str) -> str:
        """One PUT of a whole object under the given conditions; its new version."""
        self.leases.check()
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=self.key(handle), Body=body, **conditions
            )
        except client_errors() as error:
            raise self.failed(error, handle) from None
        return str(response["ETag"])

    def delete(self, handle: Handle, **conditions: str) -> bool:
        """Delete the object under the given conditions; False, deleting nothing, if the
        provider does not support conditional deletes."""
        self.leases.check()
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key(handle), **conditions)
        except client_errors() as error:
            if conditions and error_code(error) in UNSUPPORTED:
                return False
            raise self.failed(error, handle) from None
        return True
