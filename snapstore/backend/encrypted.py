"""An encrypted store: a backend that seals every object and name on its way to another one.

The repository above sees plaintext objects under their usual names; the backend below, only
sealed bodies (``sealing``) under sealed names (``sealednames``), but for the marker and the
key objects (``keyring``). Everything above the seam works unchanged, host-local journals
and caches included. A changed byte is the typed error of the object's kind (CorruptManifest,
CorruptPack, CorruptBlob, a damaged journal or cache). See docs/encryption.md.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence

from snapstore.backend import keyring
from snapstore.backend.packlog import PackLog
from snapstore.backend.sealedmarker import ENCRYPTED_MARKER, SEALED_MARKERS, plain_marker
from snapstore.backend.sealednames import listing_prefix, plain_name, stored_name
from snapstore.backend.sealedstage import SealedStage, holds_blob
from snapstore.backend.sealing import (
    HEADER_BYTES,
    SEALED_SEGMENT,
    SEGMENT_BYTES,
    NameCipher,
    ObjectCipher,
    SealError,
    plain_size,
    sealed_size,
    segment_span,
    sub_key,
)
from snapstore.backend.seam import Backend, Handle, Kind, Lock, ObjectInfo, StagedObject, Version
from snapstore.backend.secret import Secret
from snapstore.backend.wholeobjects import WritesWhole, cannot_append
from snapstore.errors import (
    CorruptBlobError,
    CorruptManifestError,
    CorruptPackError,
    EncryptionError,
    FormatError,
    ReadOnlyStoreError,
)
from snapstore.format.hashing import CHUNK_BYTES
from snapstore.fs.reading import UnfitFileError

_CLEAR_BODIES = frozenset({Kind.MARKER, Kind.KEY})
_IMMUTABLE = frozenset({Kind.PACK, Kind.INDEX, Kind.BLOB})
_PREFIX_MEMO = 4096


class EncryptedBackend(WritesWhole):
    """The store on ``inner``, sealed with the key ``secret`` opens; ``open`` makes or opens it."""

    def __init__(self, inner: Backend, secret: Secret) -> None:
        self.inner = inner
        self.secret = secret
        self.properties = cannot_append(inner.properties)
        self.key_id = ""
        self._master = b""
        self._objects: ObjectCipher | None = None
        self._names: NameCipher | None = None
        self._prefixes: OrderedDict[Handle, bytes] = OrderedDict()
        self._prefixes_lock = threading.Lock()

    # ------------------------------------------------------------------ keys

    def open(self, *, create: bool) -> bool:
        writable = self.inner.open(create=create)
        if not keyring.is_encrypted(self.inner):
            if not writable:
                raise ReadOnlyStoreError(
                    f"the store at {self.where} holds nothing yet, and this process can "
                    "neither make it encrypted nor open it unencrypted with a password"
                )
            # Under the gc lock: of processes making the same new store at once, one writes
            # its config and first key, and the others open the store it made.
            with self.inner.lock("gc").exclusive():
                if not keyring.is_encrypted(self.inner):
                    self._install(self._make_encrypted())
                    return writable
        config = keyring.read_config(self.inner)
        master, self.key_id = keyring.unlock(self.inner, config, self.secret.password())
        self._install(master)
        return writable

    def _make_encrypted(self) -> bytes:
        """Turn the empty store just made into an encrypted one; its master key."""
        master, self.key_id = keyring.make_encrypted(
            self.inner, self.secret.password(), self.where, ENCRYPTED_MARKER
        )
        return master

    def _install(self, master: bytes) -> None:
        self._master = master
        self._objects = ObjectCipher(sub_key(master, "object data", 32))
        self._names = NameCipher(
            sub_key(master, "object names", 64), sub_key(master, "blob shards", 32)
        )

    @property
    def where(self) -> str:
        """The store, as messages name it."""
        return self.inner.properties.local_root or self.inner.describe(Handle(Kind.MARKER, ""))

    @property
    def cipher(self) -> ObjectCipher:
        if self._objects is None:
            raise EncryptionError("the encrypted store is not open")
        return self._objects

    @property
    def name_cipher(self) -> NameCipher:
        if self._names is None:
            raise EncryptionError("the encrypted store is not open")
        return self._names

    def key_lock(self) -> contextlib.AbstractContextManager[None]:
        """The lock every change of the keys holds (the gc lock, exclusive): a change reads
        the keys there under it, so two at once never leave the store without a key."""
        return self.inner.lock("gc").exclusive()

    def add_password(self, password: bytes) -> str:
        """Add a key for ``password``; its id."""
        if not self._master:
            raise EncryptionError("the encrypted store is not open")
        with self.key_lock():
            if self.key_id not in keyring.key_ids(self.inner):
                raise EncryptionError(
                    f"the key this password opened ({self.key_id}) was removed meanwhile"
                )
            config = keyring.read_config(self.inner)
            return keyring.add_key(self.inner, config, self._master, password)

    def list_keys(self) -> list[keyring.KeyInfo]:
        """The store's keys."""
        return keyring.list_keys(self.inner)

    def remove_key(self, key_id: str) -> None:
        """Remove key ``key_id`` (never the one this process opened the store with)."""
        with self.key_lock():
            keyring.remove_key(self.inner, key_id, current=self.key_id)

    def change_password(self, password: bytes) -> tuple[str, str]:
        """Replace the key this process opened the store with by one for ``password``:
        (the new key's id, the old one's)."""
        with self.key_lock():
            old = self.key_id
            if old not in keyring.key_ids(self.inner):
                raise EncryptionError(f"the key this password opened ({old}) was removed meanwhile")
            config = keyring.read_config(self.inner)
            new = keyring.add_key(self.inner, config, self._master, password)
            self.key_id = new
            keyring.remove_key(self.inner, old, current=new)
        return new, old

    # ------------------------------------------------------------------ names

    def stored_name(self, kind: Kind, name: str) -> str:
        """The name an object of ``kind`` called ``name`` has below."""
        return stored_name(self.name_cipher, kind, name)

    def _below(self, handle: Handle) -> Handle:
        return Handle(handle.kind, stored_name(self.name_cipher, handle.kind, handle.name))

    # ------------------------------------------------------------------ reading

    def _corrupt(self, handle: Handle, error: Exception) -> Exception:
        """The typed error a sealed object failing to open means, by its kind."""
        where = f"{self.inner.describe(self._below(handle))}: {error}"
        if handle.kind is Kind.MANIFEST:
            return CorruptManifestError(where)
        if handle.kind in (Kind.PACK, Kind.INDEX):
            return CorruptPackError(where)
        if handle.kind is Kind.JOURNAL:
            return UnfitFileError(where)
        return CorruptBlobError(where)

    def _plain_info(self, handle: Handle, info: ObjectInfo) -> ObjectInfo:
        if handle.kind in _CLEAR_BODIES:
            return info
        return info._replace(size=plain_size(info.size))

    def stat(self, handle: Handle) -> ObjectInfo:
        return self._plain_info(handle, self.inner.stat(self._below(handle)))

    def read(self, handle: Handle, *, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        below = self._below(handle)
        if handle.kind is Kind.MARKER:
            data, info = self.inner.read(below, max_bytes=max_bytes)
            if data in SEALED_MARKERS:  # its maker died before marking it encrypted
                with contextlib.suppress(OSError):
                    self.inner.write(below, ENCRYPTED_MARKER)
                return data, info
            plain = plain_marker(data)
            if plain is None:
                raise FormatError(f"{self.where}: the format marker of the store is damaged")
            return plain, info
        if handle.kind in _CLEAR_BODIES:
            return self.inner.read(below, max_bytes=max_bytes)
        data, info = self.inner.read(below, max_bytes=sealed_size(max_bytes))
        try:
            plain = self.cipher.open(handle.kind.value, handle.name, data)
        except SealError as error:
            if handle.kind is Kind.CACHE:
                return b"", self._plain_info(handle, info)
            raise self._corrupt(handle, error) from None
        return plain, self._plain_info(handle, info)

    def read_head(self, handle: Handle, length: int) -> tuple[bytes, ObjectInfo]:
        below = self._below(handle)
        if handle.kind in _CLEAR_BODIES:
            return self.inner.read_head(below, length)
        first, _, span = segment_span(0, length)
        data, info = self.inner.read_head(below, HEADER_BYTES + span)
        try:
            prefix = self.cipher.prefix_of(data)
            plain = self.cipher.open_segments(
                prefix,
                first,
                data[HEADER_BYTES:],
                handle.kind.value,
                handle.name,
                whole=len(data) >= info.size,
            )
        except SealError as error:
            raise self._corrupt(handle, error) from None
        return plain[:length], self._plain_info(handle, info)

    def _prefix(self, below: Handle, *, fresh: bool) -> bytes:
        """The random prefix of a stored object (remembered for objects never rewritten)."""
        if not fresh:
            with self._prefixes_lock:
                known = self._prefixes.get(below)
                if known is not None:
                    self._prefixes.move_to_end(below)
                    return known
        header = self.inner.read_range(below, 0, HEADER_BYTES)
        if not header:
            raise FileNotFoundError(self.inner.describe(below))
        prefix = self.cipher.prefix_of(header)
        if below.kind in _IMMUTABLE:
            with self._prefixes_lock:
                self._prefixes[below] = prefix
                while len(self._prefixes) > _PREFIX_MEMO:
                    self._prefixes.popitem(last=False)
        return prefix

    def read_range(self, handle: Handle, offset: int, length: int) -> bytes:
        below = self._below(handle)
        if handle.kind in _CLEAR_BODIES:
            return self.inner.read_range(below, offset, length)
        if length <= 0:
            return b""
        first, stored_offset, span = segment_span(offset, length)
        for fresh in (False, True):
            try:
                prefix = self._prefix(below, fresh=fresh)
                sealed = self.inner.read_range(below, stored_offset, span)
                if not sealed:
                    return b""
                plain = self.cipher.open_segments(
                    prefix, first, sealed, handle.kind.value, handle.name, whole=False
                )
            except SealError as error:
                if fresh:
                    raise self._corrupt(handle, error) from None
                continue
            start = offset - first * SEGMENT_BYTES
            return plain[start : start + length]
        raise AssertionError("unreachable")

    def chunks(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        below = self._below(handle)
        if handle.kind in _CLEAR_BODIES:
            yield from self.inner.chunks(below, chunk_bytes)
            return
        try:
            for plain in self._open_stream(handle, below):
                for start in range(0, len(plain), chunk_bytes):
                    yield plain[start : start + chunk_bytes]
        except SealError as error:
            raise self._corrupt(handle, error) from None

    def _open_stream(self, handle: Handle, below: Handle) -> Iterator[bytes]:
        """An object's plaintext, one segment at a time, each authenticated before it goes."""
        kind, name = handle.kind.value, handle.name
        pending = b""
        prefix: bytes | None = None
        number = 0
        for chunk in self.inner.chunks(below, max(CHUNK_BYTES, SEALED_SEGMENT)):
            pending += chunk
            if prefix is None:
                if len(pending) < HEADER_BYTES:
                    continue
                prefix, pending = self.cipher.prefix_of(pending), pending[HEADER_BYTES:]
            full = (len(pending) - 1) // SEALED_SEGMENT
            if full > 0:
                cut = full * SEALED_SEGMENT
                sealed, pending = pending[:cut], pending[cut:]
                yield self.cipher.open_segments(prefix, number, sealed, kind, name, whole=False)
                number += full
        if prefix is None:
            raise SealError("not an encrypted object")
        yield self.cipher.open_segments(prefix, number, pending, kind, name, whole=True)

    # ------------------------------------------------------------------ writing

    def stage(self, kind: Kind, size_hint: int = 0) -> StagedObject:
        inner = self.inner.stage(kind, sealed_size(size_hint) if size_hint else 0)
        if kind in _CLEAR_BODIES:
            return inner
        return SealedStage(
            self.cipher,
            kind,
            inner,
            lambda name: self.stored_name(kind, name),
            lambda name: holds_blob(
                lambda: self.chunks(Handle(Kind.BLOB, name), CHUNK_BYTES), name
            ),
        )

    def write(self, handle: Handle, data: bytes, *, durable: bool = True) -> None:
        below = self._below(handle)
        if handle.kind is Kind.MARKER:
            self.inner.write(below, SEALED_MARKERS.get(data, ENCRYPTED_MARKER), durable=durable)
        elif handle.kind in _CLEAR_BODIES:
            self.inner.write(below, data, durable=durable)
        else:
            sealed = self.cipher.seal(handle.kind.value, handle.name, data)
            self.inner.write(below, sealed, durable=durable)

    def delete(
        self, handle: Handle, *, durable: bool = True, version: Version | None = None
    ) -> None:
        with self._prefixes_lock:
            self._prefixes.pop(self._below(handle), None)
        self.inner.delete(self._below(handle), durable=durable, version=version)

    def note_existing(self, handle: Handle) -> None:
        self.inner.note_existing(self._below(handle))

    def flush_deletions(self, kind: Kind, names: Sequence[str] | None = None) -> None:
        below = None if names is None else [self._below(Handle(kind, n)).name for n in names]
        self.inner.flush_deletions(kind, below)

    def infos(self, kind: Kind, prefix: str = "") -> dict[str, ObjectInfo | None]:
        below = listing_prefix(self.name_cipher, kind, prefix)
        found: dict[str, ObjectInfo | None] = {}
        for stored, info in self.inner.infos(kind, below or "").items():
            name = plain_name(self.name_cipher, kind, stored)
            if name is not None and name.startswith(prefix):
                found[name] = None if info is None else self._plain_info(Handle(kind, name), info)
        return found

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        below = listing_prefix(self.name_cipher, kind, prefix)
        found = (
            plain_name(self.name_cipher, kind, stored)
            for stored in self.inner.names(kind, below or "")
        )
        return sorted(name for name in found if name is not None and name.startswith(prefix))

    def listing_stamp(self, kind: Kind, prefix: str) -> Hashable | None:
        below = listing_prefix(self.name_cipher, kind, prefix)
        return None if below is None else self.inner.listing_stamp(kind, below)

    def listing_stamps(self, kind: Kind, prefix: str = "") -> None:
        """None: the groups' stored names are sealed; their manifests are listed instead."""

    def pack_log(self) -> PackLog | None:
        return self.inner.pack_log()

    def lock(self, name: str, label: str | None = None) -> Lock:
        group, slash, rest = name.partition("/")
        if slash:
            name = f"{group}/{self.name_cipher.seal('lock', rest)}"
        return self.inner.lock(name, label)

    def flush(self) -> None:
        self.inner.flush()

    def tidy(self) -> None:
        self.inner.tidy()

    def stale_temps(self) -> list[str]:
        return self.inner.stale_temps()

    def remove_stale_temps(self) -> int:
        return self.inner.remove_stale_temps()

    def describe(self, handle: Handle) -> str:
        return self.inner.describe(self._below(handle))

    def now_ns(self) -> int:
        return self.inner.now_ns()

    def close(self) -> None:
        self.inner.close()
