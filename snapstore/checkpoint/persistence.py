"""Where checkpoints live: the store protocol, the durable file store and an in-memory one."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, cast, get_args

import msgpack

from snapstore.checkpoint.errors import CorruptCheckpointError
from snapstore.checkpoint.identity import FileIdentity
from snapstore.errors import (
    CorruptManifestError,
    InvalidNameError,
    InvalidValueError,
    NotAStateSnapshotError,
)
from snapstore.internals import repository
from snapstore.logs import get_logger
from snapstore.store import SnapStore

CHECKPOINT_SESSION = "checkpoints"
"""The reserved session that holds one state snapshot per checkpoint key."""

ENVELOPE_FORMAT = 1
"""Version of the mapping a checkpoint is saved as; a newer one is refused, never guessed at."""

SaveTrigger = Literal["interval", "end", "stop"]
"""Why a run saved: every N records, at the end of the stream, or when it stopped early."""

_MISSING = object()

logger = get_logger(__name__)


@dataclass(frozen=True)
class RunInfo:
    """How the run that saved a checkpoint was reading: needed to explain what a resume does."""

    source: str
    every: int
    records: int
    trigger: SaveTrigger

    def to_dict(self) -> dict[str, Any]:
        """A plain mapping for msgpack and JSON."""
        return {
            "source": self.source,
            "every": self.every,
            "records": self.records,
            "trigger": self.trigger,
        }

    @classmethod
    def from_dict(cls, data: object) -> RunInfo:
        """Rebuild run information from :meth:`to_dict` output; ValueError if malformed."""
        if not isinstance(data, dict):
            raise ValueError(f"run information is a {type(data).__name__}, not a mapping")
        source, every, records, trigger = (
            data.get(f) for f in ("source", "every", "records", "trigger")
        )
        if not isinstance(source, str):
            raise ValueError("run source must be a string")
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"run every must be a positive integer, not {every!r}")
        if not isinstance(records, int) or isinstance(records, bool) or records < 0:
            raise ValueError(f"run records must be a non-negative integer, not {records!r}")
        if trigger not in get_args(SaveTrigger):
            raise ValueError(f"run trigger {trigger!r} is not one of {get_args(SaveTrigger)}")
        return cls(source, every, records, cast(SaveTrigger, trigger))


@dataclass(frozen=True)
class Checkpoint:
    """A saved resume value: where a pipeline or connector keyed ``key`` should pick up again."""

    key: str
    value: Any
    saved_at: datetime
    identity: FileIdentity | None = None
    run: RunInfo | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (bytes in the value become hex)."""
        return {
            "key": self.key,
            "value": jsonable(self.value),
            "saved_at": self.saved_at.isoformat(),
            "identity": None if self.identity is None else self.identity.to_dict(),
            "run": None if self.run is None else self.run.to_dict(),
        }


class CheckpointStore(Protocol):
    """Keeps one checkpoint per key; ``load`` raises on a corrupt value rather than return None."""

    def load(self, key: str) -> Checkpoint | None:
        """The checkpoint saved under ``key``, or None if there is none."""
        ...

    def save(
        self,
        key: str,
        value: Any,
        *,
        identity: FileIdentity | None = None,
        run: RunInfo | None = None,
    ) -> Checkpoint:
        """Replace the checkpoint under ``key`` atomically; raise if it was not stored."""
        ...

    def delete(self, key: str) -> bool:
        """Remove the checkpoint under ``key``; False if there was none."""
        ...

    def keys(self) -> list[str]:
        """Every key that has a checkpoint, sorted."""
        ...


def default_root() -> Path:
    """The store root used when none is given: ``$SNAPSTORE_ROOT``, else ``./.snapstore``."""
    return Path(os.environ.get("SNAPSTORE_ROOT") or ".snapstore")


