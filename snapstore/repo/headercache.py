"""A cache of manifest headers, so ``list()`` need not open and decode every manifest.

Each entry maps a manifest's path (relative to ``sessions/``) to the identity its file had
(inode, size, mtime_ns, ctime_ns, device) and the header decoded from it then. An entry is
used only while the file keeps that identity: a manifest is never changed in place, only
replaced by a rename (a new inode), so a match means the same, already validated, bytes. The
cache lives in memory and in ``<root>/cache/headers``, written atomically without fsync; a
missing, torn or corrupt file only costs speed. It is never used to decide what to delete:
sweep and gc read the manifests themselves.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from typing import Any

import blake3
import msgpack

from snapstore.format.manifest import Header, ns_to_time
from snapstore.fs.durable import ensure_dir, write_atomic
from snapstore.fs.reading import read_regular
from snapstore.fs.seam import FileSystem
from snapstore.models import SkippedPath, SnapshotInfo, frozen_from_fields
from snapstore.repo.filememo import Identity

MAGIC = b"SNAPHDC\x03"
CHECKSUM_BYTES = 16
IDENTITY = struct.Struct("<QQqqQ")
MAX_CACHE_BYTES = 256 << 20

_DECODED: dict[str, tuple[Identity, Header]] = {}
"""Headers decoded in this process, by absolute manifest path: shared by every ``SnapStore``
of the process (the in-process cache docs/concurrency.md allows: keyed by file identity).
Changed only under ``_DECODED_LOCK``."""
_DECODED_LOCK = threading.Lock()


def _packed(identity: Identity) -> bytes:
    """An identity as the 40 bytes that start its cache entry; empty (matching nothing) for
    one that does not fit."""
    try:
        return IDENTITY.pack(*identity)
    except struct.error:
        return b""


def _fields(header: Header) -> list[Any]:
    info = header.info
    return [
        info.session,
        info.name,
        info.kind,
        header.created_ns,
        header.expires_ns,
        info.file_count,
        info.total_bytes,
        info.meta,
        info.base_dir,
        [[s.path, s.error] for s in info.skipped],
        list(info.roots),
        info.backup_of,
        list(info.excludes),
    ]


def _header(fields: list[Any]) -> Header:
    (
        session,
        name,
        kind,
        created_ns,
        expires_ns,
        count,
        total,
        meta,
        base,
        skipped,
        roots,
        backup_of,
        excludes,
    ) = fields
    info = frozen_from_fields(
        SnapshotInfo,
        {
            "session": session,
            "name": name,
            "kind": kind,
            "created_at": ns_to_time(created_ns),
            "expires_at": None if expires_ns is None else ns_to_time(expires_ns),
            "file_count": count,
            "total_bytes": total,
            "meta": meta,
            "base_dir": base,
            "skipped": tuple(SkippedPath(p, e) for p, e in skipped) if skipped else (),
            "roots": tuple(roots),
            "backup_of": backup_of,
            "excludes": tuple(excludes),
            "replaced": False,
        },
    )
    return Header(info, created_ns, expires_ns, created_ns)


class HeaderCache:
    """Headers by manifest path, kept while the manifest keeps its identity."""

    def __init__(self, cache_dir: str, tmp_dir: str, fs: FileSystem) -> None:
        self.path = os.path.join(cache_dir, "headers")
        self.cache_dir = cache_dir
        self.tmp_dir = tmp_dir
        self.fs = fs
        self._loaded = False
        self._stored: dict[str, Any] = {}
        self._dirty = False
        self._lock = threading.RLock()

    def _load(self) -> None:
        """Read the cache file once; entries put before that take precedence."""
        self._loaded = True
        try:
            data, _ = read_regular(self.path, max_bytes=MAX_CACHE_BYTES)
        except OSError:
            return
        head = len(MAGIC) + CHECKSUM_BYTES
        body = data[head:]
        if data[: len(MAGIC)] != MAGIC:
            return
        if blake3.blake3(body).digest(length=CHECKSUM_BYTES) != data[len(MAGIC) : head]:
            return
        with contextlib.suppress(Exception):
            stored = msgpack.unpackb(body, raw=False, strict_map_key=True)
            if isinstance(stored, dict):
                stored.update(self._stored)
                self._stored = stored

    def get(self, path: str, relative: str, identity: Identity) -> Header | None:
        """The header recorded for the manifest at ``path`` (``relative`` to ``sessions/``)
        if it still has ``identity``."""
        known = _DECODED.get(path)
        if known is not None and known[0] == identity:
            return known[1]
        with self._lock:
            if not self._loaded:
                self._load()
            stored = self._stored.get(relative)
        if type(stored) is not bytes or stored[: IDENTITY.size] != _packed(identity):
            return None
        try:
            fields = msgpack.unpackb(stored[IDENTITY.size :], raw=False)
            header = _header(fields).with_file_time(identity[2])
        except Exception:  # an entry that does not decode is only a cache miss
            return None
        with _DECODED_LOCK:
            _DECODED[path] = (identity, header)
        return header

    def put(self, path: str, relative: str, identity: Identity, header: Header) -> None:
        """Remember the header just decoded from the manifest at ``path``."""
        fields = msgpack.packb(_fields(header), use_bin_type=True)
        with _DECODED_LOCK:
            _DECODED[path] = (identity, header)
        with self._lock:
            self._stored[relative] = _packed(identity) + fields
            self._dirty = True

    def finish(self, sessions_dir: str, seen: set[str] | None) -> None:
        """After a listing: with ``seen`` (a full listing of ``sessions_dir``), forget the
        manifests no longer there; then write the cache file if this listing decoded
        anything new. Errors are ignored: it is only a cache."""
        if seen is not None:
            prefix = os.path.join(sessions_dir, "")
            with _DECODED_LOCK:
                for path in [p for p in _DECODED if p.startswith(prefix)]:
                    if path[len(prefix) :] not in seen:
                        del _DECODED[path]
        with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            if not self._loaded:
                self._load()
            if seen is not None:
                for relative in [r for r in self._stored if r not in seen]:
                    del self._stored[relative]
            body = msgpack.packb(self._stored, use_bin_type=True)
        with contextlib.suppress(Exception):
            checksum = blake3.blake3(body).digest(length=CHECKSUM_BYTES)
            root = os.path.dirname(self.cache_dir)
            ensure_dir(self.fs, self.cache_dir, stop_at=root, durable=False)
            write_atomic(
                self.fs, self.path, MAGIC + checksum + body, tmp_dir=self.tmp_dir, durable=False
            )
