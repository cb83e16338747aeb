"""After a restore failed part-way (an error, not a kill: ``recovery`` deals with those): put
the target back and say, in a RestoreError, whether that worked.

The order: remove the temp files the failed restore left (a path that is no directory now
holds none); put the target back from the undo backup, having first added the directories
the rollback writes into to the journal (so a rollback that is killed leaves no temp file
that no recovery would find); delete the backup; remove the journal. The journal stays
whenever something is left to do (a rollback that failed, a temp file that could not be
removed), so the next recovery finishes the job, and a RestoreError never names a backup
that is gone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import NoReturn

from snapstore.errors import RestoreError, UnsafePathError
from snapstore.restore.dirhandles import MadeTarget
from snapstore.restore.journal import Journal
from snapstore.restore.removal import remove_tree
from snapstore.restore.writer import TargetWriter


def after_failure(
    writer: TargetWriter,
    journal: Journal,
    key: str,
    existed: bool,
    error: BaseException,
    real_target: str,
    *,
    made: MadeTarget | None = None,
) -> NoReturn:
    """After the plan of ``journal``'s restore failed part-way with ``error``: put the target
    (at its real path ``real_target``) back, or remove it if the restore created it
    (``made``, the directory it made), and raise RestoreError. A target that was not there
    and that the restore did not make holds nothing it wrote (``apply_plan`` writes only in
    the directory it planned on, or made)."""
    failed = (
        f"restore of {journal.restoring!r} (session {journal.session!r}) into "
        f"{journal.target} failed: {error}"
    )
    if not existed:
        if made is not None:
            remove_made_target(
                writer,
                made,
                failed,
                error,
                left=lambda: _what_the_next_open_does(made, journal, real_target),
                last=journal.temps.marker,
            )
        _drop_journal(writer, key)
        done = "the directory it had created was removed" if made else "nothing was written"
        raise RestoreError(f"{failed}; {done}", rolled_back=True) from error
    if journal.backup is None:
        if writer.remove_temp_files(journal, real_target):
            _drop_journal(writer, key)
            raise RestoreError(
                f"{failed}; no backup was kept (backup=False), so the target may be partly "
                "restored",
                rolled_back=False,
            ) from error
        raise RestoreError(
            f"{failed}; no backup was kept (backup=False), so the target may be partly "
            "restored, and temp files (.snapstore-tmp-*) are left in it: the next restore "
            "into it (or opening the store) removes them and finishes this restore",
            rolled_back=False,
        ) from error
    try:
        clean = writer.remove_temp_files(journal, real_target)
        covered = _roll_back(writer, journal, key, real_target)
    except BaseException as rollback_error:
        with contextlib.suppress(OSError):  # the failure may have been the journal's removal
            if not writer.journals.exists(key):
                writer.journals.write(key, journal)
        raise RestoreError(
            f"{failed}; rolling back also failed ({rollback_error}); the previous state is "
            f"kept in the undo backup {journal.backup!r} of session {journal.session!r}, and "
            "the next restore into this target (or opening the store) tries again",
            rolled_back=False,
        ) from error
    if not clean:
        clean = writer.remove_temp_files(covered, real_target)
    if clean:  # else the journal stays, so that the next recovery removes them
        _drop_journal(writer, key)
        raise RestoreError(f"{failed}; the target was put back as it was", rolled_back=True) from (
            error
        )
    raise RestoreError(
        f"{failed}; the target was put back as it was, but for temp files "
        "(.snapstore-tmp-*) the next restore into it (or opening the store) removes",
        rolled_back=True,
    ) from error


def _roll_back(writer: TargetWriter, journal: Journal, key: str, real_target: str) -> Journal:
    """Put the target back from the journal's backup, then drop that backup (the target
    holds its state again, so the undo history is as it was before the restore). Returns the
    journal as it is now (covering the directories the rollback wrote into)."""
    assert journal.backup is not None
    repo = writer.repo
    saved = repo.catalog.read(journal.session, journal.backup)
    plan = writer.plan(saved, journal.target, None, True, real_target=real_target)
    covered = writer.apply_covered(journal, key, plan, keep_special_bits=True)
    repo.delete_backup(journal.session, journal.backup)
    return covered


def _drop_journal(writer: TargetWriter, key: str) -> None:
    """Remove the journal of a restore that failed and was dealt with. If that fails too
    (a second fault), the journal stays for the next recovery: after a rollback it finds
    the backup gone and only removes the journal (and temp files)."""
    with contextlib.suppress(OSError):
        writer.journals.remove(key)


def _what_the_next_open_does(made: MadeTarget, journal: Journal, real_target: str) -> str:
    """What becomes of the journal of a restore whose made directory could not be removed:
    its recovery finishes the restore there only if the target's path still leads to
    ``real_target`` (the journal is named for it) and the directory still holds the
    restore's marker."""
    try:
        if os.path.realpath(journal.target) != real_target:
            raise UnsafePathError("the target's path leads elsewhere now")
        fd = made.open()
        try:
            os.stat(journal.temps.marker, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
    except (OSError, UnsafePathError):
        return (
            "the next open of the store (or restore into it) drops this restore's journal, "
            "with a warning, and leaves the directory as it is"
        )
    return (
        "its journal is kept: the next open of the store (or restore into it) finishes "
        "this restore there"
    )


def remove_made_target(
    writer: TargetWriter,
    made: MadeTarget,
    failed: str,
    error: BaseException,
    *,
    left: Callable[[], str],
    last: str | None = None,
) -> None:
    """Remove the target a failed restore (``failed``, ``error``) made, found through the
    parent it was made in, its identity checked through the descriptor it is emptied with
    (``remove_tree``); a directory put in its place since (another identity) is not the
    restore's: left. RestoreError if it is not removed, saying what becomes of it then
    (``left``). ``last``: the restore's marker, removed last (a removal that fails or is
    killed before leaves it, so the recovery finishes the restore)."""
    try:
        removed = remove_tree(
            writer.fs, made.parent_fd, made.name, expected=made.identity, last=last
        )
    except FileNotFoundError:
        return
    except (OSError, UnsafePathError) as cleanup_error:  # a store made inside it meanwhile
        raise RestoreError(
            f"{failed}; removing the partly restored new directory also failed "
            f"({cleanup_error}); {left()}",
            rolled_back=False,
        ) from error
    if not removed:
        raise RestoreError(
            f"{failed}; the directory it had made was replaced by another, which was left as "
            f"it is; {left()}",
            rolled_back=False,
        ) from error
