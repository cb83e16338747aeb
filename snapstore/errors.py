"""Every exception snapstore raises; all derive from :class:`SnapstoreError`."""

from __future__ import annotations


class SnapstoreError(Exception):
    """Base class of every snapstore error."""


class InvalidNameError(SnapstoreError, ValueError):
    """A session or snapshot name is empty, not a string, or too long."""


class LockTimeout(SnapstoreError, TimeoutError):
    """A store lock could not be taken within ``lock_timeout`` seconds."""

    def __init__(self, lock_name: str, timeout: float) -> None:
        super().__init__(
            f"could not take lock {lock_name!r} within {timeout:g}s: another process holds it "
            "(raise lock_timeout, --lock-timeout on the command line, or find the process "
            "holding it)"
        )
        self.lock_name = lock_name
        self.timeout = timeout


class SnapshotNotFound(SnapstoreError, KeyError):
    """No committed snapshot exists for the given (session, name)."""

    def __init__(self, session: str, name: str, *, what: str = "snapshot") -> None:
        super().__init__(session, name)
        self.session = session
        self.name = name
        self.what = what

    def __str__(self) -> str:
        if not self.name:
            return f"no {self.what} in session {self.session!r}"
        return f"no {self.what} {self.name!r} in session {self.session!r}"


class SnapshotExistsError(SnapstoreError, FileExistsError):
    """``create(..., if_exists="error")`` found a snapshot of that name already there."""

    def __init__(self, session: str, name: str) -> None:
        super().__init__(f"snapshot {name!r} already exists in session {session!r}")
        self.session = session
        self.name = name


class MissingPathError(SnapstoreError, FileNotFoundError):
    """``create(..., missing="error")`` was given a path that does not exist."""


class CorruptManifestError(SnapstoreError):
    """A manifest failed to decode, failed its checksum, or failed validation."""


class CorruptBlobError(SnapstoreError):
    """A blob's bytes do not hash to its digest."""


class CorruptPackError(CorruptBlobError):
    """A pack file or its index is damaged: truncated, failing its checksum, or malformed."""


class MissingBlobError(SnapstoreError):
    """A manifest references a blob that is not in the blob store."""


class PathNotInSnapshotError(SnapstoreError, KeyError):
    """A path asked for is not recorded in the snapshot."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "path not in snapshot"


class UnsafePathError(SnapstoreError, ValueError):
    """A path would escape its base or target, or cannot be represented safely."""


class FormatError(SnapstoreError):
    """The storage root has an unknown or unsupported format."""


class SourceChangedError(SnapstoreError):
    """A source file kept changing while it was being read, so no stable copy was taken."""


class NotAStateSnapshotError(SnapstoreError, TypeError):
    """A file snapshot was accessed as a state value, or the other way round."""


class UnreadablePathError(SnapstoreError, OSError):
    """A path exists but cannot be recorded (permission denied, special file, bad name)."""


class RestoreError(SnapstoreError):
    """A restore failed; ``rolled_back`` says whether the target is as it was before."""

    def __init__(self, message: str, *, rolled_back: bool) -> None:
        super().__init__(message)
        self.rolled_back = rolled_back


class ReadOnlyStoreError(SnapstoreError, PermissionError):
    """This process can read the store but not write it, and the operation would write.

    Raised before anything is changed: by operations that take an exclusive lock (commits,
    deletes, sweep, gc) and when a store would have to be created. Reading (list, get, read,
    diff, verify, a dry-run restore) works on such a store; see docs/concurrency.md.
    """


class StoreNotFoundError(SnapstoreError, FileNotFoundError):
    """There is no store at the root, and it was opened with ``create=False``."""


class ExtentMapTooLargeError(UnreadablePathError):
    """A file cannot be recorded: its extent map (one row per piece) would be larger than any
    reader accepts (``MAX_MAP_BYTES``), so storing it would commit an unreadable snapshot."""


class FileTooLargeError(SnapstoreError):
    """A file with holes is too large to be read into memory whole (``SnapStore.read``): a
    restore writes it with its holes instead."""


class InvalidValueError(SnapstoreError, ValueError):
    """A metadata or state value cannot be stored (not msgpack-encodable, or the wrong type)."""


class SweepRefusedError(InvalidValueError):
    """A sweep whose ``ttl`` or ``keep_last`` would delete every file checkpoint of a session
    was not confirmed (``allow_emptying=False``); nothing was deleted. ``sessions`` names
    them."""

    def __init__(self, message: str, sessions: list[str]) -> None:
        super().__init__(message)
        self.sessions = sessions


class UnreliableLockWarning(UserWarning):
    """The store lives on a network or FUSE filesystem whose locks may not be honoured."""


class InterruptedRestoreWarning(UserWarning):
    """A restore killed part-way was found, and could not be finished or rolled back now; the
    next restore into that target tries again."""


class ObjectStoreError(SnapstoreError, OSError):
    """A request to an object store failed after its retries (a server error, throttling,
    a timeout, a dropped connection): nothing the failed call wrote is visible."""


class ConcurrentWriteError(SnapstoreError, OSError):
    """A conditional write to an object store found that another writer changed the object
    since it was read: the write was refused, and nothing of it is visible."""


class LeaseLostError(SnapstoreError, OSError):
    """A lock held on an object store as a lease was lost (not renewed in time, or taken
    over by another host after it expired): this process stops writing under it."""


class EncryptionError(SnapstoreError):
    """An encrypted store cannot be opened or its keys changed as asked (the ``encryption``
    extra is missing, its config is unknown, a store exists already unencrypted...)."""


class PasswordRequiredError(EncryptionError, PermissionError):
    """The store is encrypted and no password (or key file) was given."""


class WrongPasswordError(EncryptionError, PermissionError):
    """The password given opens none of the encrypted store's keys."""


class KeyNotFoundError(EncryptionError, KeyError):
    """No key of the encrypted store has the id given."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
