"""Restores, undos, and what a restore would change: ``diff`` and ``patch``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from snapstore.errors import InvalidValueError
from snapstore.facade.base import Progress, StoreBase
from snapstore.format.paths import check_relative_path
from snapstore.models import DiffReport, RestoreReport

if TYPE_CHECKING:
    from snapstore.patch import Patch


class RestoringMethods(StoreBase):
    """``restore``, ``undo``, ``diff`` and ``patch`` of ``SnapStore``."""

    def restore(
        self,
        session: str,
        name: str,
        target: str | os.PathLike[str] | None = None,
        *,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None = None,
        dry_run: bool = False,
        backup: bool = True,
        keep_special_bits: bool = False,
        progress: Progress | None = None,
    ) -> RestoreReport:
        """Make ``target`` (default: the snapshot's base dir) match the snapshot.

        Only paths that differ are written. Unless ``backup=False``, what is about to be
        replaced or removed is first kept as an undo backup of the session (``undo`` puts
        it back); if any step fails the target is put back from it and RestoreError says
        whether that rollback succeeded. A journal written first lets whoever comes next
        finish or roll back a restore that was killed. Restores into one target run one at
        a time. Storage roots in the target, and paths the snapshot could not record, are
        never touched (``RestoreReport.kept``).
        """
        return self._restores.run(
            session,
            name,
            None if target is None else os.fspath(target),
            paths=_path_list(paths),
            dry_run=dry_run,
            backup=backup,
            keep_special_bits=keep_special_bits,
            progress=progress,
        )

    def undo(
        self,
        session: str,
        *,
        backup: str | None = None,
        target: str | os.PathLike[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> RestoreReport:
        """Put back what the session's newest restore replaced (or the undo backup named
        ``backup``), into the directory it was taken from unless ``target`` is given. The
        undo keeps its own backup first, so undoing twice returns to where you were.
        SnapshotNotFound if the session has no undo backup, or none named ``backup`` (a full
        name: selectors and checkpoints name no undo backup). Interrupted restores of the
        session are recovered first: the backup of a killed restore goes with its rollback."""
        return self._restores.undo(
            session,
            backup,
            None if target is None else os.fspath(target),
            dry_run=dry_run,
            progress=progress,
        )

    def diff(
        self,
        session: str,
        name: str,
        other: str | None = None,
        *,
        target: str | os.PathLike[str] | None = None,
    ) -> DiffReport:
        """What changed: from snapshot ``name`` to snapshot ``other`` of the same session, or,
        without ``other``, from ``name`` to the directory ``target`` (default: its base dir),
        as ``git diff <commit>`` reads: ``added`` is in the directory and not in the snapshot
        (a restore would remove it), ``removed`` the reverse (a restore would put it back).
        Every path is listed on its own: a directory added or removed comes with everything
        in it. ``patch`` gives the contents' unified diff."""
        if isinstance(other, os.PathLike):
            raise InvalidValueError("diff compares two snapshots; pass a directory as target=")
        from snapstore.compare import diff_entries, diff_plan  # deferred: creates never diff

        if other is not None:
            return diff_entries(
                self._repository.entries(session, name)[1],
                self._repository.entries(session, other)[1],
            )
        target_dir = None if target is None else os.fspath(target)
        return diff_plan(self._restores.dry_plan(session, name, target_dir))

    def patch(
        self,
        session: str,
        name: str,
        other: str | None = None,
        *,
        target: str | os.PathLike[str] | None = None,
        paths: Iterable[str] | None = None,
        context: int = 3,
        max_bytes: int | None = 1 << 20,
        max_file_bytes: int = 8 << 20,
    ) -> Patch:
        """The unified diff of what ``diff`` reports, read the same way: from snapshot
        ``name`` to snapshot ``other``, or, without ``other``, from ``name`` to the directory
        ``target`` (default: its base dir). ``paths``: only these paths (and below).

        Text files get hunks with ``context`` lines around each change; binary files (a NUL
        in the first 8 KiB) and files over ``max_file_bytes`` are named, not diffed. The
        text is bounded by ``max_bytes`` (None: unbounded): what does not fit is left out
        and ``Patch.truncated`` and a marker line say so. Files in the directory are read
        through real directories only, never through a symlink.

        The defaults are ``snapstore.patch``'s (``DEFAULT_CONTEXT``, ``DEFAULT_MAX_BYTES``,
        ``DEFAULT_MAX_FILE_BYTES``; a test keeps them equal), written out so that opening a
        store does not import the diff code."""
        from snapstore.compare import snapshot_patch

        if context < 0 or (max_bytes is not None and max_bytes < 0) or max_file_bytes < 0:
            raise InvalidValueError("context, max_bytes and max_file_bytes must not be negative")
        return snapshot_patch(
            self._repository,
            self._restores.dry_plan,
            session,
            name,
            other,
            target=None if target is None else os.fspath(target),
            paths=None if paths is None else [check_relative_path(p.strip("/")) for p in paths],
            context=context,
            max_bytes=max_bytes,
            max_file_bytes=max_file_bytes,
        )


def _path_list(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None,
) -> list[str] | None:
    """Paths as a list of strings; one path given alone is one path, not its characters."""
    if paths is None:
        return None
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]
