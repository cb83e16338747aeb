"""A cache of manifest headers, so ``list()`` need not open and decode every manifest.

Each entry maps a manifest's object name to the version its object had (local: inode, size,
mtime_ns, ctime_ns, device) and the header decoded from it then. An entry is used only while
the object keeps that version: a manifest is never changed in place, only replaced whole, so a
match means the same, already validated, bytes. The cache lives in memory and in the cache
object ``headers``, written atomically and not flushed; a missing, torn or corrupt one only
costs speed. It is never used to decide what to delete: sweep and gc read the manifests.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Hashable, Mapping
from typing import Any

import msgpack

from snapstore.backend.seam import Backend, Handle, Kind, ObjectInfo
from snapstore.format.envelope import seal, unseal
from snapstore.format.header import Header, header_from_values, header_values
from snapstore.repo.filememo import backend_key

MAGIC = b"SNAPHDC\x06"
CACHE = Handle(Kind.CACHE, "headers")
MAX_CACHE_BYTES = 256 << 20

_DECODED: dict[tuple[str, str], tuple[Hashable, Header]] = {}
"""Headers decoded in this process, by (backend, manifest name): shared by every ``SnapStore``
of the process (the in-process cache docs/concurrency.md allows: keyed by version). Changed
only under ``_DECODED_LOCK``."""
_DECODED_LOCK = threading.Lock()


def _new_lock_in_child() -> None:
    """A forked child starts with a free lock (another thread may have held it mid-fork)."""
    global _DECODED_LOCK
    _DECODED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def _packed(version: Hashable, packer: msgpack.Packer | None = None) -> bytes:
    """A version as the msgpack bytes that start its cache entry (self-delimiting, so the
    header fields follow); empty (matching nothing) for one msgpack cannot hold. ``packer``:
    one this thread alone uses (a listing packs 10,000 versions)."""
    try:
        packed = (packer or msgpack.Packer()).pack(version)
    except (TypeError, ValueError, OverflowError):
        return b""
    assert isinstance(packed, bytes)
    return packed


class HeaderCache:
    """Headers by manifest, kept while the manifest keeps its version."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._owner = backend_key(backend)
        self._loaded = False
        self._stored: dict[str, Any] = {}
        self._dirty = False
        self._lock = threading.RLock()
        self._packer = msgpack.Packer()
        """Used under ``_lock`` only (a packer keeps state between calls)."""

    def _load(self) -> None:
        """Read the cache object once; entries put before that take precedence."""
        self._loaded = True
        try:
            data, _ = self.backend.read(CACHE, max_bytes=MAX_CACHE_BYTES)
        except OSError:
            return
        stored = unseal(MAGIC, data)
        if isinstance(stored, dict):
            stored.update(self._stored)
            self._stored = stored

    def known(self, listed: Mapping[str, ObjectInfo | None]) -> dict[str, Header]:
        """The headers recorded for the manifests ``listed`` (object name -> its info, None
        for no object) that still have those versions: one pass for a whole listing."""
        owner = self._owner
        found: dict[str, Header] = {}
        decoded: dict[tuple[str, str], tuple[Hashable, Header]] = {}
        remembered = _DECODED
        unpack = msgpack.unpackb
        with self._lock:
            if not self._loaded:
                self._load()
            stored_entries = self._stored
            packer = self._packer
            for name, info in listed.items():
                if info is None:
                    continue
                version = info.version
                key = (owner, name)
                known = remembered.get(key)
                if known is not None and known[0] == version:
                    found[name] = known[1]
                    continue
                stored = stored_entries.get(name)
                prefix = _packed(version, packer)
                if type(stored) is not bytes or not prefix or not stored.startswith(prefix):
                    continue
                try:
                    fields = unpack(stored[len(prefix) :], raw=False)
                    header = header_from_values(fields).with_file_time(info.written_ns)
                except Exception:  # an entry that does not decode is only a cache miss
                    continue
                found[name] = header
                decoded[key] = (version, header)
        if decoded:
            with _DECODED_LOCK:
                _DECODED.update(decoded)
        return found

    def put(self, handle: Handle, version: Hashable, header: Header) -> None:
        """Remember the header just decoded from the manifest ``handle``."""
        fields = msgpack.packb(header_values(header), use_bin_type=True)
        with _DECODED_LOCK:
            _DECODED[(self._owner, handle.name)] = (version, header)
        with self._lock:
            self._stored[handle.name] = _packed(version, self._packer) + fields
            self._dirty = True

    def finish(self, seen: set[str] | None) -> None:
        """After a listing: with ``seen`` (the object names of a full listing), forget the
        manifests no longer there; then write the cache if this listing decoded anything
        new. Errors are ignored: it is only a cache."""
        if seen is not None:
            with _DECODED_LOCK:
                for key in [k for k in _DECODED if k[0] == self._owner and k[1] not in seen]:
                    del _DECODED[key]
        with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            if not self._loaded:
                self._load()
            if seen is not None:
                for name in [n for n in self._stored if n not in seen]:
                    del self._stored[name]
            data = seal(MAGIC, self._stored)
        with contextlib.suppress(Exception):
            self.backend.write(CACHE, data, durable=False)
