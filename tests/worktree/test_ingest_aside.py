"""Large files read aside: a file to be chunked is read on a thread of its own while the next
files are read. The snapshot is the one the calling thread alone records, a failure on that
thread is the create's failure (typed as ever, nothing committed, no thread or descriptor
left), and ``skip_unreadable`` skips such a file as any other."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from snapstore import SnapStore, SourceChangedError
from snapstore.worktree import ingest, ingestscan
from snapstore.worktree.ingest import IngestedFile

MIB = 1 << 20


def _tree(root: Path) -> Path:
    """Small files around large ones (1 to 3 MiB, chunked), in several directories."""
    tree = root / "tree"
    for directory in ("a", "b", "c"):
        (tree / directory).mkdir(parents=True)
        for index in range(6):
            (tree / directory / f"small{index}.txt").write_text(f"{directory} {index}\n" * 50)
    for index, directory in enumerate(("a", "a", "b", "c", "c")):
        line = f"large file {index} of the tree, a line of its text\n".encode()
        data = (line * (((index % 3) + 1) * MIB // len(line) + 1))[: ((index % 3) + 1) * MIB + 7]
        (tree / directory / f"large{index}.bin").write_bytes(data)
    return tree


def _reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("snapstore-read")]


def _open_in(tree: Path) -> list[str]:
    """What this process holds open in ``tree`` (its directories, its files)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == str(tree) or target.startswith(f"{tree}/"):
            found.append(target)
    return found


def _rows(store: SnapStore, name: str) -> list[tuple[str, str, int, str | None]]:
    snapshot = store.get("s", name)
    return [(e.path, e.kind, e.size, e.digest) for e in snapshot.entries]


def test_large_files_are_read_aside_and_the_snapshot_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path)
    threads_used: set[str] = set()
    real = ingestscan._read_aside

    def spying(*args: object, **kwargs: object) -> tuple[ingestscan.RecordedAdds, IngestedFile]:
        threads_used.add(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ingestscan, "_read_aside", spying)
    aside = SnapStore(tmp_path / "aside", durable=False)
    made_aside = aside.create("s", "n", ["."], base_dir=tree)
    assert threads_used and all(name.startswith("snapstore-read") for name in threads_used)
    assert _open_in(tree) == []

    monkeypatch.setattr(ingestscan, "ASIDE_HELD_BYTES", 0)  # each waited for at once
    one_at_a_time = SnapStore(tmp_path / "one-at-a-time", durable=False)
    one_at_a_time.create("s", "n", ["."], base_dir=tree)
    assert _rows(one_at_a_time, "n") == _rows(aside, "n")

    monkeypatch.setattr(ingestscan, "ASIDE_MAX_BYTES", 0)  # nothing fits: all read in place
    in_place = SnapStore(tmp_path / "in-place", durable=False)
    made_in_place = in_place.create("s", "n", ["."], base_dir=tree)
    assert _rows(aside, "n") == _rows(in_place, "n")
    assert len([row for row in _rows(aside, "n") if row[2] >= MIB]) == 5
    for path in ("a/large0.bin", "a/large1.bin", "c/large4.bin", "b/small3.txt"):
        assert aside.read("s", "n", path) == (tree / path).read_bytes()
    assert made_aside.file_count == made_in_place.file_count
    assert made_aside.total_bytes == made_in_place.total_bytes
    assert _reading_threads() == []


def _failing_on(monkeypatch: pytest.MonkeyPatch, name: str, error: BaseException) -> list[str]:
    """Make the reading of ``name`` fail with ``error`` on whichever thread reads it; returns
    the names of the threads it failed on."""
    failed_on: list[str] = []
    real = ingest.ingest_opened

    def failing(batch: object, fd: int, path: str, *args: object, **kwargs: object) -> IngestedFile:
        if os.path.basename(path) == name:
            failed_on.append(threading.current_thread().name)
            os.close(fd)
            raise error
        return real(batch, fd, path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest, "ingest_opened", failing)
    return failed_on


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.EIO, "Input/output error"),
        SourceChangedError("'c/large3.bin' kept changing while it was read (3 attempts)"),
    ],
    ids=["EIO", "changing"],
)
def test_a_failure_reading_aside_is_the_creates_and_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    tree = _tree(tmp_path)
    store = SnapStore(tmp_path / "store")
    store.create("s", "first", ["a"], base_dir=tree)
    failed_on = _failing_on(monkeypatch, "large3.bin", error)
    with pytest.raises(type(error)) as raised:
        store.create("s", "second", ["."], base_dir=tree)
    assert raised.value is error
    assert failed_on and failed_on[0].startswith("snapstore-read")
    assert [info.name for info in store.list("s")] == ["first"]
    assert os.listdir(tmp_path / "store" / "tmp") == []
    assert _reading_threads() == []
    assert _open_in(tree) == []
    monkeypatch.undo()
    store.create("s", "second", ["."], base_dir=tree)
    assert store.read("s", "second", "c/large3.bin") == (tree / "c/large3.bin").read_bytes()


def test_skip_unreadable_skips_a_file_read_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(tmp_path)
    failed_on = _failing_on(monkeypatch, "large2.bin", PermissionError(errno.EACCES, "denied"))
    store = SnapStore(tmp_path / "store", durable=False)
    info = store.create("s", "n", ["."], base_dir=tree, skip_unreadable=True)
    assert failed_on and failed_on[0].startswith("snapstore-read")
    assert [(skipped.path, skipped.error) for skipped in info.skipped] == [
        ("b/large2.bin", "denied")
    ]
    paths = [row[0] for row in _rows(store, "n")]
    assert "b/large2.bin" not in paths and "c/large4.bin" in paths and "b/small0.txt" in paths
    assert _reading_threads() == []
    assert _open_in(tree) == []
