"""Every write of this version marks a store of an older format current before it writes
anything (docs/format.md, "Root layout"), so that a version that writes format 2 refuses the
store afterwards; dry runs leave the marker alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.backend.layout import FORMAT_MAJOR, FORMAT_TEXT
from snapstore.internals import repository

FORMAT_2 = "snapstore format 2\n"


def _format_2_store(root: Path, tmp_path: Path, marker_text: str = FORMAT_2) -> None:
    """A store with two checkpoints, a state value and two undo backups of session ``s``,
    whose marker then says format 2 (as an older version left it)."""
    store = SnapStore(root)
    base = tmp_path / "project"
    write_tree(base, {"a.txt": "alpha"})
    store.create("s", "one", ["."], base_dir=base)
    write_tree(base, {"a.txt": "alpha 2"})
    store.create("s", "two", ["."], base_dir=base)
    store.put_state("s", "cursor", [1])
    for _ in range(2):
        store.restore("s", "one", base)
        store.restore("s", "two", base)
    assert len(store.backups("s")) >= 2
    store.close()
    marker = root / "FORMAT"
    marker.chmod(0o644)
    marker.write_text(marker_text)


def _trim(store: SnapStore) -> None:
    repository(store).trim_backups("s", 0, lambda: ())


WRITES: dict[str, Callable[[SnapStore], object]] = {
    "delete": lambda store: store.delete("s", "one"),
    "delete_session": lambda store: store.delete_session("s"),
    "sweep": lambda store: store.sweep(keep_last=1),
    "sweep_ttl": lambda store: store.sweep(ttl=0),
    "trim_backups": _trim,
    "gc": lambda store: store.gc(),
    "upgrade": lambda store: store.upgrade(),
}


@pytest.mark.parametrize("older", [2, 3])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_marks_an_older_store_current_first(
    write: str, older: int, root: Path, tmp_path: Path
) -> None:
    _format_2_store(root, tmp_path, f"snapstore format {older}\n")
    store = SnapStore(root)
    assert store.format_version == older
    WRITES[write](store)
    assert (root / "FORMAT").read_text() == FORMAT_TEXT
    assert store.format_version == FORMAT_MAJOR
    assert store.verify().ok


DRY_RUNS: dict[str, Callable[[SnapStore], object]] = {
    "sweep": lambda store: store.sweep(keep_last=0, dry_run=True, allow_emptying=True),
    "gc": lambda store: store.gc(dry_run=True),
    "restore": lambda store: store.restore("s", "one", dry_run=True),
    "reads": lambda store: (store.list(), store.latest("s"), store.get_state("s", "cursor")),
}


@pytest.mark.parametrize("look", sorted(DRY_RUNS))
def test_a_dry_run_or_a_read_leaves_a_format_2_store_as_it_is(
    look: str, root: Path, tmp_path: Path
) -> None:
    _format_2_store(root, tmp_path)
    store = SnapStore(root)
    DRY_RUNS[look](store)
    assert (root / "FORMAT").read_text() == FORMAT_2
    assert store.format_version == 2


def test_the_marker_is_written_before_the_first_change_of_a_session(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the head is removed, so a change killed at its first write leaves the store
    marked, never changed under a format 2 marker."""
    _format_2_store(root, tmp_path)
    store = SnapStore(root)
    seen: list[str] = []
    forget = repository(store).sessions.heads.forget

    def recording(session_dir: str) -> None:
        seen.append((root / "FORMAT").read_text())
        forget(session_dir)

    monkeypatch.setattr(repository(store).sessions.heads, "forget", recording)
    store.delete("s", "two")
    assert seen == [FORMAT_TEXT]
