"""Restore: make a target directory match a snapshot, safely, undoably.

``plan`` decides what changes (reading the target, writing nothing), ``apply`` carries a plan
out through directory descriptors, ``writes`` publishes restored files in flushed batches,
``journal`` records a restore in progress, ``job`` runs a whole restore (the target lock, the
undo backup, the journal, the rollback), and ``recovery`` finishes or rolls back a restore
that was killed.
"""

from snapstore.errors import PathNotInSnapshotError
from snapstore.format.paths import select_entries
from snapstore.restore.actions import Action, Keep, Plan
from snapstore.restore.apply import apply_plan, remove_tree
from snapstore.restore.plan import complete_dirs, make_plan

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
