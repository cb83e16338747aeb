"""The inside of an open ``SnapStore``, for snapstore's own tools and tests: not a public API.

A ``SnapStore`` exports no internal part; the few places that must look inside one (the
command line's session table and its count of deletions, the services' header reads, a
checkpoint root's list of damaged checkpoints, and tests that inspect or corrupt a store on
purpose) come through these functions, so that every such reach is one grep away. What they
return may change in any release; applications use the methods of ``SnapStore``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from snapstore.maintenance.autofold import AutoFold
    from snapstore.repo.repository import Repository
    from snapstore.restore.journal import JournalDir
    from snapstore.restore.targetlocks import TargetLocks
    from snapstore.store import SnapStore

__all__ = ["autofold", "journals", "repository", "target_locks"]


def repository(store: SnapStore) -> Repository:
    """The store's repository: its backend, blobs, manifests, sessions and locks."""
    return store._repository


def autofold(store: SnapStore) -> AutoFold:
    """What folds the store's small packs after its creates."""
    return store._autofold


def journals(store: SnapStore) -> JournalDir:
    """The journals of the store's restores (one while a restore runs or was killed)."""
    from snapstore.restore.journal import JournalDir

    return JournalDir(store._repository.backend)


def target_locks(store: SnapStore) -> TargetLocks:
    """The locks of the directories the store's restores write into and its creates record
    (the guard of target directories takes them; a test holds one to make others wait)."""
    from snapstore.restore.targetlocks import TargetLocks

    return TargetLocks(store._repository.backend)
