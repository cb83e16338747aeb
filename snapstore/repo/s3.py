"""The object storage backend: a store in an S3-compatible bucket, shared by several hosts.

Layout under the store's prefix (the same names as the local layout, docs/format.md):
``FORMAT``, ``blobs/<digest>``, ``packs/<id>.pack`` and ``packs/<id>.idx``,
``sessions/<session-dir>/<name-dir>`` (manifests), and ``locks/<name>/...`` (leases,
``s3lease``). What is about this host only stays on this host, in a local directory (the
*host cache*, a ``LocalBackend``): restore journals and target locks (they describe this
host's files; another host must never roll back a restore it did not make), and the caches
(stat cache, header cache, pack indexes already read).

Every object but a manifest is written once, create-only (``If-None-Match: *``), and a failed
or interrupted upload is never visible (a single PUT is atomic; a multipart upload is
invisible until completed, and aborted on failure). A manifest is committed by one
conditional write of the version just read (``If-Match``, or ``If-None-Match: *`` for a new
one), and deleted the same way: a writer that lost a race gets ConcurrentWriteError, never a
silent overwrite. Every write first checks that the leases held by this process are still
good (LeaseLostError otherwise). See docs/object-storage.md.

Listings are cheap here and per-object requests are not, so the backend answers ``stat`` of
immutable objects (blobs, packs, indexes) from the listings it made since this process last
took the gc lock (the only lock under which objects disappear), and ``infos`` gives a whole
listing's sizes and versions in one request.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from snapstore.errors import ConcurrentWriteError, FormatError, StoreNotFoundError
from snapstore.fs.reading import UnfitFileError
from snapstore.logs import get_logger
from snapstore.repo.backend import Handle, Kind, ObjectInfo, Properties
from snapstore.repo.layout import FORMAT_TEXT, MARKER_MAX_BYTES, check_format
from snapstore.repo.local import LocalBackend
from snapstore.repo.s3client import (
    StoreUrl,
    client_errors,
    datetime_ns,
    error_code,
    is_not_found,
    make_client,
    parse_url,
    translate,
)
from snapstore.repo.s3lease import DEFAULT_LEASE, UNSUPPORTED, Leases, NoLock, S3Lock

SPOOL_BYTES = 8 << 20
"""A staged object is kept in memory up to this size, then in a temp file of the host cache."""
MULTIPART_BYTES = 64 << 20
PART_BYTES = 16 << 20
MAX_PARTS = 10_000
READ_ATTEMPTS = 3
PARALLEL_READS = 8
_LOCAL_KINDS = {Kind.JOURNAL, Kind.CACHE}
_IMMUTABLE = {Kind.BLOB, Kind.PACK, Kind.INDEX}
_REMOTE_LOCKS = {"gc", "namespace"}
_INDEX_CACHE = "s3-indexes/"

logger = get_logger(__name__)


def default_cache_dir(url: StoreUrl, endpoint: str | None) -> str:
    """This host's cache directory for the store at ``url`` (``SNAPSTORE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/snapstore/s3``, else ``~/.cache/snapstore/s3``), one per store."""
    base = os.environ.get("SNAPSTORE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "snapstore",
        "s3",
    )
    digest = hashlib.sha256(f"{endpoint or ''}|{url}".encode()).hexdigest()[:24]
    return os.path.join(base, digest)


class _StagedUpload:
    """An object staged in memory (spilling to a temp file), uploaded create-only at
    ``commit`` (see ``StagedObject``)."""

    def __init__(self, backend: S3Backend, kind: Kind) -> None:
        self._backend = backend
        self._kind = kind
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            max_size=SPOOL_BYTES, dir=backend.local.tmp_dir
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
            self._backend.upload(Handle(self._kind, name), self._file, self.size)
        finally:
            self.abort()

    def abort(self) -> None:
        self._file.close()


