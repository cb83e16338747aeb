"""The guard keeps the lock objects of the directories it locked, a bounded number of them,
and a kept chain still makes a create wait for a restore into a directory holding its base."""

from __future__ import annotations

from pathlib import Path

import pytest

from snapstore import LockTimeout, SnapStore
from snapstore.internals import target_locks
from snapstore.restore import targetlocks


def test_kept_chains_are_bounded(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(targetlocks, "MAX_CHAINS", 4)
    store = SnapStore(root, durable=False, fold_threshold=0)
    for index in range(10):
        base = tmp_path / "bases" / f"b{index}"
        base.mkdir(parents=True)
        (base / "f.txt").write_text(f"{index}\n")
        store.create("s", None, ["f.txt"], base_dir=base)
    assert len(store._restores.guard.locks._chains) == 4


def test_a_kept_chain_still_waits_for_a_restore_into_an_ancestor(root: Path, project: Path) -> None:
    store = SnapStore(root, lock_timeout=0.3, fold_threshold=0)
    store.create("s", "one", ["."], base_dir=project / "src")  # the chain is kept now
    outside = target_locks(SnapStore(root))
    with outside.restoring(str(project.resolve())), pytest.raises(LockTimeout):
        store.create("s", "two", ["."], base_dir=project / "src")
    store.create("s", "two", ["."], base_dir=project / "src")
