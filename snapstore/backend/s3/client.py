"""The S3 client of the object storage backend: store URLs, the client, and errors.

The client is boto3's, configured the way AWS tools are: the standard credential chain
(environment, shared config and credentials files, SSO, instance and container roles) and the
standard environment (``AWS_PROFILE``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for other
providers such as MinIO, R2 or Ceph). Retries use botocore's "standard" mode (server errors,
throttling, timeouts and dropped connections are retried with backoff); what still fails after
them is raised as a typed error here, never swallowed.
"""

from __future__ import annotations

import errno
import os
import uuid
from dataclasses import dataclass
from typing import Any

from snapstore.backend.s3.url import SCHEME as SCHEME
from snapstore.backend.s3.url import is_store_url as is_store_url
from snapstore.errors import ConcurrentWriteError, ObjectStoreError

MAX_ATTEMPTS = 5
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
POOL_CONNECTIONS = 32

_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_PRECONDITION = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_DENIED = {"AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId"}


@dataclass(frozen=True)
class StoreUrl:
    """Where a store lives: a bucket and a key prefix (empty, or ending in ``/``)."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}"


def parse_url(url: str) -> StoreUrl:
    """The bucket and prefix of ``s3://bucket[/prefix]``; ValueError for anything else."""
    if not is_store_url(url):
        raise ValueError(f"not an s3:// URL: {url!r}")
    bucket, _, prefix = url[len(SCHEME) :].partition("/")
    prefix = prefix.strip("/")
    if not bucket or "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        raise ValueError(f"an s3:// URL needs a bucket and a clean prefix, got {url!r}")
    return StoreUrl(bucket, prefix + "/" if prefix else "")


def make_client(*, endpoint_url: str | None = None, timeout: float | None = None) -> Any:
    """An S3 client from the standard AWS configuration (``endpoint_url`` overrides
    ``AWS_ENDPOINT_URL``). ImportError names the extra to install when boto3 is missing."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "an s3:// store needs the s3 extra: pip install 'snapstore[s3]'"
        ) from error
    config = Config(
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        connect_timeout=timeout or CONNECT_TIMEOUT,
        read_timeout=timeout or READ_TIMEOUT,
        max_pool_connections=POOL_CONNECTIONS,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session()
    endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or None
    return session.client("s3", endpoint_url=endpoint, config=config)


def error_code(error: BaseException) -> str | None:
    """The S3 error code (or HTTP status) of a client error, None for any other error."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    if code:
        return str(code)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None if status is None else str(status)


def is_not_found(error: BaseException) -> bool:
    """True for a missing object (or a missing range of one)."""
    return error_code(error) in _NOT_FOUND


def is_precondition_failed(error: BaseException) -> bool:
    """True for a refused conditional write (``If-Match``/``If-None-Match``)."""
    return error_code(error) in _PRECONDITION


def new_nonce() -> str:
    """A nonce for one write: unique across hosts, processes and writes."""
    return uuid.uuid4().hex


def is_no_such_upload(error: BaseException) -> bool:
    """True for a multipart upload that is gone (completed or aborted)."""
    return error_code(error) == "NoSuchUpload"


def was_retried(error: BaseException) -> bool:
    """True if the client sent the request more than once before this answer: an earlier
    attempt failed in a way (a 5xx, throttling, a timeout, a dropped connection) that leaves
    open whether the server applied it."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return False
    return bool(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


def translate(error: BaseException, where: str) -> OSError:
    """The OSError a failed request means: FileNotFoundError, PermissionError,
    ConcurrentWriteError, or ObjectStoreError for what failed after its retries."""
    code = error_code(error)
    if code in _NOT_FOUND:
        return FileNotFoundError(errno.ENOENT, "no such object", where)
    if code in _PRECONDITION:
        return ConcurrentWriteError(
            errno.EAGAIN, f"{where} was changed by another writer since it was read"
        )
    if code in _DENIED:
        return PermissionError(errno.EACCES, f"access denied ({code})", where)
    if code == "NoSuchBucket":
        return FileNotFoundError(errno.ENOENT, "no such bucket", where)
    detail = f"{code}: {error}" if code else f"{type(error).__name__}: {error}"
    return ObjectStoreError(errno.EIO, f"request failed for {where} ({detail})")


def client_errors() -> tuple[type[BaseException], ...]:
    """The exception types a request can raise (client errors and transport failures)."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (ClientError, BotoCoreError)


def http_time_ns(value: str | None) -> int | None:
    """An HTTP date (``Date``, ``Last-Modified``) in nanoseconds since the epoch."""
    import calendar  # here: local stores never pay for email's imports
    import email.utils

    if not value:
        return None
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    seconds = calendar.timegm(parsed[:6]) - (parsed[9] or 0)
    return seconds * 1_000_000_000


def server_now_ns(response: dict[str, Any]) -> int | None:
    """The server's clock when it answered (its ``Date`` header), if it said."""
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return http_time_ns(headers.get("date"))


def datetime_ns(value: Any) -> int:
    """A ``datetime`` from the client (``LastModified``) in nanoseconds since the epoch."""
    return int(value.timestamp() * 1_000_000) * 1000
