"""Restore: make a target directory match a snapshot, safely, undoably.

``plan`` decides what changes (reading the target, writing nothing), ``apply`` carries a plan
out through directory descriptors, ``writes`` publishes restored files in flushed batches,
``journal`` records a restore in progress, and ``job`` runs a whole restore: the target lock,
the undo backup, the journal, the rollback, and the recovery of a restore that was killed.
"""

from snapstore.restore.apply import apply_plan, remove_tree
from snapstore.restore.plan import (
    Action,
    Keep,
    PathNotInSnapshotError,
    Plan,
    complete_dirs,
    make_plan,
    select_entries,
)

__all__ = [
    "Action",
    "Keep",
    "PathNotInSnapshotError",
    "Plan",
    "apply_plan",
    "complete_dirs",
    "make_plan",
    "remove_tree",
    "select_entries",
]
