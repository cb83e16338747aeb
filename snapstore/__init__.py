"""snapstore: a multi-process session snapshot store.

``SnapStore`` checkpoints sets of files per (session, name) and small resume values, in one
storage root that several processes share. See docs/format.md and docs/concurrency.md.

The library logs what it does under the ``snapstore`` logger (``snapstore.repo.locks``,
``snapstore.maintenance.packgc``, ...) and is silent unless the application configures logging
(``snapstore.logs``).

The public names below are imported on first use (a module ``__getattr__``), so that
``import snapstore`` and ``snapstore --version`` do not pay for the store, its locks and its
hashing: ``from snapstore import SnapStore`` works as ever, and type checkers see the real
definitions through the ``TYPE_CHECKING`` imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
"""``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers treat the name alike)."""

if TYPE_CHECKING:
    from typing import Any

    from snapstore.errors import (
        ConcurrentWriteError,
        CorruptBlobError,
        CorruptManifestError,
        EncryptionError,
        FileTooLargeError,
        FormatError,
        InvalidNameError,
        InvalidValueError,
        KeyNotFoundError,
        LeaseLostError,
        LockTimeout,
        MissingBlobError,
        NotAStateSnapshotError,
        ObjectStoreError,
        PasswordRequiredError,
        PathNotInSnapshotError,
        ReadOnlyStoreError,
        RestoreError,
        SnapshotNotFound,
        SnapstoreError,
        SourceChangedError,
        StoreNotFoundError,
        UnreliableLockWarning,
        UnsafePathError,
        WrongPasswordError,
    )
    from snapstore.models import (
        DiffReport,
        FileEntry,
        FileSlice,
        GcReport,
        RestoreReport,
        SkippedPath,
        Snapshot,
        SnapshotInfo,
        SweepReport,
        VerifyReport,
    )
    from snapstore.patch import FilePatch, Hunk, Patch
    from snapstore.store import SnapStore

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "ConcurrentWriteError",
            "CorruptBlobError",
            "CorruptManifestError",
            "EncryptionError",
            "FileTooLargeError",
            "FormatError",
            "InvalidNameError",
            "InvalidValueError",
            "KeyNotFoundError",
            "LeaseLostError",
            "LockTimeout",
            "MissingBlobError",
            "NotAStateSnapshotError",
            "ObjectStoreError",
            "PasswordRequiredError",
            "PathNotInSnapshotError",
            "ReadOnlyStoreError",
            "RestoreError",
            "SnapshotNotFound",
            "SnapstoreError",
            "SourceChangedError",
            "StoreNotFoundError",
            "UnsafePathError",
            "WrongPasswordError",
        ),
        "snapstore.errors",
    ),
    **dict.fromkeys(
        (
            "DiffReport",
            "FileEntry",
            "FileSlice",
            "GcReport",
            "RestoreReport",
            "SkippedPath",
            "Snapshot",
            "SnapshotInfo",
            "SweepReport",
            "VerifyReport",
        ),
        "snapstore.models",
    ),
    **dict.fromkeys(("FilePatch", "Hunk", "Patch"), "snapstore.patch"),
    "SnapStore": "snapstore.store",
    "UnreliableLockWarning": "snapstore.errors",
}
"""Each public name imported on first use, and the module that defines it."""


def __getattr__(name: str) -> Any:
    """Import a public name's module when the name is first used, and keep the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ConcurrentWriteError",
    "CorruptBlobError",
    "CorruptManifestError",
    "DiffReport",
    "EncryptionError",
    "FileEntry",
    "FilePatch",
    "FileSlice",
    "FileTooLargeError",
    "FormatError",
    "GcReport",
    "Hunk",
    "InvalidNameError",
    "InvalidValueError",
    "KeyNotFoundError",
    "LeaseLostError",
    "LockTimeout",
    "MissingBlobError",
    "NotAStateSnapshotError",
    "ObjectStoreError",
    "PasswordRequiredError",
    "Patch",
    "PathNotInSnapshotError",
    "ReadOnlyStoreError",
    "RestoreError",
    "RestoreReport",
    "SkippedPath",
    "SnapStore",
    "Snapshot",
    "SnapshotInfo",
    "SnapshotNotFound",
    "SnapstoreError",
    "SourceChangedError",
    "StoreNotFoundError",
    "SweepReport",
    "UnreliableLockWarning",
    "UnsafePathError",
    "VerifyReport",
    "WrongPasswordError",
    "__version__",
]
