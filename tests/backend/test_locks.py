"""Locks: timeouts name the lock, shared holders coexist, forked children never unlock."""

from __future__ import annotations

import errno
import fcntl
import math
import os
import stat
import threading
import time
from pathlib import Path

import pytest

import snapstore.backend.filelock
from snapstore import InvalidValueError, LockTimeout, SnapStore
from snapstore.backend.filelock import FileLock, is_untrusted_lock_filesystem
from snapstore.backend.lockfds import IdleLockFiles
from snapstore.internals import repository


def test_timeout_names_the_lock(root: Path, project: Path) -> None:
    store = SnapStore(root, lock_timeout=0.2)
    other = SnapStore(root, lock_timeout=0.2)
    with repository(other).sessions.lock("s").exclusive():
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="session 's'") as caught:
            store.create("s", "n", ["README.md"], base_dir=project)
        assert time.monotonic() - started < 5
    assert caught.value.lock_name == "session 's'"
    assert store.list() == []
    assert os.listdir(root / "tmp") == []


@pytest.mark.parametrize("timeout", ["5", [1]])
def test_a_timeout_that_is_not_a_number_fails_even_when_the_lock_is_free(
    tmp_path: Path, timeout: object
) -> None:
    """Found at the first lock, not only the first time the lock is busy."""
    lock = FileLock(str(tmp_path / "l"), "gc", timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(TypeError), lock.exclusive():
        pass
    with pytest.raises(TypeError), lock.shared():
        pass
    other = FileLock(str(tmp_path / "m"), "gc", timeout=1.0)
    with pytest.raises(TypeError), other.exclusive(timeout):  # type: ignore[arg-type]
        pass
    with other.exclusive():
        pass


@pytest.mark.parametrize("timeout", [float("nan"), -1, -0.5, True, "5", None])
def test_a_store_refuses_a_lock_timeout_it_could_not_keep(root: Path, timeout: object) -> None:
    """A NaN deadline is never reached (every comparison with it is false): a store opened
    with one would wait forever behind a held lock; a negative one, a bool or a non-number
    is as surely a mistake. Refused when the store is opened, before anything is made."""
    with pytest.raises(InvalidValueError, match="lock_timeout"):
        SnapStore(root, lock_timeout=timeout)  # type: ignore[arg-type]
    assert not root.exists()


@pytest.mark.parametrize("timeout", [0, 2, 0.25, math.inf])
def test_a_store_takes_any_lock_timeout_from_zero_to_no_limit(
    root: Path, project: Path, timeout: float
) -> None:
    with SnapStore(root, lock_timeout=timeout) as store:
        store.create("s", "n", ["README.md"], base_dir=project)
        assert [info.name for info in store.list("s")] == ["n"]


def test_shared_holders_coexist_and_exclude_an_exclusive_one(tmp_path: Path) -> None:
    lock = FileLock(str(tmp_path / "l"), "gc", timeout=0.1)
    with lock.shared(), lock.shared(), pytest.raises(LockTimeout), lock.exclusive():
        pass
    with lock.exclusive():
        pass


@pytest.mark.parametrize("kept", [False, True], ids=["opened", "kept-open"])
def test_threads_of_one_process_exclude_each_other(tmp_path: Path, kept: bool) -> None:
    """Also when the lock keeps its file open between holds: each holder locks a descriptor
    of its own, never one another thread holds."""
    lock = FileLock(
        str(tmp_path / "l"), "namespace", timeout=10, idle=IdleLockFiles() if kept else None
    )
    inside = 0
    worst = 0

    def work() -> None:
        nonlocal inside, worst
        for _ in range(20):
            with lock.exclusive():
                inside += 1
                worst = max(worst, inside)
                time.sleep(0.001)
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert worst == 1


def test_forked_child_does_not_release_the_parents_lock(tmp_path: Path) -> None:
    lock = FileLock(str(tmp_path / "l"), "namespace", timeout=0.1)
    probe = FileLock(str(tmp_path / "l"), "namespace", timeout=0.1)
    handle = lock._acquire(True, None)
    pid = os.fork()
    if pid == 0:
        handle.release()
        os._exit(0)
    os.waitpid(pid, 0)
    with pytest.raises(LockTimeout), probe.exclusive():
        pass
    handle.release()
    with probe.exclusive():
        pass


def test_lock_of_a_killed_process_is_released(tmp_path: Path) -> None:
    lock = FileLock(str(tmp_path / "l"), "namespace", timeout=5)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        with lock.exclusive():
            os.write(write_end, b"x")
            time.sleep(60)
        os._exit(0)
    os.read(read_end, 1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    with lock.exclusive(timeout=5):
        pass


def test_network_filesystems_are_flagged() -> None:
    assert is_untrusted_lock_filesystem("nfs4")
    assert is_untrusted_lock_filesystem("fuse.sshfs")
    assert not is_untrusted_lock_filesystem("ext4")
    assert not is_untrusted_lock_filesystem(None)


class _FailingFlock:
    """``fcntl`` as snapstore.backend.filelock uses it, except that locking a regular file (a lock
    file, not a guard directory) fails with ``errno``."""

    def __init__(self, errno_value: int) -> None:
        self.errno_value = errno_value
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(fcntl, name)

    def flock(self, fd: int, operation: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode) and not operation & fcntl.LOCK_UN:
            self.calls += 1
            raise OSError(self.errno_value, os.strerror(self.errno_value))
        fcntl.flock(fd, operation)


@pytest.mark.parametrize("errno_value", [errno.ENOLCK, errno.EBADF, errno.EOPNOTSUPP, errno.EIO])
def test_a_lock_that_cannot_be_taken_at_all_raises_at_once_naming_its_file(
    errno_value: int, root: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a LockTimeout after waiting for a holder there is not: the error, with the path,
    on the first try."""
    store = SnapStore(root, lock_timeout=2)
    failing = _FailingFlock(errno_value)
    monkeypatch.setattr(snapstore.backend.filelock, "fcntl", failing)
    with pytest.raises(OSError) as caught:
        store.create("s", "n", ["README.md"], base_dir=project)
    assert not isinstance(caught.value, LockTimeout)
    assert caught.value.errno == errno_value
    assert caught.value.filename is not None
    assert os.path.dirname(caught.value.filename).startswith(str(root / "locks"))
    assert failing.calls == 1
    monkeypatch.undo()
    assert store.list() == []


@pytest.mark.parametrize("errno_value", [errno.EWOULDBLOCK, errno.EACCES])
def test_a_lock_reported_busy_is_waited_for_then_times_out(
    errno_value: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = _FailingFlock(errno_value)
    monkeypatch.setattr(snapstore.backend.filelock, "fcntl", failing)
    lock = FileLock(str(tmp_path / "l"), "gc", timeout=0.2)
    with pytest.raises(LockTimeout, match="gc"), lock.exclusive():
        pass
    assert failing.calls > 1
