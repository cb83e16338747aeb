"""Ignore files kept by their stat signature (``ignorefiles``): an unchanged, settled file is
not read again, and any change (of its bytes at the same size and times, of its mode, a
replacement by a symlink or a FIFO) is seen at the next read; a file changed within the
racy window is read every time."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.errors import InvalidValueError
from snapstore.worktree import ignorefiles
from snapstore.worktree.excludes import read_patterns


@pytest.fixture(autouse=True)
def _nothing_kept() -> Iterator[None]:
    ignorefiles.forget_all()
    yield
    ignorefiles.forget_all()


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``ignorefiles`` opens to read."""
    opened: list[str] = []
    real = ignorefiles.open_regular_stat

    def counted(path: str, **kwargs: bool) -> tuple[int, os.stat_result]:
        opened.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(ignorefiles, "open_regular_stat", counted)
    return opened


@pytest.fixture
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled as soon as they are written (no 2 s wait in a test)."""
    monkeypatch.setattr(ignorefiles, "SETTLED_NS", 0)


def _past_the_clock_tick_of(info: os.stat_result, tmp_path: Path) -> None:
    """Wait until a file changed now gets a later change time than ``info``'s: kernels before
    6.13 give file times in ticks of 1-10 ms, and a change within the same tick keeps them."""
    probe = tmp_path / "tick-probe"
    for _ in range(1000):
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > info.st_ctime_ns:
            return
        time.sleep(0.001)
    raise AssertionError("the file system's clock did not move in a second")


def test_a_settled_unchanged_file_is_read_once(
    tmp_path: Path, opens: list[str], settled_at_once: None
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\nbuild/\n")
    assert read_patterns(str(rules)) == ["*.log", "build/"]
    assert read_patterns(str(rules)) == ["*.log", "build/"]
    assert opens == [str(rules)]


def test_a_file_within_the_racy_window_is_read_every_time(tmp_path: Path, opens: list[str]) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n")
    for _ in range(3):
        assert read_patterns(str(rules)) == ["*.log"]
    assert len(opens) == 3


def test_a_rewrite_at_the_same_size_and_times_is_seen(
    tmp_path: Path, opens: list[str], settled_at_once: None
) -> None:
    """The new bytes, the same size, the modification time put back: the change time
    (which nobody can set) still tells."""
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    before = rules.stat()
    assert read_patterns(str(rules)) == ["a.log"]
    _past_the_clock_tick_of(before, tmp_path)
    rules.write_text("b.log\n")
    os.utime(rules, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert read_patterns(str(rules)) == ["b.log"]
    assert len(opens) == 2


def test_a_file_made_unreadable_is_read_again(
    tmp_path: Path, opens: list[str], settled_at_once: None
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    assert read_patterns(str(rules)) == ["a.log"]
    _past_the_clock_tick_of(rules.stat(), tmp_path)
    rules.chmod(0o000)
    try:
        expected = ["a.log"] if os.geteuid() == 0 else []
        assert read_patterns(str(rules)) == expected
        assert len(opens) == 2
    finally:
        rules.chmod(0o644)


def test_a_file_replaced_by_a_symlink_or_a_fifo_gives_no_rules(
    tmp_path: Path, settled_at_once: None
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    assert read_patterns(str(rules)) == ["a.log"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("a.log\n")
    rules.unlink()
    rules.symlink_to(elsewhere)
    assert read_patterns(str(rules)) == []
    rules.unlink()
    os.mkfifo(rules)
    assert read_patterns(str(rules)) == []
    rules.unlink()
    assert read_patterns(str(rules)) == []


def test_a_create_after_an_edit_of_a_kept_gitignore_follows_the_new_rules(
    tmp_path: Path, store: SnapStore, settled_at_once: None
) -> None:
    """A bridge's creates: the project's ``.gitignore`` and ``.git/info/exclude`` kept
    between creates, then edited (same size) between two of them."""
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", "."], cwd=project, check=True)
    (project / ".gitignore").write_text("a.log\n")
    (project / "a.log").write_text("a")
    (project / "b.log").write_text("b")
    first = store.create("s", "one", ["b.log", ".gitignore"], base_dir=project)
    with pytest.raises(InvalidValueError, match="exclude rules leave it out"):
        store.create("s", "two", ["a.log"], base_dir=project)
    (project / ".gitignore").write_text("b.log\n")
    third = store.create("s", "three", ["a.log"], base_dir=project)
    with pytest.raises(InvalidValueError, match="exclude rules leave it out"):
        store.create("s", "four", ["b.log"], base_dir=project)
    assert "a.log" in first.excludes and "b.log" not in first.excludes
    assert "b.log" in third.excludes and "a.log" not in third.excludes
    assert {e.path for e in store.get("s", "three").entries} == {"a.log"}


def test_a_child_forked_while_another_thread_holds_the_lock_reads_on(tmp_path: Path) -> None:
    """A fork while a thread of the parent is inside the cache's lock: the child's next
    read (a miss takes the lock) does not wait for ever on the copy of a held lock."""
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with ignorefiles._kept_lock:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            status = 1
            try:
                signal.alarm(10)
                status = 0 if read_patterns(str(rules)) == ["*.log"] else 2
            finally:
                os._exit(status)
    finally:
        release.set()
        thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "the child hung on the lock (killed by its alarm)"
    assert os.WEXITSTATUS(status) == 0


def test_a_large_file_is_read_every_time(
    tmp_path: Path, opens: list[str], settled_at_once: None
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n" + "# padding\n" * (ignorefiles.MAX_KEPT_FILE_BYTES // 10 + 1))
    assert read_patterns(str(rules)) == ["*.log"]
    assert read_patterns(str(rules)) == ["*.log"]
    assert opens == [str(rules), str(rules)]


def test_another_parser_does_not_get_the_first_ones_patterns(
    tmp_path: Path, opens: list[str], settled_at_once: None
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n")
    assert read_patterns(str(rules)) == ["*.log"]
    shouted = ignorefiles.read_ignore_file(str(rules), lambda data: [data.decode().upper()], 99)
    assert shouted == ["*.LOG\n"]
    assert read_patterns(str(rules)) == ["*.log"]
    assert opens == [str(rules), str(rules)]


def test_what_is_kept_is_bounded_by_bytes(
    tmp_path: Path, opens: list[str], settled_at_once: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-running process keeps at most ``MAX_KEPT_BYTES`` of ignore files, the oldest
    going first, and its count of what it keeps stays true as copies come and go."""
    monkeypatch.setattr(ignorefiles, "MAX_KEPT_BYTES", 3 * 1000)
    files = []
    for number in range(5):
        rules = tmp_path / f"rules{number}"
        rules.write_text(f"{number}.log\n" + "#" * (1000 - 7) + "\n")
        assert rules.stat().st_size == 1000
        files.append(rules)
        assert read_patterns(str(rules)) == [f"{number}.log"]
    assert ignorefiles._kept_bytes == 3000
    assert len(ignorefiles._kept) == 3
    opens.clear()
    for rules in files[2:]:
        read_patterns(str(rules))
    assert opens == []
    read_patterns(str(files[0]))
    assert len(opens) == 1
    assert ignorefiles._kept_bytes == 3000
    ignorefiles.forget_all()
    assert ignorefiles._kept_bytes == 0


def test_a_file_changed_while_it_is_read_is_not_kept(
    tmp_path: Path, opens: list[str], settled_at_once: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes read while another process rewrote the file (at the same size) are used once,
    never kept: the next read opens the file again and sees the new rules."""
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    real_read_all = ignorefiles.read_all

    def read_then_rewrite(fd: int, size: int) -> bytes:
        data = real_read_all(fd, size)
        _past_the_clock_tick_of(rules.stat(), tmp_path)
        rules.write_text("b.log\n")
        return data

    monkeypatch.setattr(ignorefiles, "read_all", read_then_rewrite)
    assert read_patterns(str(rules)) == ["a.log"]
    monkeypatch.setattr(ignorefiles, "read_all", real_read_all)
    assert read_patterns(str(rules)) == ["b.log"]
    assert len(opens) == 2
