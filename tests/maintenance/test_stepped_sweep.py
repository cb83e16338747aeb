"""sweep deletes in short holds of each session's lock: a commit into the session being
swept goes through between two holds, and a victim replaced or deleted since the session was
listed is left alone."""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.formatv3 import mark_format, to_old_layout
from helpers.seam import HookedFileSystem

from snapstore import SnapStore
from snapstore.backend.seam import Handle, Kind
from snapstore.internals import repository
from snapstore.maintenance import sweep
from snapstore.repo.catalog import manifest_name
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


class SlowSweepUnlinks(HookedFileSystem):
    """Every unlink of a manifest takes ``seconds`` on the clock sweep reads (``clock``),
    without sleeping; ``fsync_dir`` calls are listed by directory."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.offset = 0.0
        self.flushed: list[str] = []
        self.unlinked = 0

    def clock(self) -> float:
        return time.monotonic() + self.offset

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        if path.endswith(".manifest"):
            self.offset += self.seconds
            self.unlinked += 1
        super().unlink(path, dir_fd=dir_fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.flushed.append(path)
        super().fsync_dir(path, dir_fd=dir_fd)


@pytest.mark.parametrize("seconds", [0.0, 0.008], ids=["fast", "slow"])
def test_a_hold_ends_by_the_clock_and_flushes_its_session_once(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: float
) -> None:
    """Each hold reads the clock before each deletion (unlinks that take 8 ms each: at most
    three per hold of 20 ms, where the pace measured at the start would have planned more),
    and flushes the session's directory once, with its last deletion, not once per
    deletion. Every victim goes; the kept snapshots stay whole."""
    seam = SlowSweepUnlinks(seconds)
    monkeypatch.setattr(sweep, "monotonic", seam.clock)
    store = SnapStore(root, fs=seam, fold_threshold=0)
    base = tmp_path / "base"
    _fill(store, base, "s", 24)
    holds: list[int] = []
    original = sweep._hold

    def counted(*args: Any) -> Any:
        before = seam.unlinked
        swept = original(*args)
        holds.append(seam.unlinked - before)
        return swept

    monkeypatch.setattr(sweep, "_hold", counted)
    seam.flushed.clear()
    report = store.sweep(keep_last=4)
    assert len(report.deleted) == 20
    session_dir = session_dir_path(store)
    assert seam.flushed.count(session_dir) == len(holds)  # one flush per hold
    if seconds:
        assert max(holds) <= 3 and len(holds) >= 7
    else:
        assert len(holds) < 20
    fresh = SnapStore(root)
    assert [info.name for info in fresh.list("s")] == ["n20", "n21", "n22", "n23"]
    assert fresh.read("s", "n23", "f.txt") == b"version 23\n"


def session_dir_path(store: SnapStore) -> str:
    """Where session ``s`` keeps its manifests."""
    handle = Handle(Kind.MANIFEST, manifest_name("s", "n0"))
    return str(Path(repository(store).backend.describe(handle)).parent)


def test_a_hold_whose_last_victim_went_meanwhile_still_flushes_the_others(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hold's last deletion is the one that flushes; if its victim was deleted by
    someone else since the listing, the hold flushes the session's directory for the
    deletions before it."""
    seam = SlowSweepUnlinks(0.0)
    store = SnapStore(root, fs=seam, fold_threshold=0)
    base = tmp_path / "base"
    _fill(store, base, "s", 5)
    original = sweep.choose_victims

    def and_one_goes(*args: Any, **kwargs: Any) -> Any:
        victims = original(*args, **kwargs)
        SnapStore(root).delete("s", victims[-1].header.info.name)  # the hold's last
        return victims

    monkeypatch.setattr(sweep, "choose_victims", and_one_goes)
    seam.flushed.clear()
    report = store.sweep(keep_last=1)
    assert [name for _, name in report.deleted] == ["n0", "n1", "n2"]
    session_dir = session_dir_path(store)
    assert seam.flushed == [session_dir]


class FailingSecondUnlink(SlowSweepUnlinks):
    """The second unlink of a manifest fails with EIO; every call is logged in order."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self.log: list[tuple[str, str]] = []

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        if path.endswith(".manifest"):
            self.log.append(("unlink", path))
            if self.unlinked == 1:
                self.unlinked += 1
                raise OSError(errno.EIO, "injected", path)
        super().unlink(path, dir_fd=dir_fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.log.append(("fsync_dir", path))
        super().fsync_dir(path, dir_fd=dir_fd)


def test_a_hold_that_fails_part_way_flushes_what_it_deleted_before_raising(
    root: Path, tmp_path: Path
) -> None:
    """An error from the hold's second deletion is raised, and the first deletion is flushed
    before it is: what other processes no longer see is durably gone."""
    seam = FailingSecondUnlink()
    store = SnapStore(root, fs=seam, fold_threshold=0)
    _fill(store, tmp_path / "base", "s", 5)
    seam.log.clear()
    with pytest.raises(OSError, match="injected"):
        store.sweep(keep_last=1)
    session_dir = session_dir_path(store)
    first = seam.log.index(next(call for call in seam.log if call[0] == "unlink"))
    assert ("fsync_dir", session_dir) in seam.log[first + 1 :]
    assert [info.name for info in SnapStore(root).list("s")] == ["n1", "n2", "n3", "n4"]


def test_a_hold_over_both_layouts_flushes_the_new_layouts_deletions(
    root: Path, tmp_path: Path
) -> None:
    """A hold whose older victim is in the new layout and younger one in the old layout
    (a store converted in part) flushes the session's directory after both."""
    base = tmp_path / "base"
    writer = SnapStore(root, fold_threshold=0)
    _fill(writer, base, "s", 3)
    writer.close()
    to_old_layout(root, [("s", "n1")])
    mark_format(root, 3)
    seam = FailingSecondUnlink()
    seam.unlinked = 5  # no failure
    store = SnapStore(root, fs=seam, fold_threshold=0)
    report = store.sweep(keep_last=1)
    assert [name for _, name in report.deleted] == ["n0", "n1"]
    session_dir = session_dir_path(store)
    last_unlink = max(i for i, call in enumerate(seam.log) if call[0] == "unlink")
    assert ("fsync_dir", session_dir) in seam.log[last_unlink + 1 :]
