"""The object storage backend: a store in an S3-compatible bucket, shared by several hosts.

Layout under the store's prefix (the same names as the local layout, docs/format.md):
``FORMAT``, ``blobs/<digest>``, ``packs/<id>.pack`` and ``packs/<id>.idx``,
``sessions/<session-dir>/<name-dir>`` (manifests), and ``locks/<name>/...`` (leases,
``s3lease``). What is about this host only stays on this host, in a local directory (the
*host cache*, a ``LocalBackend``): restore journals and target locks (they describe this
host's files; another host must never roll back a restore it did not make), and the caches
(stat cache, header cache, pack indexes already read).

Every object but a manifest is written once, create-only (``If-None-Match: *``), and a failed
or interrupted upload is never visible (``s3upload``). A manifest is committed by one
conditional write of the version just read (``If-Match``, or ``If-None-Match: *`` for a new
one), and deleted the same way: a writer that lost a race gets ConcurrentWriteError, never a
silent overwrite. Every write first checks that the leases held by this process are still
good (LeaseLostError otherwise). See docs/object-storage.md.

Listings are cheap here and per-object requests are not, so the backend answers ``stat`` of
immutable objects (blobs, packs, indexes) from the listings it made since this process last
took the gc lock (``s3listing``), and ``infos`` gives a whole listing's sizes and versions in
one request. The requests themselves are ``s3objects``'; creating immutable objects (and
telling a lost answer from another writer's object) is ``s3creates``'.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from snapstore.backend.layout import FORMAT_TEXT, MARKER_MAX_BYTES, check_format
from snapstore.backend.local import LocalBackend
from snapstore.backend.s3.client import StoreUrl, make_client, new_nonce, parse_url
from snapstore.backend.s3.creates import ImmutableCreates
from snapstore.backend.s3.lease import DEFAULT_LEASE, Leases
from snapstore.backend.s3.listing import IMMUTABLE, ListingMemo
from snapstore.backend.s3.lock import NoLock, S3Lock
from snapstore.backend.s3.objects import BucketObjects
from snapstore.backend.s3.upload import StagedUpload, abort_upload, pending_uploads
from snapstore.backend.seam import Handle, Kind, ObjectInfo, Properties, Version
from snapstore.backend.wholeobjects import WritesWhole
from snapstore.errors import ConcurrentWriteError, FormatError, StoreNotFoundError
from snapstore.fs.reading import UnfitFileError
from snapstore.logs import get_logger

PARALLEL_READS = 8
_LOCAL_KINDS = {Kind.JOURNAL, Kind.CACHE}
_REMOTE_LOCKS = {"gc"}
_REMOTE_LOCK_PREFIXES = ("sessions/",)
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


class S3Backend(WritesWhole):
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
        self.properties = Properties(
            durable=True,
            local_root=None,
            parallel_reads=PARALLEL_READS,
            write_once=IMMUTABLE,
            fresh_listings=False,
        )
        self.leases = Leases(
            self.client, self.bucket, self.prefix, lease=lease, on_acquire=self._on_acquire
        )
        self.objects = BucketObjects(self.client, self.url, self.leases)
        self.memo = ListingMemo(self.objects)
        self.creates = ImmutableCreates(self.objects, self.memo)
        self._conditional_deletes = True
        self.client.meta.events.register("before-send.s3", self._fence_every_attempt)

    def _fence_every_attempt(self, request: Any, **_: Any) -> None:
        """Check the leases before every attempt of a write, not only before the first: the
        client sends a request again by itself after a timeout, which may outlast a lease
        (another host's gc may have broken it meanwhile). Lease objects are not fenced:
        writing them is how a lease is kept."""
        if request.method in ("GET", "HEAD"):
            return
        if "/" + self.leases.prefix not in unquote(urlsplit(request.url).path):
            self.leases.check()

    def key(self, handle: Handle) -> str:
        """The object key of a handle (kinds kept in the bucket only)."""
        return self.objects.key(handle)

    def describe(self, handle: Handle) -> str:
        if handle.kind in _LOCAL_KINDS:
            return self.local.describe(handle)
        return self.objects.describe(handle)

    def _on_acquire(self, lock_name: str) -> None:
        """After taking the gc lock, forget what earlier listings said: objects may have gone
        while it was not held."""
        if lock_name == "gc":
            self.memo.forget_all()

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
                self.objects.put(marker, FORMAT_TEXT.encode(), IfNoneMatch="*")
                logger.info("created a new store at %s", self.url)
                return True
            except ConcurrentWriteError:
                data, _ = self.read(marker, max_bytes=MARKER_MAX_BYTES)
        except UnfitFileError:
            raise FormatError(f"{self.describe(marker)} is not a snapstore format marker") from None
        check_format(str(self.url).rstrip("/"), data.decode("utf-8", "replace"))
        return True

    # ------------------------------------------------------------------ listing

    def infos(self, kind: Kind, prefix: str = "") -> dict[str, ObjectInfo | None]:
        """The objects of ``kind`` now (starting with ``prefix``), with their info."""
        if kind in _LOCAL_KINDS:
            return self.local.infos(kind, prefix)
        if kind in IMMUTABLE:
            return self.memo.infos(kind, prefix)
        if kind in (Kind.MANIFEST, Kind.KEY):
            base = self.prefix + ("sessions/" if kind is Kind.MANIFEST else "keys/")
            return {key[len(base) :]: info for key, info in self.objects.list(base + prefix)}
        return {}

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        if kind in _LOCAL_KINDS:
            return self.local.names(kind, prefix)
        return sorted(self.infos(kind, prefix))

    # ------------------------------------------------------------------ reading

    def stat(self, handle: Handle) -> ObjectInfo:
        if handle.kind in _LOCAL_KINDS:
            return self.local.stat(handle)
        known = self.memo.known(handle)
        if known is not None:
            return known
        info = self.objects.head(handle)
        self.memo.remember(handle, info)
        return info

    def read(self, handle: Handle, *, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        if handle.kind in _LOCAL_KINDS:
            return self.local.read(handle, max_bytes=max_bytes)
        if handle.kind is Kind.INDEX:
            return self._read_index(handle, max_bytes)
        data, response = self.objects.body(handle, max_bytes=max_bytes)
        if not response:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(handle))
        return data, self.objects.info(response, int(response["ContentLength"]))

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
        data, response = self.objects.body(handle, max_bytes=max_bytes)
        if not response:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(handle))
        if len(data) > max_bytes:
            raise UnfitFileError(errno.EFBIG, f"{self.describe(handle)} is over {max_bytes}")
        with contextlib.suppress(OSError):
            self.local.write(cached, data, durable=False)
        return data, self.objects.info(response, len(data))

    def read_range(self, handle: Handle, offset: int, length: int) -> bytes:
        if handle.kind in _LOCAL_KINDS:
            return self.local.read_range(handle, offset, length)
        if length <= 0:
            return b""
        data, _ = self.objects.body(handle, f"bytes={offset}-{offset + length - 1}")
        return data

    def read_head(self, handle: Handle, length: int) -> tuple[bytes, ObjectInfo]:
        if handle.kind in _LOCAL_KINDS:
            return self.local.read_head(handle, length)
        data, response = self.objects.body(handle, f"bytes=0-{max(length, 1) - 1}")
        if not response:
            return b"", self.stat(handle)
        content_range = str(response.get("ContentRange", ""))
        total = content_range.rpartition("/")[2]
        size = int(total) if total.isdigit() else int(response["ContentLength"])
        return data[:length], self.objects.info(response, size)

    def chunks(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        if handle.kind in _LOCAL_KINDS:
            yield from self.local.chunks(handle, chunk_bytes)
            return
        yield from self.objects.stream(handle, chunk_bytes)

    # ------------------------------------------------------------------ writing

    def stage(self, kind: Kind, size_hint: int = 0) -> StagedUpload:
        return StagedUpload(self.creates.upload, kind, self.local.tmp_dir)

    def write(self, handle: Handle, data: bytes, *, durable: bool = True) -> None:
        """Write a whole object: a manifest (or the format marker, when a store is upgraded)
        by a conditional write of the version just read, anything else create-only
        (ConcurrentWriteError if a different one is there)."""
        if handle.kind in _LOCAL_KINDS:
            self.local.write(handle, data, durable=durable)
            return
        if handle.kind not in (Kind.MANIFEST, Kind.MARKER):
            self.creates.write(handle, data)
            return
        nonce = new_nonce()
        try:
            current: str | None = self.stat(handle).version  # type: ignore[assignment]
        except FileNotFoundError:
            current = None
        condition = {"IfNoneMatch": "*"} if current is None else {"IfMatch": str(current)}
        try:
            self.objects.put(handle, data, nonce, **condition)
        except (ConcurrentWriteError, FileNotFoundError):
            if self.objects.written_by(handle, nonce) is None:
                raise ConcurrentWriteError(
                    errno.EAGAIN,
                    f"{self.describe(handle)} was changed by another writer since it was read",
                ) from None

    def delete(
        self, handle: Handle, *, durable: bool = True, version: Version | None = None
    ) -> None:
        """Delete an object that is there (FileNotFoundError if not); a manifest only in the
        version given (the one the caller read and decided on), else the one there now
        (ConcurrentWriteError if another writer replaced it meanwhile)."""
        if handle.kind in _LOCAL_KINDS:
            self.local.delete(handle, durable=durable, version=version)
            return
        conditional = handle.kind is Kind.MANIFEST and self._conditional_deletes
        if version is None or not conditional:
            current = self.stat(handle).version
            if version is not None and current != version:
                raise ConcurrentWriteError(
                    errno.ESTALE, "replaced since it was read; not deleted", self.describe(handle)
                )
            version = current
        conditions = {"IfMatch": str(version)} if conditional else {}
        try:
            if not self.objects.delete(handle, **conditions):
                logger.warning(
                    "%s refuses conditional deletes; deleting under the lease alone", self.url
                )
                self._conditional_deletes = False
                self.delete(handle, durable=durable, version=version)
        finally:
            self.memo.remember(handle, None)

    def pack_log(self) -> None:
        """None: one LIST request tells what packs there are (and a bucket cannot append)."""
        return None

    def listing_stamp(self, kind: Kind, prefix: str) -> None:
        """None: a bucket tells what changed under a prefix only by listing it."""
        return None

    def listing_stamps(self, kind: Kind, prefix: str = "") -> None:
        """None: a bucket has no listing stamps."""
        return None

    def note_existing(self, handle: Handle) -> None:
        """Nothing to do: an object is durable when its PUT returns."""
        return None

    def flush(self) -> None:
        """Nothing to do: an object is durable when its PUT returns."""
        return None

    # ------------------------------------------------------------------ locks and upkeep

    def flush_deletions(self, kind: Kind, names: Sequence[str] | None = None) -> None:
        """Nothing to do: a deletion is durable when its DELETE returns."""
        return None

    def lock(self, name: str, label: str | None = None) -> S3Lock | NoLock | Any:
        """``gc`` and each session's lock (``sessions/<session-dir>``) are leases in the
        bucket; target locks are this host's (they lock this host's directories).
        ``gc-intent`` takes nothing: an exclusive lease holds back new shared holders as soon
        as it is claimed."""
        if name in _REMOTE_LOCKS or name.startswith(_REMOTE_LOCK_PREFIXES):
            return S3Lock(self.leases, name, label or name, self.lock_timeout)
        if name == "gc-intent":
            return NoLock(label or name, self.lock_timeout)
        return self.local.lock(name, label)

    def tidy(self) -> None:
        """Nothing to do: a bucket has no directories to empty."""
        return None

    def stale_temps(self) -> list[str]:
        """Uploads never completed (gc holds the gc lock exclusively, so no writer on any host
        is running), and this host's temp files."""
        return [f"s3://{self.bucket}/{key}" for key, _ in pending_uploads(self.objects)] + (
            self.local.stale_temps()
        )

    def remove_stale_temps(self) -> int:
        removed = 0
        for key, upload_id in pending_uploads(self.objects):
            removed += abort_upload(self.objects, key, upload_id)
        return removed + self.local.remove_stale_temps()

    def now_ns(self) -> int:
        """The server's clock (the one behind every ``Last-Modified``), so that a host whose
        own clock runs ahead judges no snapshot older than it is. ``Date`` has a resolution
        of one second and is truncated: ages come out up to a second young, never old."""
        return self.objects.server_now_ns() or time.time_ns()

    def close(self) -> None:
        self.local.close()
