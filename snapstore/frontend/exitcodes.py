"""The exit codes of the ``snapstore`` command, and which error ends a run with which code.

The table is documented in docs/cli.md ("Exit codes"); scripts rely on these numbers, so a
code is never reused for another meaning. The services report the same code for an error
(``data.exit_code``, docs/protocol.md), so the table lives here, where both take it from;
``snapstore.cli.exitcodes`` names the same objects. 0, 1 and 2 keep their usual sense
(success, error, usage); the others follow restic where it has an equivalent (10: no
repository, 11: locked).
"""

from __future__ import annotations

import functools
from enum import IntEnum


class ExitCode(IntEnum):
    """How a ``snapstore`` run ended."""

    OK = 0
    """The command did everything it was asked to."""
    ERROR = 1
    """An error with no more specific code below."""
    USAGE = 2
    """Unknown command or option, bad value (an invalid name, a snapshot name prefix that fits
    several), missing argument, or ``--yes`` missing."""
    PARTIAL = 3
    """The command did part of its work and reports what it left undone."""
    NO_STORE = 10
    """There is no store at ``--root`` (and the command would not create one)."""
    LOCKED = 11
    """Another process held a store lock for longer than ``--lock-timeout``."""
    PERMISSION = 12
    """The store or a file could not be read or written for lack of permission."""
    DAMAGED = 13
    """The store's committed data is damaged (corrupt or missing manifests, blobs, packs)."""
    NOT_FOUND = 14
    """The snapshot, session, path in a snapshot, checkpoint or key asked for does not exist, or
    a path ``create --missing error`` was given does not."""
    EXISTS = 15
    """What was to be created exists already (``create --no-replace``)."""
    PASSWORD = 16
    """The store is encrypted and no password was given, the password opens none of its
    keys, or a password source (file, command) gave none."""


@functools.cache
def _codes() -> tuple[tuple[tuple[type[BaseException], ...], ExitCode], ...]:
    """Error types and their codes, most specific first (``LockTimeout`` is also an OSError).

    Built on the first error, not at import: the checkpoint and restore packages these types
    live in are not imported by a run that never needs them (``snapstore --help``)."""
    from snapstore.checkpoint.errors import CheckpointNotFound, CorruptCheckpointError
    from snapstore.errors import (
        CorruptBlobError,
        CorruptManifestError,
        InvalidNameError,
        InvalidValueError,
        KeyNotFoundError,
        LockTimeout,
        MissingBlobError,
        MissingPathError,
        PasswordRequiredError,
        PathNotInSnapshotError,
        SnapshotExistsError,
        SnapshotNotFound,
        WrongPasswordError,
    )

    return (
        ((PasswordRequiredError, WrongPasswordError), ExitCode.PASSWORD),
        ((LockTimeout,), ExitCode.LOCKED),
        ((InvalidNameError, InvalidValueError), ExitCode.USAGE),
        (
            (
                SnapshotNotFound,
                PathNotInSnapshotError,
                CheckpointNotFound,
                MissingPathError,
                KeyNotFoundError,
            ),
            ExitCode.NOT_FOUND,
        ),
        ((SnapshotExistsError,), ExitCode.EXISTS),
        (
            (CorruptManifestError, CorruptBlobError, MissingBlobError, CorruptCheckpointError),
            ExitCode.DAMAGED,
        ),
        ((PermissionError,), ExitCode.PERMISSION),
    )


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code a run that failed with ``error`` ends with (a RestoreError by the
    damage that caused it: a corrupt blob is DAMAGED whether a restore or ``cat`` met it)."""
    from snapstore.errors import RestoreError

    if isinstance(error, RestoreError) and error.__cause__ is not None:
        caused = exit_code_for(error.__cause__)
        if caused is ExitCode.DAMAGED:
            return caused
    for types, code in _codes():
        if isinstance(error, types):
            return code
    return ExitCode.ERROR
