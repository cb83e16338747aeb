"""When small packs fold themselves, and how much one fold step may do.

``SnapStore(fold_threshold=N)`` or the environment variable ``SNAPSTORE_FOLD_THRESHOLD``
(the argument wins) sets how many small packs a process must see before a create starts a
fold; ``0`` or ``off`` turns automatic folding off (``gc`` still merges packs).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from snapstore.errors import InvalidValueError

if TYPE_CHECKING:
    from snapstore.format.packfile import PackIndex
    from snapstore.repo.repository import Repository

FOLD_ENV = "SNAPSTORE_FOLD_THRESHOLD"
DEFAULT_THRESHOLD = 32
SMALL_PACK_BYTES = 1 << 20
STEP_MAX_PACKS = 64
STEP_MAX_BYTES = 8 << 20


class FoldPolicy(NamedTuple):
    """``threshold`` small packs (each under ``small_bytes``) start a fold (0: never); one
    step folds at most ``max_packs`` packs and ``max_bytes`` bytes."""

    threshold: int = DEFAULT_THRESHOLD
    small_bytes: int = SMALL_PACK_BYTES
    max_packs: int = STEP_MAX_PACKS
    max_bytes: int = STEP_MAX_BYTES

    @property
    def enabled(self) -> bool:
        return self.threshold > 0


def fold_policy(threshold: int | None) -> FoldPolicy:
    """The policy for ``threshold`` (None: ``SNAPSTORE_FOLD_THRESHOLD``, else the default);
    InvalidValueError for anything but 0 (off) or an int of at least 2."""
    if threshold is None:
        text = os.environ.get(FOLD_ENV, "").strip().lower()
        if not text:
            return FoldPolicy()
        if text == "off":
            return FoldPolicy(threshold=0)
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value == 0 or value >= 2:
            return FoldPolicy(threshold=value)
        raise InvalidValueError(
            f"{FOLD_ENV} must be 0 or 'off' (no automatic folding) or a number of packs of "
            f"at least 2, got {text!r}"
        )
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int)
        or threshold in (1,)
        or (threshold < 0)
    ):
        raise InvalidValueError(
            f"fold_threshold must be 0 (no automatic folding) or an int of at least 2, "
            f"got {threshold!r}"
        )
    return FoldPolicy(threshold=threshold)


def small_packs(repo: Repository, policy: FoldPolicy) -> list[PackIndex]:
    """The packs of this process's view smaller than ``policy.small_bytes``."""
    return [i for i in repo.blobs.packs.indexes() if i.pack_size < policy.small_bytes]


def is_due(repo: Repository, policy: FoldPolicy) -> bool:
    """Whether this process's view holds at least ``policy.threshold`` small packs (asked
    after every create: here, so that the fold code is imported only when a fold runs; by
    the packs' sizes, which need no segment other processes appended loaded)."""
    if not policy.enabled:
        return False
    sizes = repo.blobs.packs.pack_sizes().values()
    return sum(1 for size in sizes if size < policy.small_bytes) >= policy.threshold
