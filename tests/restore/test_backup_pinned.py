"""An undo backup reads only the directory the restore planned on: a target swapped for a
symlink to another directory between the plan and the backup never brings that directory's
files into the store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.trees import read_tree, write_tree

import snapstore.restore.backups as backups
from snapstore import SnapStore
from snapstore.errors import RestoreError

SECRET = {"a.txt": "SECRET a", "sub/b.txt": "SECRET b", "c.txt": "SECRET c"}


def _all_stored_files(store: SnapStore) -> list[bytes]:
    """The bytes of every file every snapshot and undo backup of session ``s`` records."""
    found = []
    for info in [*store.list("s"), *store.backups("s")]:
        for entry in store.get("s", info.name).entries:
            if entry.kind == "file":
                found.append(store.read("s", info.name, entry.path))
    return found


@pytest.mark.parametrize("paths", [["."], ["a.txt", "sub"], ["sub/b.txt"]])
def test_a_target_swapped_for_a_symlink_before_its_backup_is_never_read(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paths: list[str]
) -> None:
    target = tmp_path / "target"
    elsewhere = tmp_path / "elsewhere"
    write_tree(target, {"a.txt": "a v1", "sub/b.txt": "b v1", "c.txt": "c v1"})
    write_tree(elsewhere, SECRET)
    checkpoint = store.create("s", "v1", paths, base_dir=target)
    write_tree(target, {"a.txt": "a v2", "sub/b.txt": "b v2", "c.txt": "c v2"})
    real = backups.take_snapshot

    def swap_then_back_up(*args: Any, **kwargs: Any) -> Any:
        os.rename(target, tmp_path / "target.moved")
        os.symlink(elsewhere, target)
        return real(*args, **kwargs)

    monkeypatch.setattr(backups, "take_snapshot", swap_then_back_up)
    with pytest.raises(RestoreError, match="nothing was changed"):
        store.restore("s", checkpoint.name, target)
    assert not any(b"SECRET" in data for data in _all_stored_files(store))
    assert {p: node[1] for p, node in read_tree(elsewhere).items() if node[0] == "file"} == {
        p: text.encode() for p, text in SECRET.items()
    }
    assert (tmp_path / "target.moved/a.txt").read_text() == "a v2"
