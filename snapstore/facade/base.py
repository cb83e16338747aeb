"""Opening a store, and what every method of the facade shares: the repository, the restores
and the fold thread, none of them public (``snapstore.internals`` reaches them for snapstore's
own tools and tests)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Self

from snapstore.backend.opening import open_backend
from snapstore.backend.seam import Backend
from snapstore.backend.secret import Secret
from snapstore.errors import InvalidValueError
from snapstore.fs.seam import LOCAL, FileSystem
from snapstore.maintenance.autofold import AutoFold
from snapstore.maintenance.foldpolicy import fold_policy
from snapstore.repo.repository import Repository
from snapstore.restore.journal import JournalDir

if TYPE_CHECKING:
    from snapstore.restore.job import RestoreJob
    from snapstore.restore.targets import TargetGuard

Progress = Callable[[int, int], None]
Duration = float | int | timedelta
DEFAULT_UNDO_DEPTH = 10


class StoreBase:
    """An open store (see ``SnapStore`` for the arguments)."""

    def __init__(
        self,
        root: str | os.PathLike[str] | Backend,
        *,
        lock_timeout: float = 30.0,
        durable: bool = True,
        fs: FileSystem | None = None,
        undo_depth: int = DEFAULT_UNDO_DEPTH,
        create: bool = True,
        fold_threshold: int | None = None,
        password: str | bytes | None = None,
        key_file: str | os.PathLike[str] | None = None,
        encrypt: bool = False,
    ) -> None:
        if isinstance(undo_depth, bool) or not isinstance(undo_depth, int) or undo_depth < 1:
            raise InvalidValueError(f"undo_depth must be a positive int, got {undo_depth!r}")
        if (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, int | float)
            or not lock_timeout >= 0
        ):
            raise InvalidValueError(
                f"lock_timeout must be a number of seconds >= 0 (math.inf: no limit), "
                f"got {lock_timeout!r}"
            )
        self._durable = durable
        self._undo_depth = undo_depth
        self._fs = fs or LOCAL
        secret = Secret.given(password, key_file, encrypt=encrypt)
        backend = open_backend(
            root, fs=self._fs, durable=durable, lock_timeout=lock_timeout, secret=secret
        )
        self._repository = Repository(backend, create=create)
        self._autofold = AutoFold(self._repository, fold_policy(fold_threshold))
        self._restore_job: RestoreJob | None = None
        self._target_guard: TargetGuard | None = None
        self._restore_job_lock = threading.Lock()
        if not self._repository.read_only and JournalDir(backend).pending():
            self._guard.recover_all()

    @property
    def _guard(self) -> TargetGuard:
        """The guard of target directories that creates and restores share (made on first
        use; a create needs it, not the rest of the restore code)."""
        with self._restore_job_lock:
            return self._guard_held()

    def _guard_held(self) -> TargetGuard:
        if self._target_guard is None:
            from snapstore.restore.targets import TargetGuard

            self._target_guard = TargetGuard(
                self._repository, self._fs, durable=self._durable, undo_depth=self._undo_depth
            )
        return self._target_guard

    @property
    def _restores(self) -> RestoreJob:
        """Restores, undos and their recovery (made on first use)."""
        with self._restore_job_lock:
            if self._restore_job is None:
                from snapstore.restore.job import RestoreJob

                self._restore_job = RestoreJob(
                    self._repository,
                    self._fs,
                    durable=self._durable,
                    undo_depth=self._undo_depth,
                    guard=self._guard_held(),
                )
            return self._restore_job

    @property
    def root(self) -> str:
        """The store's directory, or how its backend names it when it is not one here (an
        object storage URL's bucket and prefix)."""
        return self._repository.root

    @property
    def read_only(self) -> bool:
        """True if this process can read the store but not write it (creates, restores,
        deletes and maintenance raise ReadOnlyStoreError)."""
        return self._repository.read_only

    @property
    def format_version(self) -> int:
        """The major format the store's FORMAT marker names now."""
        return self._repository.format_major

    def __repr__(self) -> str:
        return f"SnapStore({self.root!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the files this object keeps open. Safe to call more than once; the store
        stays usable (it reopens what it needs). Waits for a running fold step."""
        self._autofold.join()
        self._repository.blobs.close()
        self._repository.backend.close()
