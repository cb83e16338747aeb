"""The undo history of a session: committing an undo backup, and trimming to its depth.

An undo backup is a create (``worktree.create.take_snapshot``) of the paths a restore is
about to change, marked ``backup_of`` so listings never take it for a checkpoint. Trimming
keeps the newest ``undo_depth`` backups and never deletes one a pending journal names (the
rollback of a killed restore needs it).
"""

from __future__ import annotations

import os

from snapstore.errors import SnapstoreError, UnsafePathError
from snapstore.logs import get_logger
from snapstore.models import SnapshotInfo
from snapstore.repo.repository import Repository
from snapstore.restore.actions import Plan
from snapstore.restore.dirhandles import open_planned
from snapstore.restore.journal import JournalDir
from snapstore.worktree.create import Request, take_snapshot

logger = get_logger(__name__)


class UndoBackups:
    """The undo backups of one repository's sessions, each session keeping ``depth``."""

    def __init__(self, repo: Repository, journals: JournalDir, depth: int) -> None:
        self.repo = repo
        self.journals = journals
        self.depth = depth

    def commit(
        self,
        session: str,
        name: str,
        restoring: str,
        plan: Plan,
        paths: list[str],
        recursive: set[str],
    ) -> SnapshotInfo:
        """Commit the undo backup ``name``: the current state of ``paths`` in the target of
        ``plan`` (those in ``recursive`` with everything below), kept before restoring
        ``restoring``. Only the directory the plan looked at is read: opened at the plan's
        locked real path without following links and checked by identity (UnsafePathError
        if it is gone or another now, or the plan saw none). The gc lock must be held
        shared."""
        if plan.real_target is None or plan.target_id is None:
            raise UnsafePathError(
                f"the restore target {plan.target} was no directory when the restore planned, "
                "so there is nothing to keep of it"
            )
        request = Request(
            session,
            name,
            plan.target,
            paths,
            {},
            shallow=frozenset(set(paths) - recursive),
            backup_of=restoring,
        )
        target_fd = open_planned(plan.real_target, None, plan.target, expected=plan.target_id)
        try:
            info, _ = take_snapshot(self.repo, request, base_fd=target_fd)
        finally:
            os.close(target_fd)
        return info

    def trim(self, session: str) -> None:
        """Keep the newest ``depth`` undo backups of the session (and any a pending journal
        names). Run after a restore succeeded: a failure here is logged, not raised, since
        the restore is done and nothing is lost (the next restore trims again)."""
        try:
            self.repo.trim_backups(
                session, self.depth, lambda: self.journals.backups_in_use(session)
            )
        except (OSError, SnapstoreError) as error:
            logger.warning("could not trim the undo backups of session %r: %s", session, error)
