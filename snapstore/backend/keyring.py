"""The keys of an encrypted store: its config, and the master key wrapped once per password.

``keys/config`` (JSON, in the clear) names the store's id and its ciphers. Each
``keys/<id>`` (JSON, in the clear) holds the 64-byte master key sealed with AES-256-GCM under
a key derived from one password by Argon2id, with the parameters and salt it used: any of
the store's passwords opens it, and adding or removing a password never touches the data.
Key objects are immutable: changing a password adds a new key, then removes the old one.
See docs/encryption.md.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.errors import EncryptionError, KeyNotFoundError, WrongPasswordError
from snapstore.logs import get_logger

logger = get_logger(__name__)

CONFIG = Handle(Kind.KEY, "config")
MASTER_BYTES = 64
MAX_KEY_OBJECT_BYTES = 64 << 10
KEY_ID = re.compile(r"[0-9a-f]{16}")
CIPHER = "aes-256-gcm"
MAX_MEMORY_KIB = 4 << 20
MAX_ITERATIONS = 64
MAX_LANES = 64
BOUNDS_TEXT = "m from 8 per lane to 4194304 KiB, t and p from 1 to 64"
MAX_KEYS_TRIED = 32
"""Keys a password is tried against when a store is opened (a store with more refuses to
try the rest: each costs a key derivation)."""
NAMES = "aes-siv"


@dataclass(frozen=True)
class KdfParams:
    """Argon2id's cost: memory in KiB, passes, lanes. The default is RFC 9106's second
    recommended setting (64 MiB, 3 passes, 4 lanes); ``SNAPSTORE_KDF`` (``m=KIB,t=N,p=N``)
    chooses others for new keys."""

    memory_kib: int = 64 * 1024
    iterations: int = 3
    lanes: int = 4

    @classmethod
    def from_env(cls) -> KdfParams:
        """The parameters for new keys: ``$SNAPSTORE_KDF`` if set, else the default."""
        text = os.environ.get("SNAPSTORE_KDF", "").strip()
        if not text:
            return cls()
        try:
            fields = dict(part.split("=", 1) for part in text.split(","))
            params = cls(int(fields["m"]), int(fields["t"]), int(fields["p"]))
        except (KeyError, ValueError):
            raise EncryptionError(f"SNAPSTORE_KDF must read m=KIB,t=N,p=N, not {text!r}") from None
        if not params.in_bounds():
            raise EncryptionError(f"SNAPSTORE_KDF {text!r} is out of bounds ({BOUNDS_TEXT})")
        return params

    def in_bounds(self) -> bool:
        """True for parameters this version derives with: Argon2id's minimum memory (8 KiB
        per lane) up to 4 GiB, 1 to 64 passes, 1 to 64 lanes. A key naming others (a damaged
        or planted key object) is never tried: no key object can make opening exhaust
        memory or time before anything is authenticated."""
        return (
            1 <= self.lanes <= MAX_LANES
            and 1 <= self.iterations <= MAX_ITERATIONS
            and 8 * self.lanes <= self.memory_kib <= MAX_MEMORY_KIB
        )

    def derive(self, password: bytes, salt: bytes) -> bytes:
        """The 32-byte key ``password`` and ``salt`` give (takes the KDF's time)."""
        kdf = Argon2id(
            salt=salt,
            length=32,
            iterations=self.iterations,
            lanes=self.lanes,
            memory_cost=self.memory_kib,
        )
        return kdf.derive(password)


@dataclass(frozen=True)
class KeyInfo:
    """One password's key, as ``key list`` shows it."""

    id: str
    created: str
    host: str
    kdf: str


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _wrap_data(config: bytes, key_id: str, document: dict[str, Any]) -> bytes:
    """What a wrapped key authenticates besides the master key: the store's config as
    stored, the key's id, and every other field of the key object (a changed byte in either
    object makes the key open with no password)."""
    fields = {name: value for name, value in document.items() if name != "wrapped"}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return b"snapstore key\0" + config + b"\0" + f"{key_id}\0{canonical}".encode()


def read_json(backend: Backend, handle: Handle) -> dict[str, Any]:
    """A key object's JSON (EncryptionError if it is not one)."""
    data, _ = backend.read(handle, max_bytes=MAX_KEY_OBJECT_BYTES)
    try:
        value = json.loads(data)
    except ValueError:
        raise EncryptionError(f"{backend.describe(handle)} is not a key object") from None
    if not isinstance(value, dict):
        raise EncryptionError(f"{backend.describe(handle)} is not a key object")
    return value


def is_encrypted(backend: Backend) -> bool:
    """True if the store has an encryption config (it was made encrypted)."""
    try:
        backend.stat(CONFIG)
    except FileNotFoundError:
        return False
    return True


def read_config(backend: Backend) -> bytes:
    """The store's config as stored (EncryptionError if it is not one this version knows)."""
    data, _ = backend.read(CONFIG, max_bytes=MAX_KEY_OBJECT_BYTES)
    try:
        config = json.loads(data)
    except ValueError:
        raise EncryptionError(f"{backend.describe(CONFIG)} is not an encryption config") from None
    known = {"version": 1, "cipher": CIPHER, "names": NAMES, "kdf": "argon2id"}
    if not isinstance(config, dict) or any(config.get(k) != v for k, v in known.items()):
        raise EncryptionError(f"{backend.describe(CONFIG)}: unknown encryption {config!r}")
    if not isinstance(config.get("id"), str) or not KEY_ID.fullmatch(config["id"]):
        raise EncryptionError(f"{backend.describe(CONFIG)} holds no valid store id")
    return data


def new_config() -> bytes:
    """A new store's config (written by ``write_config`` once its first key is stored)."""
    config = {
        "version": 1,
        "id": os.urandom(8).hex(),
        "cipher": CIPHER,
        "names": NAMES,
        "kdf": "argon2id",
    }
    return json.dumps(config, indent=1).encode()


def make_encrypted(
    backend: Backend, password: bytes, where: str, marker: bytes
) -> tuple[bytes, str]:
    """Make the empty store on ``backend`` encrypted (its caller holds the gc lock): a new
    master key, its first key, then the config, then ``marker``. Keys a creation that died
    before its config left behind are removed. Returns the master key and the key's id."""
    if backend.names(Kind.MANIFEST) or backend.names(Kind.PACK):
        raise EncryptionError(
            f"the store at {where} holds data but no encryption config (keys/config is "
            "missing, or the store is not encrypted): refusing to open it with a password"
        )
    master = os.urandom(MASTER_BYTES)
    config = new_config()
    orphans = key_ids(backend)
    key_id = add_key(backend, config, master, password)
    for orphan in orphans:
        backend.delete(Handle(Kind.KEY, orphan))
    backend.write(CONFIG, config)
    backend.write(Handle(Kind.MARKER, ""), marker)
    logger.info("made the store at %s an encrypted store", where)
    return master, key_id


def add_key(backend: Backend, config: bytes, master: bytes, password: bytes) -> str:
    """Store ``master`` wrapped under ``password``; the new key's id."""
    params = KdfParams.from_env()
    key_id = os.urandom(8).hex()
    salt, nonce = os.urandom(16), os.urandom(12)
    document: dict[str, Any] = {
        "version": 1,
        "kdf": "argon2id",
        "memory_kib": params.memory_kib,
        "iterations": params.iterations,
        "lanes": params.lanes,
        "salt": _b64(salt),
        "nonce": _b64(nonce),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": socket.gethostname(),
    }
    wrapped = AESGCM(params.derive(password, salt)).encrypt(
        nonce, master, _wrap_data(config, key_id, document)
    )
    document["wrapped"] = _b64(wrapped)
    backend.write(Handle(Kind.KEY, key_id), json.dumps(document, indent=1).encode())
    return key_id


def key_ids(backend: Backend) -> list[str]:
    """The ids of the store's keys."""
    return [name for name in backend.names(Kind.KEY) if KEY_ID.fullmatch(name)]


def _unwrap(document: dict[str, Any], config: bytes, key_id: str, password: bytes) -> bytes | None:
    """The master key if ``password`` opens this key, else None (malformed: None too)."""
    try:
        params = KdfParams(
            int(document["memory_kib"]), int(document["iterations"]), int(document["lanes"])
        )
        salt = base64.b64decode(document["salt"], validate=True)
        nonce = base64.b64decode(document["nonce"], validate=True)
        wrapped = base64.b64decode(document["wrapped"], validate=True)
        if document.get("kdf") != "argon2id" or len(nonce) != 12 or not params.in_bounds():
            logger.warning("key %s: not a key this version can try, skipped", key_id)
            return None
        kek = params.derive(password, salt)
        master = AESGCM(kek).decrypt(nonce, wrapped, _wrap_data(config, key_id, document))
    except (KeyError, TypeError, ValueError, InvalidTag):
        return None
    return master if len(master) == MASTER_BYTES else None


def unlock(backend: Backend, config: bytes, password: bytes) -> tuple[bytes, str]:
    """The master key and the id of the key ``password`` opens (WrongPasswordError if none)."""
    ids = key_ids(backend)
    if len(ids) > MAX_KEYS_TRIED:
        logger.warning("the store has %d keys; trying the first %d", len(ids), MAX_KEYS_TRIED)
    for key_id in ids[:MAX_KEYS_TRIED]:
        try:
            document = read_json(backend, Handle(Kind.KEY, key_id))
        except (FileNotFoundError, EncryptionError):
            continue
        master = _unwrap(document, config, key_id, password)
        if master is not None:
            return master, key_id
    raise WrongPasswordError(
        f"the password opens none of the keys of the encrypted store at "
        f"{backend.describe(CONFIG).removesuffix('/keys/config')}"
    )


def list_keys(backend: Backend) -> list[KeyInfo]:
    """The store's keys, oldest first."""
    found = []
    for key_id in key_ids(backend):
        try:
            document = read_json(backend, Handle(Kind.KEY, key_id))
        except (FileNotFoundError, EncryptionError):
            continue
        kdf = (
            f"argon2id m={document.get('memory_kib')} t={document.get('iterations')} "
            f"p={document.get('lanes')}"
        )
        found.append(
            KeyInfo(key_id, str(document.get("created", "")), str(document.get("host", "")), kdf)
        )
    return sorted(found, key=lambda info: (info.created, info.id))


def remove_key(backend: Backend, key_id: str, *, current: str) -> None:
    """Remove key ``key_id``; never the one this process opened the store with, nor the last.
    The caller holds the store's key lock (``EncryptedBackend.key_lock``), so the keys
    listed here are the keys there: two removals at once never leave a store with none."""
    ids = key_ids(backend)
    if key_id not in ids:
        raise KeyNotFoundError(f"no key {key_id!r} in this store")
    if key_id == current:
        raise EncryptionError(
            "refusing to remove the key this password opens (use another password to remove it)"
        )
    if current not in ids:
        raise EncryptionError(
            f"the key this password opened ({current}) was removed meanwhile: open the store "
            "again with a password it still has"
        )
    backend.delete(Handle(Kind.KEY, key_id))