class FileCheckpointStore:
    """The durable default: one state snapshot per key in a reserved session of a SnapStore.

    Saves are atomic and durable (the store's commit protocol), and any number of processes can
    share one root as long as each key has one writer at a time.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | SnapStore | None = None,
        *,
        session: str = CHECKPOINT_SESSION,
        durable: bool = True,
        lock_timeout: float = 30.0,
    ) -> None:
        if isinstance(root, SnapStore):
            self.store = root
        else:
            location = default_root() if root is None else root
            self.store = SnapStore(location, lock_timeout=lock_timeout, durable=durable)
        self.session = session

    def __repr__(self) -> str:
        return f"FileCheckpointStore({self.store!r}, session={self.session!r})"

    def load(self, key: str) -> Checkpoint | None:
        """The checkpoint under ``key``, or None; CorruptCheckpointError if it is unreadable."""
        _check_key(key)
        try:
            raw = self.store.get_state(self.session, key, _MISSING)
        except CorruptManifestError as error:
            raise CorruptCheckpointError(key, f"its snapshot cannot be read ({error})") from error
        except NotAStateSnapshotError as error:
            raise CorruptCheckpointError(key, "it is a file snapshot, not a state value") from error
        if raw is _MISSING:
            return None
        return decode_checkpoint(key, raw)

    def save(
        self,
        key: str,
        value: Any,
        *,
        identity: FileIdentity | None = None,
        run: RunInfo | None = None,
    ) -> Checkpoint:
        """Commit ``value`` under ``key`` durably; raises (and keeps the old one) on failure."""
        _check_key(key)
        checkpoint = Checkpoint(key, _normalize(key, value), _now(), identity, run)
        self.store.put_state(self.session, key, encode_checkpoint(checkpoint))
        return checkpoint

    def delete(self, key: str) -> bool:
        """Remove the checkpoint under ``key``; False if there was none."""
        _check_key(key)
        deleted = self.store.delete(self.session, key)
        if deleted:
            logger.info("deleted checkpoint %r: its next run starts from the beginning", key)
        return deleted

    def keys(self) -> list[str]:
        """Every key with a committed checkpoint in this root, sorted (a checkpoint whose
        header is damaged names no key: see ``unreadable``)."""
        return sorted({info.name for info in self.store.list(self.session)})

    def unreadable(self) -> list[str]:
        """Why each checkpoint whose header cannot be read (so its key is not known either)
        is damaged, naming where it lies."""
        found = repository(self.store).catalog.manifests(self.session)
        return [str(item) for item in found if isinstance(item, CorruptManifestError)]


class MemoryCheckpointStore:
    """A store for tests: same encoding and checks as the file store, kept in this process only."""

    def __init__(self) -> None:
        self._saved: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load(self, key: str) -> Checkpoint | None:
        """The checkpoint under ``key``, or None if never saved."""
        _check_key(key)
        with self._lock:
            packed = self._saved.get(key)
        if packed is None:
            return None
        try:
            raw = msgpack.unpackb(packed, raw=False, strict_map_key=True)
        except (ValueError, TypeError, msgpack.UnpackException) as error:
            raise CorruptCheckpointError(key, f"it cannot be decoded ({error})") from error
        return decode_checkpoint(key, raw)

    def save(
        self,
        key: str,
        value: Any,
        *,
        identity: FileIdentity | None = None,
        run: RunInfo | None = None,
    ) -> Checkpoint:
        """Keep ``value`` under ``key``, encoded as the file store would store it."""
        _check_key(key)
        checkpoint = Checkpoint(key, _normalize(key, value), _now(), identity, run)
        packed = msgpack.packb(encode_checkpoint(checkpoint), use_bin_type=True)
        with self._lock:
            self._saved[key] = packed
        return checkpoint

    def delete(self, key: str) -> bool:
        """Forget the checkpoint under ``key``; False if there was none."""
        _check_key(key)
        with self._lock:
            return self._saved.pop(key, None) is not None

    def keys(self) -> list[str]:
        """Every key with a checkpoint, sorted."""
        with self._lock:
            return sorted(self._saved)

    def put_raw(self, key: str, packed: bytes) -> None:
        """Store raw bytes under ``key``, as a test's stand-in for a damaged saved value."""
        with self._lock:
            self._saved[key] = packed


def encode_checkpoint(checkpoint: Checkpoint) -> dict[str, Any]:
    """The mapping a checkpoint is stored as: versioned, self-describing, msgpack-able."""
    return {
        "checkpoint": ENVELOPE_FORMAT,
        "key": checkpoint.key,
        "value": checkpoint.value,
        "saved_at": checkpoint.saved_at.isoformat(),
        "identity": None if checkpoint.identity is None else checkpoint.identity.to_dict(),
        "run": None if checkpoint.run is None else checkpoint.run.to_dict(),
    }


def decode_checkpoint(key: str, raw: object) -> Checkpoint:
    """Rebuild a checkpoint from its stored mapping; CorruptCheckpointError if it is not one."""
    if not isinstance(raw, dict):
        raise CorruptCheckpointError(
            key, f"the saved value is a {type(raw).__name__}, not a checkpoint"
        )
    version = raw.get("checkpoint")
    if version != ENVELOPE_FORMAT:
        if isinstance(version, int) and not isinstance(version, bool) and version > ENVELOPE_FORMAT:
            reason = f"it is in checkpoint format {version}, newer than this snapstore reads"
        else:
            reason = "the saved value is not a checkpoint (no checkpoint format marker)"
        raise CorruptCheckpointError(key, reason)
    if raw.get("key") != key:
        raise CorruptCheckpointError(key, f"it records the key {raw.get('key')!r}")
    if "value" not in raw:
        raise CorruptCheckpointError(key, "it has no value")
    try:
        saved_at = datetime.fromisoformat(raw["saved_at"])
        if saved_at.tzinfo is None:
            raise ValueError("saved_at has no time zone")
        identity_data, run_data = raw.get("identity"), raw.get("run")
        identity = None if identity_data is None else FileIdentity.from_dict(identity_data)
        run = None if run_data is None else RunInfo.from_dict(run_data)
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptCheckpointError(key, f"its fields are malformed ({error})") from error
    return Checkpoint(key, raw["value"], saved_at, identity, run)


def _check_key(key: object) -> None:
    """Refuse keys that cannot name a checkpoint."""
    if not isinstance(key, str) or not key:
        raise InvalidNameError(f"a checkpoint key must be a non-empty string, not {key!r}")


def _normalize(key: str, value: Any) -> Any:
    """``value`` as it will read back (tuples become lists); InvalidValueError if it cannot be."""
    try:
        packed = msgpack.packb(value, use_bin_type=True)
        return msgpack.unpackb(packed, raw=False, strict_map_key=True)
    except (TypeError, ValueError, OverflowError) as error:
        raise InvalidValueError(
            f"the value for checkpoint {key!r} cannot be stored: {error} (use str or bytes "
            "mapping keys, and msgpack types: dict, list, str, bytes, int, float, bool, None)"
        ) from error


def _now() -> datetime:
    """The current time, aware and in UTC."""
    return datetime.now(UTC)


def jsonable(value: Any) -> Any:
    """A JSON-friendly copy of a saved value: bytes as hex, mapping keys as strings."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
