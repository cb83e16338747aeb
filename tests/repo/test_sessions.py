"""Sessions: snapshots numbered as they are committed, per-session commit locks, and the
session heads that spare ``latest`` and a commit a listing of the session."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.seam import CountingFileSystem

from snapstore import LockTimeout, SnapshotNotFound, SnapStore
from snapstore.backend.seam import Kind
from snapstore.format.manifest import encode
from snapstore.format.names import dir_name
from snapstore.format.times import ns_to_time
from snapstore.internals import repository
from snapstore.models import SnapshotInfo
from snapstore.repo import repository as repository_module

HOUR_NS = 3600 * 10**9


def _behind(monkeypatch: pytest.MonkeyPatch, seconds_behind: float) -> None:
    """Make the commits of this process stamp times ``seconds_behind`` in the past."""
    real = time.time_ns

    class _Clock:
        @staticmethod
        def time_ns() -> int:
            return real() - int(seconds_behind * 1e9)

    monkeypatch.setattr(repository_module, "time", _Clock)


def test_a_writer_whose_clock_runs_behind_keeps_its_newest_checkpoint(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("s", "first", ["README.md"], base_dir=project)
    _behind(monkeypatch, 3600)
    store.create("s", "second", ["README.md"], base_dir=project)
    monkeypatch.undo()
    assert store.latest("s").name == "second"
    assert [info.name for info in store.list("s")] == ["first", "second"]
    assert store.resolve("s", "latest~1") == "first"
    fresh = SnapStore(store.root)
    repository(fresh).sessions.heads.forget(dir_name("s", "session"))
    assert fresh.latest("s").name == "second"  # from a listing, too
    report = store.sweep(keep_last=1)
    assert report.deleted == [("s", "first")]
    assert [info.name for info in store.list("s")] == ["second"]


def test_a_clock_running_behind_does_not_age_a_snapshot_for_its_ttl(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _behind(monkeypatch, 7200)
    store.create("s", "recent", ["README.md"], base_dir=project, ttl=3600)
    monkeypatch.undo()
    assert store.sweep(ttl=60).deleted == []
    assert store.sweep().deleted == []  # its own expiry is aged the same way
    assert [info.name for info in store.list("s")] == ["recent"]


def test_unnumbered_snapshots_of_older_versions_come_before_numbered_ones(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "numbered", ["README.md"], base_dir=project)
    later = time.time_ns() + HOUR_NS // 2
    info = SnapshotInfo(
        session="s",
        name="old",
        kind="state",
        created_at=ns_to_time(later),
        expires_at=None,
        file_count=0,
        total_bytes=0,
        meta={},
        base_dir="",
    )
    repository(store).catalog.commit(
        "s", "old", encode(info, created_ns=later, expires_ns=None, value=1)
    )
    assert [i.name for i in store.list("s")] == ["old", "numbered"]
    store.create("s", "after", ["README.md"], base_dir=project)
    assert [i.name for i in store.list("s")] == ["old", "numbered", "after"]
    headers = {m.header.info.name: m.header.seq for m in repository(store).listing("s")}
    assert headers == {"old": 0, "numbered": 1, "after": 2}


def test_commits_into_other_sessions_do_not_wait_for_a_session_lock(
    root: Path, project: Path
) -> None:
    holder = SnapStore(root, lock_timeout=0.2)
    writer = SnapStore(root, lock_timeout=0.2)
    with repository(holder).sessions.lock("a").exclusive():
        writer.create("b", "n", ["README.md"], base_dir=project)
        writer.put_state("c", "v", 1)
        with pytest.raises(LockTimeout, match="session 'a'"):
            writer.create("a", "n", ["README.md"], base_dir=project)
        with pytest.raises(LockTimeout, match="session 'a'"):
            writer.delete("a", "n")
    assert [i.session for i in writer.list()] == ["b", "c"]


def _no_listing(store: SnapStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any listing of manifests or packs fail."""
    names, infos = repository(store).backend.names, repository(store).backend.infos

    def refuse(kind: Kind, prefix: str = "", *, infos_: bool = False) -> object:
        if kind in (Kind.MANIFEST, Kind.PACK, Kind.INDEX):
            raise AssertionError(f"listed {kind} {prefix!r}")
        return infos(kind, prefix) if infos_ else names(kind, prefix)

    monkeypatch.setattr(repository(store).backend, "names", refuse)
    monkeypatch.setattr(
        repository(store).backend, "infos", lambda k, p="": refuse(k, p, infos_=True)
    )


def test_latest_and_commits_list_neither_the_session_nor_the_packs(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(40):
        store.create("s", f"n{index:02d}", ["README.md"], base_dir=project)
    _no_listing(store, monkeypatch)
    assert store.latest("s").name == "n39"
    assert store.resolve("s", "latest~31") == "n08"
    store.create("s", "n40", ["README.md"], base_dir=project)
    assert store.latest("s").name == "n40"
    assert store.delete("s", "n40")
    assert store.latest("s").name == "n39"
    store.create("s", "n41", ["README.md"], base_dir=project)
    monkeypatch.undo()
    headers = {m.header.info.name: m.header.seq for m in repository(store).listing("s")}
    assert headers["n39"] == 40 and headers["n41"] == 42
    assert store.resolve("s", "latest~35") == "n05"  # beyond the head: listed


def test_a_head_left_by_a_writer_killed_mid_commit_is_not_believed(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("s", "one", ["README.md"], base_dir=project)
    heads = repository(store).sessions.heads
    monkeypatch.setattr(heads, "write", lambda session_dir, head: None)  # killed before it
    store.create("s", "two", ["README.md"], base_dir=project)
    monkeypatch.undo()
    assert heads.read(dir_name("s", "session")) is None
    assert store.latest("s").name == "two"
    store.create("s", "three", ["README.md"], base_dir=project)
    assert {m.header.info.name: m.header.seq for m in repository(store).listing("s")} == {
        "one": 1,
        "two": 2,
        "three": 3,
    }


def test_a_head_that_cannot_take_the_session_stamp_does_not_fail_a_committed_create(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head is written after the commit and is only a hint: an I/O error taking the
    session directory's stamp for it leaves no head, and the create reports its commit."""
    store.create("s", "one", ["README.md"], base_dir=project)
    heads = repository(store).sessions.heads
    real_write = heads.write

    def refuse(kind: Kind, prefix: str) -> None:
        raise OSError(errno.EIO, "injected", prefix)

    def write_without_stamp(session_dir: str, head: Any) -> None:
        with monkeypatch.context() as patch:
            patch.setattr(heads.backend, "listing_stamp", refuse)
            real_write(session_dir, head)

    monkeypatch.setattr(heads, "write", write_without_stamp)
    assert store.create("s", "two", ["README.md"], base_dir=project).name == "two"
    monkeypatch.undo()
    assert heads.read(dir_name("s", "session")) is None
    assert store.latest("s").name == "two"


def test_a_head_is_not_believed_once_the_session_changed_behind_its_back(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "one", ["README.md"], base_dir=project)
    store.create("s", "two", ["README.md"], base_dir=project)
    path = Path(repository(store).catalog.manifest_path("s", "two"))
    os.chmod(path, 0o644)
    path.unlink()  # an entry of the session directory: its stamp changes
    assert repository(store).sessions.head("s") is None
    assert store.latest("s").name == "one"
    with pytest.raises(SnapshotNotFound):
        store.resolve("s", "latest~1")


def test_a_head_from_before_the_machine_started_is_not_believed(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("s", "one", ["README.md"], base_dir=project)
    assert repository(store).sessions.head("s") is not None
    monkeypatch.setattr("snapstore.repo.heads._BOOT", ["another boot"])
    assert repository(store).sessions.head("s") is None
    assert store.latest("s").name == "one"


def test_undo_backups_are_trimmed_from_the_head_oldest_first(
    root: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SnapStore(root, undo_depth=2)
    store.create("s", "base", ["README.md"], base_dir=project)
    for round_ in range(4):
        (project / "README.md").write_text(f"round {round_}\n")
        store.restore("s", "base")
    names = [info.name for info in store.backups("s")]
    assert len(names) == 2
    head = repository(store).sessions.head("s")
    assert head is not None and list(head.backups) == names


def _flushes_of_one_create(store: SnapStore, fs: CountingFileSystem, project: Path, n: int) -> int:
    (project / "README.md").write_text(f"edit {n}\n")
    before = fs.trace.count("fsync") + fs.trace.count("fsync_dir")
    store.create("s", None, ["README.md", "src/app.py"], base_dir=project)
    return fs.trace.count("fsync") + fs.trace.count("fsync_dir") - before


def test_the_flushes_of_a_small_create_do_not_grow_with_history(root: Path, project: Path) -> None:
    fs = CountingFileSystem()
    store = SnapStore(root, fs=fs)
    first = _flushes_of_one_create(store, fs, project, 0)
    second = _flushes_of_one_create(store, fs, project, 1)
    for n in range(2, 40):
        _flushes_of_one_create(store, fs, project, n)
    late = _flushes_of_one_create(store, fs, project, 40)
    # sessions/ is flushed once per session and process; a create appends to the pack the
    # first one published (one flush of that file, no name)
    assert second == late <= 4 < first
    fresh = SnapStore(root, fs=fs)
    # a new process: sessions/, and packs/ for its own new pack's name (and the name of the
    # first store's pack, whose blob of src/app.py it reuses: in that pack's first segment,
    # flushed before the pack got its name, so the file needs no flush)
    assert _flushes_of_one_create(fresh, fs, project, 41) == late + 2
    unchanged = []
    for _ in range(2):  # nothing new: the first counts on a pack another store object made
        before = fs.trace.count("fsync") + fs.trace.count("fsync_dir")
        store.create("s", None, ["README.md", "src/app.py"], base_dir=project)
        unchanged.append(fs.trace.count("fsync") + fs.trace.count("fsync_dir") - before)
    # the manifest and its directory; the first also flushes sessions/ once, as another store
    # object committed into the session since its last commit, and stores README.md's blob
    # again (its own pack's file flushed): the other store object's segment holding it was
    # pending in this one's view, which its dedupe does not load (PackSet); the remembered
    # trees' check then loads it, and counts on that pack (packs/ flushed once)
    assert unchanged == [5, 2]


def _stat_with_inode(path: str, inode: int) -> os.stat_result:
    """``os.stat(path)`` as a filesystem that gave ``path`` the inode ``inode`` reports it."""
    info = os.stat(path)
    fields = {name: getattr(info, name) for name in dir(info) if name.startswith("st_")}
    return os.stat_result((info[0], inode, *tuple(info)[2:10]), fields)


def _directory_flushes(fs: CountingFileSystem, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories ``fs`` flushes from now on, in order."""
    flushed: list[str] = []
    fsync_dir = fs.fsync_dir

    def recording(path: str) -> None:
        flushed.append(os.fspath(path))
        fsync_dir(path)

    monkeypatch.setattr(fs, "fsync_dir", recording)
    return flushed


def test_a_session_directory_made_again_under_its_old_inode_is_flushed_into_sessions(
    root: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's directory removed (its last snapshot deleted) and made again by a writer
    that died before flushing ``sessions/``: a filesystem may give the new directory the old
    one's inode. A process that flushed the old directory's entry must flush ``sessions/``
    again at its next commit there, or a power cut loses that commit's snapshot."""
    fs = CountingFileSystem()
    store = SnapStore(root, fs=fs)
    store.create("s", "one", ["README.md"], base_dir=project)
    session_dir = os.path.dirname(repository(store).catalog.manifest_path("s", "one"))
    sessions_dir = os.path.dirname(session_dir)
    old_inode = os.stat(session_dir).st_ino
    for entry in os.listdir(session_dir):
        os.unlink(os.path.join(session_dir, entry))
    os.rmdir(session_dir)
    os.mkdir(session_dir)
    real_stat = os.stat

    def reused_inode(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == session_dir and not args and not kwargs:
            monkeypatch.setattr(os, "stat", real_stat)
            try:
                return _stat_with_inode(session_dir, old_inode)
            finally:
                monkeypatch.setattr(os, "stat", reused_inode)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", reused_inode)
    flushed = _directory_flushes(fs, monkeypatch)
    store.create("s", "two", ["README.md"], base_dir=project)
    assert sessions_dir in flushed


def test_a_process_own_changes_to_a_session_never_make_it_flush_sessions_again(
    root: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only another writer's change of a session directory (it may have removed and made it
    again) makes a commit flush ``sessions/`` again: a delete by the same process does not,
    whatever the filesystem clock's tick."""
    fs = CountingFileSystem()
    store = SnapStore(root, fs=fs)
    store.create("s", "one", ["README.md"], base_dir=project)
    store.create("s", "two", ["README.md"], base_dir=project)
    sessions_dir = os.path.dirname(
        os.path.dirname(repository(store).catalog.manifest_path("s", "one"))
    )
    flushed = _directory_flushes(fs, monkeypatch)
    for n in range(3):
        time.sleep(0.01)  # past a coarse clock's tick: the delete changes the change time
        assert store.delete("s", "one")
        (project / "README.md").write_text(f"edit {n}\n")
        store.create("s", "one", ["README.md"], base_dir=project)
    assert sessions_dir not in flushed


@pytest.mark.parametrize("selector", ["latest", "resolve"])
def test_latest_is_never_a_state_value_that_replaced_the_checkpoint_the_head_named(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch, selector: str
) -> None:
    """``latest`` reads the head without the session's lock: another process may replace the
    checkpoint it names by a state value of the same name before ``latest`` reads that
    snapshot. It must then look again, never answer with the state value."""
    store.create("s", "one", ["README.md"], base_dir=project)
    store.create("s", "two", ["README.md"], base_dir=project)
    sessions = repository(store).sessions
    read_head = sessions.head

    def head_then_replaced(session: str) -> object:
        head = read_head(session)
        monkeypatch.setattr(sessions, "head", read_head)
        SnapStore(store.root).put_state("s", "two", {"resume": 1})
        return head

    monkeypatch.setattr(sessions, "head", head_then_replaced)
    if selector == "latest":
        latest = store.latest("s")
        assert (latest.name, latest.kind) == ("one", "files")
    else:
        assert store.resolve("s", "latest") == "one"


def test_a_head_that_cannot_be_removed_is_never_believed_after_the_change(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change first removes the session's head. If that fails (an I/O error) and the new
    head is never written (the writer is killed), the old head must not survive the change:
    replacing a snapshot under an existing name leaves the session's directory as it was, so
    nothing else would tell the old head is stale (``latest`` would name the wrong checkpoint
    and the next commit would reuse a number)."""
    store.create("s", "one", ["README.md"], base_dir=project)
    store.create("s", "two", ["README.md"], base_dir=project)
    fs = repository(store).backend.fs
    unlink = fs.unlink

    def failing_for_heads(path: str, *, dir_fd: int | None = None) -> None:
        if f"{os.sep}heads{os.sep}" in path:
            raise OSError(errno.EIO, "injected", path)
        unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(fs, "unlink", failing_for_heads)
    monkeypatch.setattr(repository(store).sessions.heads, "write", lambda session_dir, head: None)
    with contextlib.suppress(OSError):
        store.create("s", "one", ["README.md"], base_dir=project)
    monkeypatch.undo()
    assert store.latest("s").name == repository(store).checkpoints("s")[-1].name
    store.create("s", "three", ["README.md"], base_dir=project)
    numbers = [m.header.seq for m in repository(store).listing("s")]
    assert len(numbers) == len(set(numbers))
