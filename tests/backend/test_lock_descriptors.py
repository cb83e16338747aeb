"""Lock files kept open between acquisitions: a kept descriptor still notices a lock file
removed or replaced, is never shared by a parent and its forked child (threads:
test_locks::test_threads_of_one_process_exclude_each_other), and the number kept stays
bounded and goes with ``close``."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from snapstore import LockTimeout, SnapStore
from snapstore.backend import filelock, lockfds
from snapstore.backend.filelock import FileLock
from snapstore.backend.lockfds import IdleLockFiles


def _open_descriptors(*under: Path) -> int:
    """The process's open descriptors; with ``under``, only those naming a path there (what
    other tests' leftovers, closed by the cyclic collector at any moment, cannot change)."""
    names = os.listdir("/proc/self/fd")
    if not under:
        return len(names)
    prefixes = tuple(str(path.resolve()) + os.sep for path in under)
    count = 0
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        count += (target + os.sep).startswith(prefixes)
    return count


def _kept_lock(path: Path, timeout: float = 0.2) -> tuple[FileLock, IdleLockFiles]:
    """A lock that keeps its descriptor open between acquisitions, used once so that it
    holds one."""
    idle = IdleLockFiles()
    lock = FileLock(str(path), "demo", timeout, idle=idle)
    with lock.shared():
        pass
    return lock, idle


@pytest.mark.parametrize("replace", [False, True], ids=["removed", "replaced"])
def test_a_kept_descriptor_notices_its_lock_file_removed_or_replaced(
    tmp_path: Path, replace: bool
) -> None:
    path = tmp_path / "lock"
    lock, idle = _kept_lock(path)
    path.unlink()
    if replace:
        path.write_bytes(b"")
    other = FileLock(str(path), "demo", 1)  # another process's view: the file there now
    with other.exclusive(), pytest.raises(LockTimeout):  # noqa: SIM117
        with lock.shared():
            pass
    with lock.exclusive(), pytest.raises(LockTimeout), other.shared(timeout=0):
        pass
    idle.close()


def test_a_forked_child_never_shares_its_parents_kept_descriptor(tmp_path: Path) -> None:
    """The child's exclusive hold must keep the parent out: had the child locked the
    descriptor it inherited, the parent locking its own copy would share the child's lock."""
    lock, idle = _kept_lock(tmp_path / "lock")
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with lock.exclusive():
                os.write(ready_write, b"x")
                time.sleep(30)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_read, 1) == b"x"
        with pytest.raises(LockTimeout), lock.exclusive():
            pass
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_read)
        os.close(ready_write)
    with lock.exclusive():
        pass
    idle.close()


def test_a_lock_held_through_a_kept_descriptor_goes_when_its_holder_is_killed(
    tmp_path: Path,
) -> None:
    """A child forked by the holder before it locked must not keep the lock alive after the
    holder dies (it would, holding a copy of the kept descriptor)."""
    path = tmp_path / "lock"
    ready_read, ready_write = os.pipe()
    holder = os.fork()
    if holder == 0:
        try:
            lock, _ = _kept_lock(path)
            bystander = os.fork()
            if bystander == 0:
                time.sleep(30)
                os._exit(0)
            with lock.exclusive():
                os.write(ready_write, str(bystander).encode())
                time.sleep(30)
        finally:
            os._exit(0)
    bystander = int(os.read(ready_read, 32))
    os.kill(holder, signal.SIGKILL)
    os.waitpid(holder, 0)
    try:
        with FileLock(str(path), "demo", 2).exclusive(timeout=2):
            pass
    finally:
        os.kill(bystander, signal.SIGKILL)
        os.close(ready_read)
        os.close(ready_write)


def test_a_removed_lock_directory_is_made_again(root: Path, project: Path) -> None:
    store = SnapStore(root, lock_timeout=2)
    store.create("s", "one", ["."], base_dir=project)
    shutil.rmtree(root / "locks" / "sessions")
    shutil.rmtree(root / "locks" / "targets")
    store.create("s", "two", ["."], base_dir=project)
    assert [info.name for info in store.list("s")] == ["one", "two"]
    assert os.listdir(root / "locks" / "sessions")


def test_kept_descriptors_are_bounded_and_go_with_close(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lockfds, "MAX_IDLE", 8)
    bases = []
    for index in range(12):
        base = tmp_path / "bases" / f"b{index}"
        base.mkdir(parents=True)
        (base / "f.txt").write_text(f"{index}\n")
        bases.append(base)
    before = _open_descriptors(root, tmp_path)
    store = SnapStore(root, durable=False, fold_threshold=0)
    store.create("s", None, ["f.txt"], base_dir=bases[0])
    after_one = _open_descriptors(root, tmp_path)
    assert after_one > before  # the store's kept locks and open pack are counted
    for _ in range(20):
        store.create("s", None, ["f.txt"], base_dir=bases[0])
    assert _open_descriptors(root, tmp_path) == after_one
    for base in bases:
        store.create("s", None, ["f.txt"], base_dir=base)
    kept = _open_descriptors(root, tmp_path) - before
    assert kept <= 8 + 4, kept  # the kept locks, and packs and the like
    store.close()
    assert _open_descriptors(root, tmp_path) <= before


def test_a_waiter_oversleeps_a_hold_by_at_most_a_twentieth_of_its_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pause of a waiting acquisition is at most max(0.5 ms, 5% of the wait so far)
    and 50 ms: a create behind a 30 ms exclusive hold gets in within 1.5 ms of its end (with
    pauses doubling from 1 ms it could wait until 63 ms)."""
    now = [1000.0]
    pauses: list[tuple[float, float]] = []

    def fake_sleep(seconds: float) -> None:
        pauses.append((now[0] - 1000.0, seconds))
        now[0] += seconds

    monkeypatch.setattr(filelock.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(filelock.time, "sleep", fake_sleep)
    holder = FileLock(str(tmp_path / "lock"), "demo", 5)
    waiter = FileLock(str(tmp_path / "lock"), "demo", 5)
    with holder.exclusive(), pytest.raises(LockTimeout):  # noqa: SIM117
        with waiter.shared(timeout=3):
            pass
    assert pauses
    for waited, pause in pauses:
        assert pause <= max(0.0005, waited / 20) + 1e-9
        assert pause <= 0.05
    assert len(pauses) < 20 * 3 + 200  # a long wait still polls about 20 times a second
