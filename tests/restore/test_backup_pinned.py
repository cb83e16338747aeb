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
import snapstore.restore.plan as plan
from snapstore import SnapStore
from snapstore.errors import RestoreError, SnapstoreError

SECRET = {"a.txt": "SECRET a", "sub/b.txt": "SECRET b", "c.txt": "SECRET c"}


def _all_stored_files(store: SnapStore) -> list[bytes]:
    """The bytes of every file every snapshot and undo backup of session ``s`` records."""
    found = []
    for info in [*store.list("s"), *store.backups("s")]:
        for entry in store.get("s", info.name).entries:
            if entry.kind == "file":
                found.append(store.read("s", info.name, entry.path))
    return found


@pytest.mark.parametrize("moment", ["before the backup opens it", "while the backup reads it"])
@pytest.mark.parametrize("paths", [["."], ["a.txt", "sub"], ["sub/b.txt"]])
def test_a_target_swapped_for_a_symlink_after_the_plan_is_never_read(
    store: SnapStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    paths: list[str],
    moment: str,
) -> None:
    """Swapped before the backup opens the target: the restore fails with nothing changed.
    Swapped once it holds it open: the backup reads the directory it opened (moved aside),
    and the restore, which finds a symlink where its target was, fails."""
    target = tmp_path / "target"
    elsewhere = tmp_path / "elsewhere"
    write_tree(target, {"a.txt": "a v1", "sub/b.txt": "b v1", "c.txt": "c v1"})
    write_tree(elsewhere, SECRET)
    checkpoint = store.create("s", "v1", paths, base_dir=target)
    write_tree(target, {"a.txt": "a v2", "sub/b.txt": "b v2", "c.txt": "c v2"})
    swapped_at = "open_planned" if moment == "before the backup opens it" else "take_snapshot"
    real = getattr(backups, swapped_at)

    def swap_then_call(*args: Any, **kwargs: Any) -> Any:
        os.rename(target, tmp_path / "target.moved")
        os.symlink(elsewhere, target)
        return real(*args, **kwargs)

    monkeypatch.setattr(backups, swapped_at, swap_then_call)
    with pytest.raises(RestoreError) as failed:
        store.restore("s", checkpoint.name, target)
    if moment == "before the backup opens it":
        assert "nothing was changed" in str(failed.value)
        assert store.backups("s") == []
    else:
        (kept,) = store.backups("s")
        assert {
            store.read("s", kept.name, e.path)
            for e in store.get("s", kept.name).entries
            if e.kind == "file"
        } <= {b"a v2", b"b v2", b"c v2"}
    assert not any(b"SECRET" in data for data in _all_stored_files(store))
    assert {p: node[1] for p, node in read_tree(elsewhere).items() if node[0] == "file"} == {
        p: text.encode() for p, text in SECRET.items()
    }
    assert (tmp_path / "target.moved/a.txt").read_text() == "a v2"


@pytest.mark.parametrize("seen_by_the_plan", ["the other directory", "a file"])
def test_a_target_swapped_for_a_symlink_before_the_plan_is_never_backed_up(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen_by_the_plan: str
) -> None:
    """The target's real path is resolved and locked, then the target is swapped for a
    symlink to another directory before the plan looks at it (or the plan finds a file
    there, which becomes that symlink just after): the backup opens the locked real path
    without following links, so the restore fails, nothing of the other directory stored."""
    target = tmp_path / "target"
    elsewhere = tmp_path / "elsewhere"
    write_tree(target, {"a.txt": "a v1"})
    write_tree(elsewhere, SECRET)
    checkpoint = store.create("s", "v1", ["."], base_dir=target)
    write_tree(target, {"a.txt": "a v2"})
    real = plan._directory_id
    looked: list[str] = []

    def swap_then_look(path: str) -> Any:
        if looked:
            return real(path)
        looked.append(path)
        os.rename(target, tmp_path / "target.moved")
        if seen_by_the_plan == "a file":
            target.write_text("a file")
            found = real(path)
            os.unlink(target)
        os.symlink(elsewhere, target)
        return found if seen_by_the_plan == "a file" else real(path)

    monkeypatch.setattr(plan, "_directory_id", swap_then_look)
    with pytest.raises(SnapstoreError):
        store.restore("s", checkpoint.name, target)
    assert looked, "the plan did not look at the target"
    assert not any(b"SECRET" in data for data in _all_stored_files(store))
    assert (tmp_path / "target.moved/a.txt").read_text() == "a v2"
