"""What deleting a session's lock file while a writer holds it costs (docs/concurrency.md,
"Guards"): no snapshot is lost, the two take the same number, and the head left by the
writer that did not see the other's commit is believed until it is rebuilt from a listing;
``latest`` still never names a snapshot that is not there."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.trees import write_tree

from snapstore import SnapshotNotFound, SnapStore
from snapstore.format.names import dir_name
from snapstore.internals import repository


def test_a_second_writer_let_in_by_a_deleted_session_lock_loses_no_snapshot(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("base", "a", "b"):
        write_tree(tmp_path / name, {"f.txt": name})
    first, second = SnapStore(root), SnapStore(root)
    first.create("s", "base", ["."], base_dir=tmp_path / "base")
    paused, go = threading.Event(), threading.Event()
    commit = repository(first).catalog.commit

    def commit_later(*args: Any) -> bool:
        paused.set()
        assert go.wait(30)
        return commit(*args)

    monkeypatch.setattr(repository(first).catalog, "commit", commit_later)
    writer = threading.Thread(
        target=first.create, args=("s", "a", ["."]), kwargs={"base_dir": tmp_path / "a"}
    )
    writer.start()
    assert paused.wait(30)
    (root / "locks" / "sessions" / dir_name("s", "session")).unlink()
    second.create("s", "b", ["."], base_dir=tmp_path / "b")
    go.set()
    writer.join(30)

    reader = SnapStore(root)
    listed = {info.name: info for info in reader.list("s")}
    assert set(listed) == {"base", "a", "b"}
    for name in listed:
        assert reader.read("s", name, "f.txt") == name.encode()
    assert reader.latest("s").name in {"a", "b"}
    with pytest.raises(SnapshotNotFound):  # the believed head knows only base and a
        reader.resolve("s", "latest~2")
    (root / "cache" / "heads" / dir_name("s", "session")).unlink()
    assert reader.resolve("s", "latest~2") == "base"
    assert reader.verify().ok
