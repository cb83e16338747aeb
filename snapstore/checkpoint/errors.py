"""The errors of the checkpoint layer; all derive from :class:`snapstore.errors.SnapstoreError`."""

from __future__ import annotations

from snapstore.errors import SnapstoreError


class CheckpointError(SnapstoreError):
    """Base class of every error the checkpoint layer raises."""


class CheckpointNotFound(CheckpointError, KeyError):
    """No checkpoint is saved under the given key."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return f"no checkpoint saved under key {self.key!r}"


class CorruptCheckpointError(CheckpointError):
    """A saved checkpoint cannot be read back; resuming from scratch instead would replay data."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(
            f"checkpoint {key!r} is corrupt: {reason} (inspect it with `snapstore checkpoint "
            f"inspect {key}`; `snapstore checkpoint reset {key}` starts over from the beginning)"
        )
        self.key = key
        self.reason = reason


class CheckpointSaveError(CheckpointError):
    """Saving a checkpoint failed; the previously saved position is still the one on disk."""

    def __init__(self, key: str, position: object) -> None:
        super().__init__(
            f"could not save checkpoint {key!r} at position {position!r}; the previous save is "
            "intact, so a restart re-processes the records since then"
        )
        self.key = key
        self.position = position


class IdentityMismatchError(CheckpointError):
    """The saved position belongs to another file (replaced, truncated or rewritten)."""

    def __init__(self, key: str, path: str, reason: str) -> None:
        super().__init__(
            f"checkpoint {key!r} was saved for another file than {path}: {reason}; refusing to "
            "resume (pass on_mismatch=MismatchPolicy.RESTART to start over from the beginning, "
            f"or run `snapstore checkpoint reset {key}`)"
        )
        self.key = key
        self.path = path
        self.reason = reason


class InvalidPositionError(CheckpointError, ValueError):
    """A source was handed a position it cannot resume from (wrong shape or out of range)."""


class RecordDecodeError(CheckpointError, ValueError):
    """A record of a file source could not be decoded (bad text encoding, CSV or JSON)."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: cannot decode the record at byte {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason
