"""Ignore files kept by their bytes (``ignorefiles``): every read opens the file, and a file
holding the bytes read before is not parsed again; any change of its bytes is seen at the next
read, even one that moves none of the file's times (a write through a shared mapping)."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.errors import InvalidValueError
from snapstore.worktree import excludes, ignorefiles
from snapstore.worktree.excludes import read_patterns


@pytest.fixture(autouse=True)
def _nothing_kept() -> Iterator[None]:
    ignorefiles.forget_all()
    yield
    ignorefiles.forget_all()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bytes ``read_patterns`` parses (a kept copy's are not parsed again)."""
    parsed: list[bytes] = []
    real = excludes.parse_patterns

    def counted(data: bytes) -> list[str]:
        parsed.append(data)
        return real(data)

    monkeypatch.setattr(excludes, "parse_patterns", counted)
    return parsed


def test_an_unchanged_file_is_parsed_once(tmp_path: Path, parses: list[bytes]) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\nbuild/\n")
    assert read_patterns(str(rules)) == ["*.log", "build/"]
    assert read_patterns(str(rules)) == ["*.log", "build/"]
    assert parses == [b"*.log\nbuild/\n"]


def test_a_rewrite_at_once_at_the_same_size_and_times_is_seen(
    tmp_path: Path, parses: list[bytes]
) -> None:
    """New bytes within the same tick of the file system's clock, the modification time put
    back: nothing in the file's stat need differ, its bytes do."""
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    before = rules.stat()
    assert read_patterns(str(rules)) == ["a.log"]
    rules.write_text("b.log\n")
    os.utime(rules, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert read_patterns(str(rules)) == ["b.log"]
    assert len(parses) == 2


def test_a_write_through_a_shared_mapping_is_seen(tmp_path: Path, store: SnapStore) -> None:
    """A store into a page of a shared mapping that is already dirty moves neither the
    modification nor the change time: the next create still follows the rules the file
    holds."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.log").write_text("a")
    (project / "z.log").write_text("z")
    (project / ".snapstoreignore").write_text("a.log\n")
    fd = os.open(project / ".snapstoreignore", os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as mapped:
            mapped[0:1] = b"a"  # the page is dirty and writable from here on
            store.create("s", "one", ["."], base_dir=project)
            mapped[0:1] = b"z"
            store.create("s", "two", ["."], base_dir=project)
    finally:
        os.close(fd)

    def logs(name: str) -> list[str]:
        return sorted(e.path for e in store.get("s", name).entries if e.path.endswith(".log"))

    assert (project / ".snapstoreignore").read_text() == "z.log\n"
    assert logs("one") == ["z.log"]
    assert logs("two") == ["a.log"]


def test_a_file_made_unreadable_is_read_no_more(tmp_path: Path) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    assert read_patterns(str(rules)) == ["a.log"]
    rules.chmod(0o000)
    try:
        expected = ["a.log"] if os.geteuid() == 0 else []
        assert read_patterns(str(rules)) == expected
    finally:
        rules.chmod(0o644)


def test_a_file_replaced_by_a_symlink_or_a_fifo_gives_no_rules(tmp_path: Path) -> None:
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


def test_a_file_read_through_its_directory_is_the_one_in_that_directory(tmp_path: Path) -> None:
    """Read through a descriptor of its directory: that directory swapped for a symlink to
    another since it was opened changes nothing."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("mine.log\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / ".gitignore").write_text("*\n")
    directory = os.open(tmp_path / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(tmp_path / "sub", tmp_path / "moved")
        (tmp_path / "sub").symlink_to(tmp_path / "outside")
        found = read_patterns(str(tmp_path / "sub" / ".gitignore"), in_dir=directory)
    finally:
        os.close(directory)
    assert found == ["mine.log"]


def test_a_create_after_an_edit_of_a_kept_gitignore_follows_the_new_rules(
    tmp_path: Path, store: SnapStore
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


def test_a_forked_child_counts_what_it_kept_again(tmp_path: Path) -> None:
    """A fork between a change of the kept copies and of their count (another thread's)
    leaves the child's count true: it is taken again from what the child kept."""
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n")
    read_patterns(str(rules))
    ignorefiles._kept_bytes += 1000  # as if a fork had cut a change of the count short
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0 if ignorefiles._kept_bytes == len(b"*.log\n") else 1)
    finally:
        ignorefiles._kept_bytes -= 1000
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_a_large_file_is_parsed_every_time(tmp_path: Path, parses: list[bytes]) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n" + "# padding\n" * (ignorefiles.MAX_KEPT_FILE_BYTES // 10 + 1))
    assert read_patterns(str(rules)) == ["*.log"]
    assert read_patterns(str(rules)) == ["*.log"]
    assert len(parses) == 2


def test_another_parser_does_not_get_the_first_ones_patterns(
    tmp_path: Path, parses: list[bytes]
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_text("*.log\n")
    assert read_patterns(str(rules)) == ["*.log"]
    shouted = ignorefiles.read_ignore_file(str(rules), lambda data: [data.decode().upper()], 99)
    assert shouted == ["*.LOG\n"]
    assert read_patterns(str(rules)) == ["*.log"]
    assert len(parses) == 1


def test_what_is_kept_is_bounded_by_bytes(
    tmp_path: Path, parses: list[bytes], monkeypatch: pytest.MonkeyPatch
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
    parses.clear()
    for rules in files[2:]:
        read_patterns(str(rules))
    assert parses == []
    read_patterns(str(files[0]))
    assert len(parses) == 1
    assert ignorefiles._kept_bytes == 3000
    ignorefiles.forget_all()
    assert ignorefiles._kept_bytes == 0


def test_bytes_read_while_the_file_is_rewritten_are_not_believed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes read while another process rewrote the file (at the same size) are used once;
    the next read sees the new rules."""
    rules = tmp_path / ".gitignore"
    rules.write_text("a.log\n")
    real_read_all = ignorefiles.read_all

    def read_then_rewrite(fd: int, size: int) -> bytes:
        data = real_read_all(fd, size)
        rules.write_text("b.log\n")
        return data

    monkeypatch.setattr(ignorefiles, "read_all", read_then_rewrite)
    assert read_patterns(str(rules)) == ["a.log"]
    monkeypatch.setattr(ignorefiles, "read_all", real_read_all)
    assert read_patterns(str(rules)) == ["b.log"]
