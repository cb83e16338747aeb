"""Store-level locking built on the backend's locks: readers queue behind an announced
exclusive holder (gc). The locks of directories outside the store (restore targets, create
bases) are the guard's: ``snapstore.restore.targetlocks``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from snapstore.backend.seam import Lock
from snapstore.errors import LockTimeout
from snapstore.logs import get_logger

logger = get_logger(__name__)


@contextlib.contextmanager
def shared_behind(lock: Lock, intent: Lock) -> Iterator[None]:
    """Hold ``lock`` shared, but first wait while someone holds ``intent`` exclusively: a
    process that announced it wants ``lock`` exclusively (gc) then gets it once the current
    holders finish, instead of waiting for a moment when overlapping holders leave it free.
    If the intent is held longer than the timeout, the lock is taken anyway."""
    with contextlib.ExitStack() as held:
        try:
            with intent.shared():
                held.enter_context(lock.shared())
        except LockTimeout as error:
            if error.lock_name != intent.name:
                raise
            logger.debug(
                "lock %r still announced after %g s; taking %r anyway",
                intent.name,
                intent.timeout,
                lock.name,
            )
            held.enter_context(lock.shared())
        yield


@contextlib.contextmanager
def exclusive_with_intent(lock: Lock, intent: Lock) -> Iterator[None]:
    """Hold ``lock`` exclusively, announcing it through ``intent`` while waiting for it (see
    :func:`shared_behind`)."""
    with contextlib.ExitStack() as held:
        with intent.exclusive():
            held.enter_context(lock.exclusive())
        yield
