"""Restore: make a target directory match a snapshot, safely, undoably.

``plan`` decides what changes (reading the target, writing nothing), ``apply`` carries a plan
out through directory descriptors, ``writes`` publishes restored files in flushed batches,
``journal`` records a restore in progress, ``job`` runs a whole restore (the target lock, the
undo backup, the journal, the rollback), and ``recovery`` finishes or rolls back a restore
that was killed.
"""
