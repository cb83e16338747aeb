"""snapstore: a multi-process session snapshot store.

``SnapStore`` checkpoints sets of files per (session, name) and small resume values, in one
storage root that several processes share. See docs/format.md and docs/concurrency.md.

The library logs what it does under the ``snapstore`` logger (``snapstore.repo.locks``,
``snapstore.maintenance.packgc``, ...) and is silent unless the application configures logging.
"""

import logging

from snapstore.errors import (
    CorruptBlobError,
    CorruptManifestError,
    FormatError,
    InvalidNameError,
    InvalidValueError,
    LockTimeout,
    MissingBlobError,
    NotAStateSnapshotError,
    PathNotInSnapshotError,
    ReadOnlyStoreError,
    RestoreError,
    SnapshotNotFound,
    SnapstoreError,
    SourceChangedError,
    UnsafePathError,
)
from snapstore.models import (
    DiffReport,
    FileEntry,
    GcReport,
    RestoreReport,
    SkippedPath,
    Snapshot,
    SnapshotInfo,
    SweepReport,
    VerifyReport,
)
from snapstore.store import SnapStore, UnreliableLockWarning

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "CorruptBlobError",
    "CorruptManifestError",
    "DiffReport",
    "FileEntry",
    "FormatError",
    "GcReport",
    "InvalidNameError",
    "InvalidValueError",
    "LockTimeout",
    "MissingBlobError",
    "NotAStateSnapshotError",
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
    "SweepReport",
    "UnreliableLockWarning",
    "UnsafePathError",
    "VerifyReport",
    "__version__",
]
