"""Resume checkpoints for pipelines and connectors, kept durably in a snapstore root.

A :class:`Checkpointer` resumes a source from its saved position and saves the position every
N records and at the end; the file sources resume by byte offset and refuse a changed file.
See docs/checkpoints.md for the resume contract.
"""

from snapstore.checkpoint.checkpointer import Checkpointer, FailurePolicy, MismatchPolicy
from snapstore.checkpoint.errors import (
    CheckpointError,
    CheckpointNotFound,
    CheckpointSaveError,
    CorruptCheckpointError,
    IdentityMismatchError,
    InvalidPositionError,
    RecordDecodeError,
)
from snapstore.checkpoint.filesources import (
    ByteOffsetSource,
    CsvSource,
    JsonLinesSource,
    LinesSource,
)
from snapstore.checkpoint.identity import FileIdentity
from snapstore.checkpoint.inspect import BUILTIN_SOURCES, ResumePlan, SourceKind, explain
from snapstore.checkpoint.persistence import (
    CHECKPOINT_SESSION,
    Checkpoint,
    CheckpointStore,
    FileCheckpointStore,
    MemoryCheckpointStore,
    RunInfo,
    default_root,
)
from snapstore.checkpoint.sources import (
    AsyncResumableSource,
    CountedSource,
    GuardedSource,
    ResumableSource,
)

__all__ = [
    "BUILTIN_SOURCES",
    "CHECKPOINT_SESSION",
    "AsyncResumableSource",
    "ByteOffsetSource",
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotFound",
    "CheckpointSaveError",
    "CheckpointStore",
    "Checkpointer",
    "CorruptCheckpointError",
    "CountedSource",
    "CsvSource",
    "FailurePolicy",
    "FileCheckpointStore",
    "FileIdentity",
    "GuardedSource",
    "IdentityMismatchError",
    "InvalidPositionError",
    "JsonLinesSource",
    "LinesSource",
    "MemoryCheckpointStore",
    "MismatchPolicy",
    "RecordDecodeError",
    "ResumableSource",
    "ResumePlan",
    "RunInfo",
    "SourceKind",
    "default_root",
    "explain",
]
