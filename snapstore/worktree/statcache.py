"""The stat cache: what each file of a base directory hashed to, keyed by its stat, so a
snapshot does not re-read files that have not changed since the last one.

An entry is (relative path) -> (size, mtime_ns, ctime_ns, inode, device, digest), with a
seventh field, true, when the digest names the extent map of a file with holes rather than its
bytes; it is used only when all five stat fields still match. A file whose mtime or ctime
lies within ``RACY_NS`` of the scan's start is never recorded: it could change again within
the same timestamp tick and keep its stat (git's "racy" files). The cache is an optimization only:
it lives in ``<root>/cache/``, is written atomically without fsync, and a cache that is
missing, stale, torn or corrupt is ignored. A cached digest is used only if the blob exists.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
from collections.abc import Callable
from typing import Any

import blake3

from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.format.envelope import seal, unseal
from snapstore.format.manifest import EntryRow
from snapstore.repo.filememo import FileMemo
from snapstore.worktree.scanned import Reuse

MAGIC = b"SNAPSTC\x01"
RACY_NS = 2_000_000_000
ENTRY_FIELDS = (6, 7)
DIGEST_BYTES = 32
MAX_REMEMBERED = 8
MAX_CACHE_BYTES = 512 << 20

_DECODED: FileMemo[dict[str, Any]] = FileMemo(limit=MAX_REMEMBERED)
"""Cache files decoded in this process (a bridge snapshotting again finds its entries
decoded). The dicts stored here are never modified."""


@functools.lru_cache(maxsize=256)
def cache_name(base_dir: str) -> str:
    """The cache file name for a base directory (one file per absolute base path)."""
    return "stat-" + blake3.blake3(os.fsencode(base_dir)).hexdigest(length=16)


class StatCache:
    """The cache of one base directory, loaded once, updated by a scan, saved if changed.

    Entries stay in their stored shape, ``[size, mtime_ns, ctime_ns, ino, dev, digest]``, and
    are checked when looked up, so loading a large cache costs one msgpack decode.
    """

    def __init__(self, backend: Backend, base_dir: str, scan_start_ns: int) -> None:
        self.backend = backend
        self.handle = Handle(Kind.CACHE, cache_name(base_dir))
        self.base_dir = base_dir
        self.trust_before_ns = scan_start_ns - RACY_NS
        self._old: dict[str, Any] = self._load()
        self._new: dict[str, Any] = {}
        self._changed = False
        self.reused_extents: set[str] = set()
        """The paths the scan hook vouched for whose digests name extent maps."""

    def _load(self) -> dict[str, Any]:
        try:
            return _DECODED.read(
                self.backend,
                self.handle,
                lambda data: decode(data, self.base_dir),
                max_bytes=MAX_CACHE_BYTES,
            )
        except OSError:
            return {}

    @property
    def empty(self) -> bool:
        """Whether the cache holds no entry (nothing was snapshotted from its base yet, or
        its cache was lost): no file can be spared its reading."""
        return not self._old

    def lookup(self, relative: str, info: os.stat_result, extents: bool = False) -> bytes | None:
        """The digest recorded for ``relative`` if its stat still matches, the file is not
        racy now, and it is a digest of the kind asked for (of an extent map with
        ``extents``, of the bytes without), else None."""
        found = self._old.get(relative)
        if found is None or (len(found) == 7) != extents:
            return None
        return _digest_if_matching(found, info, self.trust_before_ns)

    def keep(self, relative: str) -> None:
        """Carry a looked-up, matching entry over unchanged (cheaper than ``record``)."""
        self._new[relative] = self._old[relative]

    def reuse_hook(
        self,
        claim: Callable[[bytes, int], bool],
        claim_extents: Callable[[bytes, int], bool],
    ) -> Reuse:
        """The scan hook that gives an unchanged file's manifest row without reading it: its
        stat matches its entry (as ``lookup``) and ``claim`` confirms the blob is stored
        (``claim_extents`` the extent map and its pieces, for a file with holes); the entry
        is then kept (as ``keep``) for the cache this scan saves."""
        old, kept, trust_before_ns = self._old, self._new, self.trust_before_ns
        extents = self.reused_extents

        def reuse(path: str, info: os.stat_result) -> EntryRow | None:
            found = old.get(path)
            digest = _digest_if_matching(found, info, trust_before_ns)
            if digest is None:
                return None
            if len(found) == 7:  # type: ignore[arg-type]
                if not claim_extents(digest, info.st_size):
                    return None
                extents.add(path)
            elif not claim(digest, info.st_size):
                return None
            kept[path] = found
            return (
                path,
                "file",
                info.st_mode & 0o7777,
                info.st_size,
                info.st_mtime_ns,
                digest,
                None,
            )

        return reuse

    def record(
        self, relative: str, info: os.stat_result, digest: bytes, extents: bool = False
    ) -> None:
        """Remember what ``relative`` (with stat ``info``) hashed to (the digest of its extent
        map, with ``extents``), unless it is racy."""
        if max(info.st_mtime_ns, info.st_ctime_ns) >= self.trust_before_ns:
            if relative in self._old:
                self._changed = True
            return
        entry = [*_recorded_stat(info), digest]
        if extents:
            entry.append(True)
        self._new[relative] = entry
        if not self._changed and self._old.get(relative) != entry:
            self._changed = True

    def save(self, *, keep_unseen: bool) -> None:
        """Write the entries recorded by this scan (plus, with ``keep_unseen``, the loaded
        ones it did not visit) if they differ from what was loaded; errors are ignored."""
        if keep_unseen:
            if not self._changed:
                return
            entries = {**self._old, **self._new}
        else:
            if not self._changed and len(self._new) == len(self._old):
                return
            entries = self._new
        data = encode(entries, self.base_dir)
        with contextlib.suppress(OSError):
            self.backend.write(self.handle, data, durable=False)
            _DECODED.remember(self.backend, self.handle, entries)


def forget_decoded(backend: Backend, base_dir: str) -> None:
    """Drop this process's decoded copy of the base directory's cache (the next scan reads
    the cache file again). A long-lived process that keeps what it needs of a large tree in
    another form saves the memory (about 20 MB for 50,000 files)."""
    handle = Handle(Kind.CACHE, cache_name(base_dir))
    _DECODED.forget(lambda key: key[1] != handle)


_recorded_stat: Callable[[os.stat_result], tuple[int, int, int, int, int]]
_recorded_stat = operator.attrgetter("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_dev")
"""The stat fields an entry records, in its order: size, mtime, ctime, inode, device (a C
getter: it runs once per file recorded)."""


def _digest_if_matching(found: Any, info: os.stat_result, trust_before_ns: int) -> bytes | None:
    """The digest of a (well-formed) entry whose stat fields all equal ``info``'s, else None;
    also None for a file changed at or after ``trust_before_ns`` (the racy rule entries are
    recorded under, applied again: an entry written by a process whose clock ran ahead)."""
    if (
        found is not None
        and tuple(found[:5]) == _recorded_stat(info)
        and info.st_mtime_ns < trust_before_ns
        and info.st_ctime_ns < trust_before_ns
    ):
        digest: bytes = found[5]
        return digest
    return None


def encode(entries: dict[str, Any], base_dir: str) -> bytes:
    """The cache object: ``[base_dir, entries]`` in the store's self-checking envelope."""
    return seal(MAGIC, [base_dir, entries])


def decode(data: bytes, base_dir: str) -> dict[str, Any]:
    """The entries of a cache object, or nothing if it is torn, corrupt or another base's."""
    found = unseal(MAGIC, data)
    if not isinstance(found, list) or len(found) != 2:
        return {}
    stored_base, entries = found
    if stored_base != base_dir or not isinstance(entries, dict):
        return {}
    return {path: entry for path, entry in entries.items() if _well_formed(entry)}


def _well_formed(entry: Any) -> bool:
    """Checked once when a cache is decoded, so lookups compare stat fields only."""
    return (
        type(entry) is list
        and len(entry) in ENTRY_FIELDS
        and type(entry[5]) is bytes
        and len(entry[5]) == DIGEST_BYTES
        and entry[6:] in ([], [True])
    )