class S3Backend:
    """A store at ``url`` (``s3://bucket/prefix``); see the module docstring.

    ``cache_dir``: this host's directory for journals, target locks and caches (default:
    ``default_cache_dir``). ``lease``: seconds a lock held by a process that stopped
    renewing it (killed, frozen, cut off) keeps others out. ``client``: an S3 client (default:
    one from the standard AWS configuration, ``make_client``).
    """

    def __init__(
        self,
        url: str,
        *,
        cache_dir: str | None = None,
        lock_timeout: float = 30.0,
        lease: float = DEFAULT_LEASE,
        client: Any = None,
        endpoint_url: str | None = None,
    ) -> None:
        self.url = parse_url(url)
        self.bucket, self.prefix = self.url.bucket, self.url.prefix
        self.client = client if client is not None else make_client(endpoint_url=endpoint_url)
        endpoint = str(getattr(self.client.meta, "endpoint_url", "") or "")
        self.local = LocalBackend(
            cache_dir or default_cache_dir(self.url, endpoint), lock_timeout=lock_timeout
        )
        self.lock_timeout = lock_timeout
        self.properties = Properties(durable=True, local_root=None, parallel_reads=PARALLEL_READS)
        self.leases = Leases(
            self.client, self.bucket, self.prefix, lease=lease, on_acquire=self._on_acquire
        )
        self._mutex = threading.Lock()
        self._known: dict[Handle, ObjectInfo] = {}
        self._conditional_deletes = True
        self._listed: set[str] = set()

    # ------------------------------------------------------------------ layout

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
        if handle.kind in _LOCAL_KINDS:
            return self.local.describe(handle)
        if handle.kind is Kind.MARKER:
            return str(self.url)
        return f"s3://{self.bucket}/{self.key(handle)}"

    def _failed(self, error: BaseException, handle: Handle | str) -> OSError:
        where = handle if isinstance(handle, str) else self.describe(handle)
        return translate(error, where)

    # ------------------------------------------------------------------ opening

    def open(self, *, create: bool) -> bool:
        """Check the format marker (creating the store if it has none, with ``create``) and
        prepare this host's cache directory."""
        self.local.open(create=True)
        marker = Handle(Kind.MARKER, "")
        try:
            data, _ = self.read(marker, max_bytes=MARKER_MAX_BYTES)
        except FileNotFoundError:
            if not create:
                raise StoreNotFoundError(f"no store at {self.url}") from None
            try:
                self._put(marker, FORMAT_TEXT.encode(), IfNoneMatch="*")
                logger.info("created a new store at %s", self.url)
                return True
            except ConcurrentWriteError:
                data, _ = self.read(marker, max_bytes=MARKER_MAX_BYTES)
        except UnfitFileError:
            raise FormatError(f"{self.describe(marker)} is not a snapstore format marker") from None
        check_format(str(self.url).rstrip("/"), data.decode("utf-8", "replace"))
        return True

    # ------------------------------------------------------------------ the listing memo

    def _on_acquire(self, lock_name: str) -> None:
        """After taking the gc lock, forget what earlier listings said: objects may have gone
        while it was not held."""
        if lock_name == "gc":
            with self._mutex:
                self._known.clear()
                self._listed.clear()

    def _remember(self, handle: Handle, info: ObjectInfo | None) -> None:
        if handle.kind not in _IMMUTABLE:
            return
        with self._mutex:
            if info is None:
                self._known.pop(handle, None)
            else:
                self._known[handle] = info

    def _list(self, key_prefix: str) -> Iterator[tuple[str, ObjectInfo]]:
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
            raise self._failed(error, f"s3://{self.bucket}/{key_prefix}") from None

    def _list_immutable(self, kind: Kind) -> None:
        """List ``blobs/`` or ``packs/`` once since the gc lock was last taken."""
        directory = "blobs/" if kind is Kind.BLOB else "packs/"
        with self._mutex:
            if directory in self._listed:
                return
        found: dict[Handle, ObjectInfo] = {}
        base = self.prefix + directory
        for key, info in self._list(base):
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

    def infos(self, kind: Kind, prefix: str = "") -> dict[str, ObjectInfo | None]:
        """The objects of ``kind`` now (starting with ``prefix``), with their info."""
        if kind in _LOCAL_KINDS:
            return self.local.infos(kind, prefix)
        if kind in _IMMUTABLE:
            self._list_immutable(kind)
            with self._mutex:
                found: dict[str, ObjectInfo | None] = {
                    h.name: info
                    for h, info in self._known.items()
                    if h.kind is kind and h.name.startswith(prefix)
                }
            return found
        if kind is Kind.MANIFEST:
            base = self.prefix + "sessions/"
            return {key[len(base) :]: info for key, info in self._list(base + prefix)}
        return {}

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        if kind in _LOCAL_KINDS:
            return self.local.names(kind, prefix)
        return sorted(self.infos(kind, prefix))

    # ------------------------------------------------------------------ reading

    def stat(self, handle: Handle) -> ObjectInfo:
        if handle.kind in _LOCAL_KINDS:
            return self.local.stat(handle)
        with self._mutex:
            known = self._known.get(handle)
        if known is not None:
            return known
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self.key(handle))
        except client_errors() as error:
            raise self._failed(error, handle) from None
        info = ObjectInfo(
            int(response["ContentLength"]),
            str(response["ETag"]),
            datetime_ns(response["LastModified"]),
        )
        self._remember(handle, info)
        return info

    def _get(self, handle: Handle, byte_range: str | None = None) -> dict[str, Any]:
        """A GET response (its body still to be read); FileNotFoundError if missing."""
        extra = {} if byte_range is None else {"Range": byte_range}
        try:
            response: dict[str, Any] = self.client.get_object(
                Bucket=self.bucket, Key=self.key(handle), **extra
            )
        except client_errors() as error:
            if error_code(error) == "InvalidRange":
                return {}
            raise self._failed(error, handle) from None
        return response

    def _body(self, handle: Handle, byte_range: str | None = None) -> tuple[bytes, dict[str, Any]]:
        """A whole response body, fetched again if the connection drops while it is read."""
        for attempt in range(READ_ATTEMPTS):
            response = self._get(handle, byte_range)
            if not response:
                return b"", response
            try:
                return response["Body"].read(), response
            except Exception as error:  # a dropped connection surfaces as any of several types
                if attempt == READ_ATTEMPTS - 1:
                    raise self._failed(error, handle) from None
                logger.warning("reading %s failed, retrying: %s", self.describe(handle), error)
        raise AssertionError("unreachable")

    @staticmethod
    def _info(response: dict[str, Any], size: int) -> ObjectInfo:
        return ObjectInfo(size, str(response["ETag"]), datetime_ns(response["LastModified"]))

    def read(self, handle: Handle, *, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        if handle.kind in _LOCAL_KINDS:
            return self.local.read(handle, max_bytes=max_bytes)
        if handle.kind is Kind.INDEX:
            return self._read_index(handle, max_bytes)
        for attempt in range(READ_ATTEMPTS):
            response = self._get(handle)
            if not response:
                raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(handle))
            size = int(response["ContentLength"])
            if size > max_bytes:
                response["Body"].close()
                raise UnfitFileError(errno.EFBIG, f"{self.describe(handle)} is over {max_bytes}")
            try:
                data = response["Body"].read()
            except Exception as error:  # a dropped connection surfaces as any of several types
                if attempt == READ_ATTEMPTS - 1:
                    raise self._failed(error, handle) from None
                continue
            return data, self._info(response, size)
        raise AssertionError("unreachable")

    def _read_index(self, handle: Handle, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        """A pack index, from this host's cache when it was read before (an index is written
        once and never changed, so a copy of the size the bucket lists is the same bytes)."""
        info = self.stat(handle)
        if info.size > max_bytes:
            raise UnfitFileError(errno.EFBIG, f"{self.describe(handle)} is over {max_bytes}")
        cached = Handle(Kind.CACHE, _INDEX_CACHE + handle.name)
        with contextlib.suppress(OSError):
            data, _ = self.local.read(cached, max_bytes=max_bytes)
            if len(data) == info.size:
                return data, info
        data, response = self._body(handle)
        if not response:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(handle))
        if len(data) > max_bytes:
            raise UnfitFileError(errno.EFBIG, f"{self.describe(handle)} is over {max_bytes}")
        with contextlib.suppress(OSError):
            self.local.write(cached, data, durable=False)
        return data, self._info(response, len(data))

    def read_range(self, handle: Handle, offset: int, length: int) -> bytes:
        if handle.kind in _LOCAL_KINDS:
            return self.local.read_range(handle, offset, length)
        if length <= 0:
            return b""
        data, _ = self._body(handle, f"bytes={offset}-{offset + length - 1}")
        return data

    def read_head(self, handle: Handle, length: int) -> tuple[bytes, ObjectInfo]:
        if handle.kind in _LOCAL_KINDS:
            return self.local.read_head(handle, length)
        data, response = self._body(handle, f"bytes=0-{max(length, 1) - 1}")
        if not response:
            return b"", self.stat(handle)
        content_range = str(response.get("ContentRange", ""))
        total = content_range.rpartition("/")[2]
        size = int(total) if total.isdigit() else int(response["ContentLength"])
        return data[:length], self._info(response, size)

    def chunks(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        if handle.kind in _LOCAL_KINDS:
            yield from self.local.chunks(handle, chunk_bytes)
            return
        response = self._get(handle)
        if not response:
            return
        try:
            yield from response["Body"].iter_chunks(chunk_bytes)
        except Exception as error:  # a dropped connection surfaces as any of several types
            raise self._failed(error, handle) from None
        finally:
            response["Body"].close()

    # ------------------------------------------------------------------ writing

    def _put(self, handle: Handle, body: bytes | IO[bytes], **conditions: str) -> str:
        """One PUT of a whole object under the given conditions; its new version."""
        self.leases.check()
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=self.key(handle), Body=body, **conditions
            )
        except client_errors() as error:
            raise self._failed(error, handle) from None
        return str(response["ETag"])

    def _existing_is(self, handle: Handle, size: int, data: bytes | None) -> bool:
        """After a refused create: True if the object there is the one we meant to write (a
        retried request whose first try went through; or, for a blob named by its digest, the
        same bytes from another writer)."""
        try:
            info = self.stat(handle)
        except FileNotFoundError:
            return False
        if info.size != size:
            return False
        if handle.kind is Kind.BLOB or data is None:
            return True
        found, _ = self.read(handle, max_bytes=size)
        return found == data

    def upload(self, handle: Handle, file: IO[bytes], size: int) -> None:
        """Create an immutable object from ``file`` (``size`` bytes), create-only; a failed
        upload leaves nothing visible."""
        etag = None
        if size >= MULTIPART_BYTES:
            etag = self._multipart(handle, file, size)
        else:
            try:
                etag = self._put(handle, file.read(), IfNoneMatch="*")
            except ConcurrentWriteError:
                if not self._existing_is(handle, size, None):
                    raise
        self._after_create(handle, size, etag)

    def _after_create(self, handle: Handle, size: int, etag: str | None) -> None:
        """Remember the object just created (its version from the PUT's answer; written now
        by this host's clock, which only orders manifests and none is remembered here)."""
        if etag is not None:
            self._remember(handle, ObjectInfo(size, etag, time.time_ns()))

    def _multipart(self, handle: Handle, file: IO[bytes], size: int) -> str | None:
        """A large object in parts; invisible until the create-only completion, aborted on
        any failure (an abort that fails leaves an invisible upload that gc removes)."""
        key = self.key(handle)
        part_bytes = max(PART_BYTES, -(-size // MAX_PARTS))
        self.leases.check()
        try:
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        except client_errors() as error:
            raise self._failed(error, handle) from None
        try:
            parts = []
            number = 1
            while chunk := file.read(part_bytes):
                self.leases.check()
                response = self.client.upload_part(
                    Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk
                )
                parts.append({"PartNumber": number, "ETag": response["ETag"]})
                number += 1
            self.leases.check()
            done = self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
            return str(done["ETag"])
        except BaseException as error:
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            if isinstance(error, client_errors()):
                failed = self._failed(error, handle)
                if isinstance(failed, ConcurrentWriteError) and self._existing_is(
                    handle, size, None
                ):
                    return None
                raise failed from None
            raise

    def stage(self, kind: Kind, size_hint: int = 0) -> _StagedUpload:
        return _StagedUpload(self, kind)

    def write(self, handle: Handle, data: bytes, *, durable: bool = True) -> None:
        """Write a whole object: a manifest (or the format marker, when a store is upgraded)
        by a conditional write of the version just read, anything else create-only
        (ConcurrentWriteError if a different one is there)."""
        if handle.kind in _LOCAL_KINDS:
            self.local.write(handle, data, durable=durable)
            return
        if handle.kind not in (Kind.MANIFEST, Kind.MARKER):
            etag = None
            try:
                etag = self._put(handle, data, IfNoneMatch="*")
            except ConcurrentWriteError:
                if not self._existing_is(handle, len(data), data):
                    raise
            self._after_create(handle, len(data), etag)
            return
        try:
            current: str | None = self.stat(handle).version  # type: ignore[assignment]
        except FileNotFoundError:
            current = None
        condition = {"IfNoneMatch": "*"} if current is None else {"IfMatch": str(current)}
        try:
            self._put(handle, data, **condition)
        except (ConcurrentWriteError, FileNotFoundError):
            if not self._existing_is(handle, len(data), data):
                raise ConcurrentWriteError(
                    errno.EAGAIN,
                    f"{self.describe(handle)} was changed by another writer since it was read",
                ) from None

    def delete(self, handle: Handle, *, durable: bool = True) -> None:
        """Delete an object that is there (FileNotFoundError if not); a manifest only in the
        version just read (ConcurrentWriteError if another writer replaced it meanwhile)."""
        if handle.kind in _LOCAL_KINDS:
            self.local.delete(handle, durable=durable)
            return
        version = self.stat(handle).version
        conditional = handle.kind is Kind.MANIFEST and self._conditional_deletes
        conditions = {"IfMatch": str(version)} if conditional else {}
        self.leases.check()
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key(handle), **conditions)
        except client_errors() as error:
            if not (conditional and error_code(error) in UNSUPPORTED):
                raise self._failed(error, handle) from None
            logger.warning(
                "%s refuses conditional deletes; deleting under the lease alone", self.url
            )
            self._conditional_deletes = False
            self.delete(handle, durable=durable)
        finally:
            self._remember(handle, None)

    def note_existing(self, handle: Handle) -> None:
        """Nothing to do: an object is durable when its PUT returns."""
        return None

    def flush(self) -> None:
        """Nothing to do: an object is durable when its PUT returns."""
        return None

    # ------------------------------------------------------------------ locks and upkeep

    def lock(self, name: str, label: str | None = None) -> S3Lock | NoLock | Any:
        """``gc`` and ``namespace`` are leases in the bucket; target locks are this host's
        (they lock this host's directories). ``gc-intent`` takes nothing: an exclusive
        lease holds back new shared holders as soon as it is claimed."""
        if name in _REMOTE_LOCKS:
            return S3Lock(self.leases, name, label or name, self.lock_timeout)
        if name == "gc-intent":
            return NoLock(label or name, self.lock_timeout)
        return self.local.lock(name, label)

    def tidy(self) -> None:
        """Nothing to do: a bucket has no directories to empty."""
        return None

    def _uploads(self) -> list[tuple[str, str]]:
        """(key, upload id) of the multipart uploads in progress under the prefix."""
        found: list[tuple[str, str]] = []
        paginator = self.client.get_paginator("list_multipart_uploads")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                found.extend((str(u["Key"]), str(u["UploadId"])) for u in page.get("Uploads", []))
        except client_errors() as error:
            if is_not_found(error):
                return []
            raise self._failed(error, f"s3://{self.bucket}/{self.prefix}") from None
        return found

    def stale_temps(self) -> list[str]:
        """Uploads never completed (gc holds the gc lock exclusively, so no writer on any host
        is running), and this host's temp files."""
        return [f"s3://{self.bucket}/{key}" for key, _ in self._uploads()] + (
            self.local.stale_temps()
        )

    def remove_stale_temps(self) -> int:
        removed = 0
        for key, upload_id in self._uploads():
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            except client_errors() as error:
                raise self._failed(error, f"s3://{self.bucket}/{key}") from None
            removed += 1
        return removed + self.local.remove_stale_temps()

    def close(self) -> None:
        self.local.close()
