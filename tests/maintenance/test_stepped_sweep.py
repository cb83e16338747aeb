"""sweep deletes in short holds of each session's lock: a commit into the session being
swept goes through between two holds, and a victim replaced or deleted since the session was
listed is left alone."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snapstore import SnapStore
from snapstore.maintenance import sweep
from snapstore.repo.sessions import Sessions


def _fill(store: SnapStore, base: Path, session: str, count: int) -> None:
    base.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (base / "f.txt").write_text(f"version {n}\n")
        store.create(session, f"n{n}", ["."], base_dir=base)


def test_a_commit_into_the_session_being_swept_goes_through_between_holds(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "STEP_ITEMS", 1)
    store = SnapStore(root, fold_threshold=0, lock_timeout=30)
    base = tmp_path / "base"
    _fill(store, base, "s", 6)
    events: list[str] = []
    writer: list[threading.Thread] = []
    original = Sessions.changing_dir
    sweeper = threading.current_thread()

    @contextlib.contextmanager
    def recorded(self: Sessions, session_dir: str, label: str | None = None) -> Iterator[Any]:
        if threading.current_thread() is not sweeper:
            with original(self, session_dir, label) as change:
                yield change
            return
        if writer:
            writer[0].join(timeout=20)  # between two holds: the commit must get in now
        with original(self, session_dir, label) as change:
            if not writer:
                other = SnapStore(root, fold_threshold=0, lock_timeout=30)

                def commit() -> None:
                    (base / "f.txt").write_text("during the sweep\n")
                    other.create("s", "during", ["."], base_dir=base)
                    events.append("committed")

                writer.append(threading.Thread(target=commit))
                writer[0].start()
            yield change
            events.append("hold")

    monkeypatch.setattr(Sessions, "changing_dir", recorded)
    report = store.sweep(keep_last=2)
    writer[0].join()
    assert len(report.deleted) == 4
    assert events.index("committed") < len(events) - 1  # not after the last hold
    names = [info.name for info in SnapStore(root).list()]
    assert "during" in names and len(names) == 3


def test_a_victim_replaced_or_deleted_after_the_listing_is_left_alone(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SnapStore(root, fold_threshold=0)
    base = tmp_path / "base"
    _fill(store, base, "s", 5)
    original = sweep.choose_victims

    def then_change(*args: Any, **kwargs: Any) -> list[Any]:
        victims = original(*args, **kwargs)
        other = SnapStore(root, fold_threshold=0)
        (base / "f.txt").write_text("replaced\n")
        other.create("s", "n0", ["."], base_dir=base)  # a new snapshot under a victim's name
        other.delete("s", "n1")
        return victims

    monkeypatch.setattr(sweep, "choose_victims", then_change)
    report = store.sweep(keep_last=2)
    assert sorted(report.deleted) == [("s", "n2")]
    fresh = SnapStore(root)
    assert sorted(info.name for info in fresh.list()) == ["n0", "n3", "n4"]
    assert fresh.read("s", "n0", "f.txt") == b"replaced\n"


def test_sweep_of_many_sessions_holds_each_lock_briefly(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "STEP_ITEMS", 2)
    monkeypatch.setattr(sweep, "STEP_SECONDS", 60.0)  # a loaded machine does not cut a hold
    store = SnapStore(root, fold_threshold=0)
    for k in range(3):
        _fill(store, tmp_path / f"b{k}", f"s{k}", 5)
    holds: list[str] = []
    original = Sessions.changing_dir

    @contextlib.contextmanager
    def counted(self: Sessions, session_dir: str, label: str | None = None) -> Iterator[Any]:
        with original(self, session_dir, label) as change:
            holds.append(session_dir)
            yield change

    monkeypatch.setattr(Sessions, "changing_dir", counted)
    report = store.sweep(keep_last=1)
    assert len(report.deleted) == 12
    assert len(holds) == 6  # 4 victims per session, 2 per hold
    assert [i.name for i in SnapStore(root).list()] == ["n4", "n4", "n4"]
