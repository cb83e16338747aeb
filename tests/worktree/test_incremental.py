"""Incremental create: built from the previous checkpoint with only the reported paths
scanned, it records exactly what a full create records, reads only what it must, and makes a
full scan whenever it cannot vouch for the parent or the changes. Never a stale file: the
parent's racy files are read again even when no change is reported for them."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from helpers import edits
from helpers.trees import read_tree, write_tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snapstore import SnapStore
from snapstore.errors import SnapstoreError
from snapstore.internals import repository
from snapstore.models import SnapshotInfo
from snapstore.worktree import incremental, ingest, parentmemo, statcache
from snapstore.worktree.incremental import ChangedPaths, IncrementalReport
from snapstore.worktree.waydirs import WayDirs

OLD_NS = 1_600_000_000 * 10**9
"""A modification time far outside any racy window."""


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths (relative to the base) that ingest opened and read, in order."""
    opened: list[str] = []
    real = ingest.open_source

    def counting(path: str, dir_fd: int | None = None) -> int:
        opened.append(path.split("/p/", 1)[-1])
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", counting)
    return opened


def age(base: Path) -> None:
    """Move every modification time of the tree far into the past (out of the racy window)."""
    for directory, dirnames, filenames in os.walk(base):
        for name in [*dirnames, *filenames]:
            os.utime(os.path.join(directory, name), ns=(OLD_NS, OLD_NS), follow_symlinks=False)
    os.utime(base, ns=(OLD_NS, OLD_NS))


def make_tree(tmp_path: Path) -> Path:
    base = tmp_path / "p"
    write_tree(
        base,
        {
            "README.md": "readme\n",
            "src/app.py": "print('app')\n",
            "src/util.py": "def util(): ...\n",
            "src/pkg/mod.py": "x = 1\n",
            "docs/guide.md": "guide\n",
        },
    )
    (base / "src/link").symlink_to("app.py")
    age(base)
    return base


def rows_of(store: SnapStore, info: SnapshotInfo) -> list[tuple[Any, ...]]:
    return [tuple(entry) for entry in store.get(info.session, info.name).entries]


def header_of(info: SnapshotInfo) -> tuple[Any, ...]:
    return (info.file_count, info.total_bytes, info.roots, info.excludes, info.skipped)


def root_tree(store: SnapStore, info: SnapshotInfo) -> Any:
    """The root tree object a checkpoint's manifest names."""
    return repository(store).catalog.read(info.session, info.name).tree


class Chain:
    """Successive incremental creates of one tree, driven as a watcher drives them: each
    change set covers the time since the previous one was taken."""

    def __init__(self, store: SnapStore, base: Path, paths: list[str], **options: Any) -> None:
        self.store, self.base, self.paths, self.options = store, base, paths, options
        self.parent: SnapshotInfo | None = None
        self.since = time.monotonic_ns()
        self.count = 0

    def create(
        self,
        rescan: Iterable[str] = (),
        refresh: Iterable[str] = (),
        *,
        known: bool = True,
        parent: SnapshotInfo | bool | None = True,
        **options: Any,
    ) -> IncrementalReport:
        def changes() -> ChangedPaths | None:
            found = ChangedPaths(frozenset(rescan), frozenset(refresh), self.since)
            self.since = time.monotonic_ns()
            return found if known else None

        chosen = self.parent if parent is True else parent
        report = self.store.create_incremental(
            "s",
            "n",
            self.paths,
            base_dir=self.base,
            parent=chosen if isinstance(chosen, SnapshotInfo) else None,
            changes=changes,
            **{**self.options, **options},
        )
        self.parent = report.info
        return report

    def full(self) -> SnapshotInfo:
        self.count += 1
        return self.store.create(
            "s", f"full-{self.count}", self.paths, base_dir=self.base, **self.options
        )

    def check(self, report: IncrementalReport) -> None:
        """The incremental checkpoint records what a full create records now."""
        full = self.full()
        assert rows_of(self.store, report.info) == rows_of(self.store, full)
        assert header_of(report.info) == header_of(full)
        assert root_tree(self.store, report.info) == root_tree(self.store, full)


@pytest.fixture
def store(tmp_path: Path) -> SnapStore:
    return SnapStore(tmp_path / "store", durable=False)


def test_an_unchanged_tree_reads_nothing(store: SnapStore, tmp_path: Path, reads: list[str]):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    first = chain.create(known=False)
    assert first.scan == "full" and sorted(reads) == [
        "README.md",
        "docs/guide.md",
        "src/app.py",
        "src/pkg/mod.py",
        "src/util.py",
    ]
    reads.clear()
    second = chain.create()
    assert second.scan == "incremental" and second.reason is None
    assert (second.rescanned, second.refreshed) == (0, 0)
    assert reads == []
    chain.check(second)
    assert store.verify(deep=True).ok


def test_only_the_reported_paths_are_read(store: SnapStore, tmp_path: Path, reads: list[str]):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    (base / "src/app.py").write_text("print('edited')\n")
    (base / "src/new").mkdir()
    (base / "src/new/one.py").write_text("one\n")
    (base / "docs/guide.md").unlink()
    reads.clear()
    report = chain.create(
        rescan=["src/app.py", "src/new", "docs/guide.md"], refresh=["src", "docs"]
    )
    assert report.scan == "incremental" and report.refreshed == 2
    assert sorted(reads) == ["src/app.py", "src/new/one.py"]
    chain.check(report)
    assert store.read("s", "n", "src/new/one.py") == b"one\n"


def test_a_directory_of_many_new_files_is_merged_in_order(store: SnapStore, tmp_path: Path):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    assert incremental.INSERT_AT_MOST < 100
    write_tree(base, {f"src/many/f{index:03}.txt": f"{index}\n" for index in range(100)})
    write_tree(base, {"src/few/one.txt": "one\n"})
    report = chain.create(rescan=["src/many", "src/few"], refresh=["src"])
    assert report.scan == "incremental"
    chain.check(report)


def test_a_racy_file_of_the_parent_is_read_again_though_no_change_is_reported(
    store: SnapStore, tmp_path: Path, reads: list[str]
):
    """A rewrite within one timestamp tick keeps size and mtime; a missed event then leaves
    nothing to go by but the racy rule, which sends the file to be read again."""
    base = make_tree(tmp_path)
    (base / "src/app.py").write_text("print('AAA')\n")
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    before = os.stat(base / "src/app.py")
    (base / "src/app.py").write_text("print('BBB')\n")
    os.utime(base / "src/app.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    reads.clear()
    report = chain.create()
    assert report.scan == "incremental" and report.rescanned == 1
    assert reads == ["src/app.py"]
    assert store.read("s", "n", "src/app.py") == b"print('BBB')\n"
    chain.check(report)


def test_racy_files_are_read_while_racy_and_then_no_more(
    store: SnapStore, tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(statcache, "RACY_NS", 300_000_000)
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a", "sub/b.txt": "b"})
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    reads.clear()
    chain.create()
    assert sorted(reads) == ["a.txt", "sub/b.txt"]
    time.sleep(0.35)
    reads.clear()
    chain.create()
    assert sorted(reads) == ["a.txt", "sub/b.txt"]
    reads.clear()
    report = chain.create()
    assert reads == []
    chain.check(report)


def test_same_size_and_mtime_but_new_content_is_read_when_reported(
    store: SnapStore, tmp_path: Path, reads: list[str]
):
    """The stat cache's own case: only the ctime moved. Reported paths are read whatever
    their stat says."""
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    before = os.stat(base / "README.md")
    (base / "README.md").write_text("README\n")
    os.utime(base / "README.md", ns=(before.st_atime_ns, before.st_mtime_ns))
    reads.clear()
    report = chain.create(rescan=["README.md"])
    assert reads == ["README.md"]
    assert store.read("s", "n", "README.md") == b"README\n"
    chain.check(report)


def test_a_parent_deleted_and_collected_is_not_built_on(
    store: SnapStore, tmp_path: Path, reads: list[str]
):
    """The stat cache's 'blob gone' case: entries whose blobs gc may have deleted are never
    reused. A parent no longer committed means a full scan that reads every file."""
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    parent = chain.create(known=False).info
    store.delete("s", "n")
    assert store.gc().blobs_deleted >= 5
    reads.clear()
    report = chain.create(parent=parent)
    assert report.scan == "full" and "deleted" in (report.reason or "")
    assert len(reads) == 5
    assert store.verify(deep=True).ok
    store.restore("s", "n", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(base)


def test_a_parent_replaced_by_another_writer_is_not_built_on(store: SnapStore, tmp_path: Path):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    parent = chain.create(known=False).info
    (base / "README.md").write_text("changed, and another process checkpointed it\n")
    SnapStore(tmp_path / "store", durable=False).create("s", "n", ["."], base_dir=base)
    report = chain.create(parent=parent)
    assert report.scan == "full" and "replaced" in (report.reason or "")
    chain.check(report)


def test_a_damaged_stat_cache_does_not_matter(store: SnapStore, tmp_path: Path):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    (tmp_path / "store/cache").mkdir(exist_ok=True)
    (tmp_path / "store/cache" / statcache.cache_name(str(base))).write_bytes(b"garbage")
    (base / "src/util.py").write_text("def util(): return 1\n")
    report = chain.create(rescan=["src/util.py"])
    assert report.scan == "incremental"
    chain.check(report)


Refusal = Callable[[Chain, Path], dict[str, Any]]


def unknown_changes(chain: Chain, base: Path) -> dict[str, Any]:
    return {"known": False}


def no_parent(chain: Chain, base: Path) -> dict[str, Any]:
    return {"parent": None}


def rehash(chain: Chain, base: Path) -> dict[str, Any]:
    return {"rehash": True}


def other_exclude_option(chain: Chain, base: Path) -> dict[str, Any]:
    return {"exclude": ["*.md"]}


def ignore_file_changed_unreported(chain: Chain, base: Path) -> dict[str, Any]:
    (base / ".snapstoreignore").write_text("docs/\n")
    return {}


def changes_begin_after_the_parents_scan(chain: Chain, base: Path) -> dict[str, Any]:
    chain.since = time.monotonic_ns()
    return {}


def gitignore_moved_in(chain: Chain, base: Path) -> dict[str, Any]:
    write_tree(base / "src/vendor", {".gitignore": "*.log\n", "x.log": "log\n", "x.py": "x\n"})
    return {"rescan": ["src/vendor"], "gitignore": True}


def directory_on_the_way_replaced(chain: Chain, base: Path) -> dict[str, Any]:
    shutil.rmtree(base / "src/pkg")
    (base / "src/pkg").write_text("now a file\n")
    return {"rescan": ["src/pkg/mod.py"]}


def unrecordable_path(chain: Chain, base: Path) -> dict[str, Any]:
    return {"rescan": ["src/../README.md"]}


def test_a_directory_on_the_way_that_cannot_be_opened_means_a_full_scan(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup of a changed path fails on a directory on the way (no permission, an I/O
    error): the create scans everything instead, which records what a full create does."""
    monkeypatch.setattr(statcache, "RACY_NS", 100_000_000)
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    (base / "src/pkg/mod.py").write_text("x = 2\n")
    real_open = WayDirs.open

    def refusing(self: WayDirs, directory: str) -> int:
        if directory == "src/pkg":
            raise OSError(errno.EACCES, "Permission denied", directory)
        return real_open(self, directory)

    monkeypatch.setattr(WayDirs, "open", refusing)
    report = chain.create(rescan=["src/pkg/mod.py"])
    assert report.scan == "full"
    assert "cannot be looked in" in (report.reason or ""), report.reason
    chain.check(report)


@pytest.mark.parametrize(
    ("prepare", "reason"),
    [
        (unknown_changes, "not known"),
        (no_parent, "no checkpoint"),
        (rehash, "rehash"),
        (other_exclude_option, "exclude rules"),
        (ignore_file_changed_unreported, ".snapstoreignore"),
        (changes_begin_after_the_parents_scan, "do not cover"),
        (gitignore_moved_in, ".gitignore"),
        (directory_on_the_way_replaced, "no longer one"),
        (unrecordable_path, "cannot be recorded"),
    ],
)
def test_every_doubt_means_a_full_scan(
    store: SnapStore,
    tmp_path: Path,
    prepare: Refusal,
    reason: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """Each doubt makes a full scan that records what a full create does; the next create
    builds on it, once what the doubt wrote is out of a shortened racy window (a .gitignore
    racy for the full scan is itself a doubt for the next create)."""
    monkeypatch.setattr(statcache, "RACY_NS", 100_000_000)
    base = make_tree(tmp_path)
    gitignore = prepare is gitignore_moved_in
    chain = Chain(store, base, ["."], gitignore=gitignore)
    chain.create(known=False)
    options = prepare(chain, base)
    options.pop("gitignore", None)
    if "exclude" in options:
        chain.options["exclude"] = options.pop("exclude")
    report = chain.create(**options)
    assert report.scan == "full"
    assert reason in (report.reason or ""), report.reason
    chain.check(report)
    time.sleep(0.15)
    if gitignore:
        racy = chain.create()
        assert racy.scan == "full" and racy.reason == (
            "src/vendor/.gitignore changed, and with it what is excluded"
        )
    after = chain.create()
    assert after.scan == "incremental", after.reason
    chain.check(after)


@pytest.mark.parametrize(
    ("change", "session", "paths"),
    [("session", "other", ["."]), ("paths", "s", ["src", "README.md"])],
)
def test_a_parent_of_another_session_or_path_set_is_not_built_on(
    store: SnapStore, tmp_path: Path, change: str, session: str, paths: list[str]
):
    base = make_tree(tmp_path)
    parent = Chain(store, base, ["."]).create(known=False).info
    report = store.create_incremental(
        session,
        "n",
        paths,
        base_dir=base,
        parent=parent,
        changes=lambda: ChangedPaths(since_ns=0),
    )
    assert report.scan == "full"
    assert ("session" if change == "session" else "other paths") in (report.reason or "")


def test_a_gitignore_in_a_rescanned_tree_that_did_not_change_is_followed(
    store: SnapStore, tmp_path: Path
):
    """With gitignore, rules read from a changed directory's .gitignore cannot be trusted
    (the file may be gone): full scan; unrelated changes stay incremental."""
    base = make_tree(tmp_path)
    write_tree(base, {"src/.gitignore": "*.log\n", "src/a.log": "log\n"})
    age(base)
    chain = Chain(store, base, ["."], gitignore=True)
    chain.create(known=False)
    (base / "docs/guide.md").write_text("edited\n")
    report = chain.create(rescan=["docs/guide.md"])
    assert report.scan == "incremental"
    chain.check(report)
    shutil.rmtree(base / "src")
    report = chain.create(rescan=["src"])
    assert report.scan == "full" and "src" in (report.reason or "")
    chain.check(report)


def test_requested_paths_that_overlap_or_are_absent(store: SnapStore, tmp_path: Path):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["src", "src/pkg", "NOTES.md", "docs/guide.md"])
    chain.create(known=False)
    (base / "NOTES.md").write_text("notes\n")
    (base / "src/pkg/mod.py").write_text("x = 2\n")
    report = chain.create(rescan=["NOTES.md", "src/pkg/mod.py"])
    assert report.scan == "incremental"
    chain.check(report)
    shutil.rmtree(base / "src/pkg")
    (base / "docs/guide.md").unlink()
    report = chain.create(rescan=["src/pkg", "docs/guide.md"], refresh=["src"])
    assert report.scan == "incremental"
    chain.check(report)
    entries = {e.path: e.kind for e in store.get("s", "n").entries}
    assert entries["src/pkg"] == "absent" and entries["docs/guide.md"] == "absent"
    os.rename(base / "src", base / "src2")
    os.makedirs(base / "src/pkg")
    (base / "src/pkg/back.py").write_text("back\n")
    report = chain.create(rescan=["src", "src2"], refresh=["."])
    assert report.scan == "incremental"
    chain.check(report)


def test_a_changed_ancestor_of_a_requested_path_rescans_it(store: SnapStore, tmp_path: Path):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["src/pkg"])
    chain.create(known=False)
    os.rename(base / "src", base / "old-src")
    write_tree(base / "src/pkg", {"other.py": "other\n"})
    report = chain.create(rescan=["src", "old-src"], refresh=["."])
    assert report.scan == "incremental"
    chain.check(report)
    assert [e.path for e in store.get("s", "n").entries] == ["src/pkg", "src/pkg/other.py"]


def test_what_a_full_scan_leaves_out_a_rescan_leaves_out(store: SnapStore, tmp_path: Path):
    """Excluded paths, storage roots and restore temp files appearing in a changed
    directory are not recorded, as in a full scan."""
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."], exclude=["*.tmp", "build/"])
    chain.create(known=False)
    write_tree(base, {"src/x.tmp": "excluded\n", "build/out.o": "excluded\n"})
    SnapStore(base / "src/inner-store", durable=False)
    (base / "src/.snapstore-tmp-0123456789abcdef-0123456789abcdef").write_text("temp\n")
    (base / ".git").mkdir()
    (base / ".git/HEAD").write_text("ref\n")
    rescan = ["src/x.tmp", "build", "build/out.o", "src/inner-store", ".git/HEAD"]
    rescan += ["src/.snapstore-tmp-0123456789abcdef-0123456789abcdef", "src/inner-store/FORMAT"]
    report = chain.create(rescan=rescan, refresh=["src", "."])
    assert report.scan == "incremental"
    chain.check(report)
    recorded = {e.path for e in store.get("s", "n").entries}
    assert not {p for p in recorded if "inner-store" in p or p.endswith(".tmp") or "-tmp-" in p}


@pytest.fixture
def unreadable(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Base-relative paths ingest fails to open (permission denied), whoever runs the tests."""
    denied: set[str] = set()
    real = ingest.open_source

    def refusing(path: str, dir_fd: int | None = None) -> int:
        if path.split("/p/", 1)[-1] in denied:
            raise PermissionError(13, "Permission denied", path)
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", refusing)
    return denied


def test_skipped_paths_of_the_parent_are_tried_again(
    store: SnapStore, tmp_path: Path, unreadable: set[str]
):
    base = make_tree(tmp_path)
    unreadable.add("src/util.py")
    chain = Chain(store, base, ["."], skip_unreadable=True)
    first = chain.create(known=False)
    assert [s.path for s in first.info.skipped] == ["src/util.py"]
    report = chain.create()
    assert report.scan == "incremental" and report.rescanned == 1
    assert [s.path for s in report.info.skipped] == ["src/util.py"]
    unreadable.clear()
    report = chain.create()
    assert report.scan == "incremental" and report.info.skipped == ()
    assert store.read("s", "n", "src/util.py") == b"def util(): ...\n"
    chain.check(report)


def test_an_unreadable_changed_file_fails_as_a_full_create_would(
    store: SnapStore, tmp_path: Path, unreadable: set[str]
):
    """The create fails and commits nothing; its change set was taken, so the next create
    cannot build on the checkpoint before it, and scans everything."""
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    first = chain.create(known=False)
    unreadable.add("src/util.py")
    with pytest.raises(PermissionError):
        chain.create(rescan=["src/util.py"])
    with pytest.raises(PermissionError):
        store.create("s", "full", ["."], base_dir=base)
    assert rows_of(store, store.get("s", "n").info) == rows_of(store, first.info)
    unreadable.clear()
    report = chain.create(rescan=["src/util.py"], parent=first.info)
    assert report.scan == "full" and "do not cover" in (report.reason or "")
    chain.check(report)


def test_the_remembered_parent_is_dropped_once_built_on(store: SnapStore, tmp_path: Path):
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    first = chain.create(known=False).info
    store.create_incremental(
        "s",
        "second",
        ["."],
        base_dir=base,
        parent=first,
        changes=lambda: ChangedPaths(since_ns=0),
    )
    again = store.create_incremental(
        "s", "third", ["."], base_dir=base, parent=first, changes=lambda: ChangedPaths()
    )
    assert again.scan == "full"
    assert len(parentmemo._REMEMBERED._values) <= parentmemo.MAX_REMEMBERED


PATH_SETS = [["."], ["a", "c.txt", "b/a", "missing"]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=edits.batches(), paths=st.sampled_from(PATH_SETS))
def test_random_edits_reported_exactly_record_what_full_creates_record(
    batches: list[list[edits.Edit]], paths: list[str]
):
    """Random edit sequences, each batch reported as the change set's contract says: every
    incremental checkpoint equals a full create made right after it (which reads every file,
    trusting no stat), or both fail alike; and each builds on the one before."""
    with tempfile.TemporaryDirectory() as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setattr(statcache, "RACY_NS", -1)
        base = Path(scratch) / "p"
        edits.make_initial(base)
        store = SnapStore(Path(scratch) / "store", durable=False)
        chain = Chain(store, base, paths)
        previous_ok = chain.create(known=False).scan == "full"
        for number, batch in enumerate(batches):
            rescan: set[str] = set()
            refresh: set[str] = set()
            for edit in batch:
                changed = edits.apply(base, edit)
                if changed is not None:
                    rescan |= changed[0]
                    refresh |= changed[1]
            found = outcome(chain.create, rescan, refresh)
            full = outcome(store.create, "s", f"full-{number}", paths, base_dir=base, rehash=True)
            if isinstance(found, IncrementalReport) and isinstance(full, SnapshotInfo):
                assert found.scan == "incremental" or not previous_ok, found.reason
                assert rows_of(store, found.info) == rows_of(store, full)
                assert header_of(found.info) == header_of(full)
                assert root_tree(store, found.info) == root_tree(store, full)
                previous_ok = True
            else:
                assert type(found) is type(full), (found, full)
                previous_ok = False


def outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What ``call(*args, **kwargs)`` returned, or the snapstore error it raised."""
    try:
        return call(*args, **kwargs)
    except SnapstoreError as error:
        return error


def test_a_file_with_holes_is_carried_over_and_read_again_when_changed(
    store: SnapStore, tmp_path: Path
):
    """An unchanged file with holes keeps its extent map in a checkpoint that changes
    something else; changed, it is read again as a full create reads it."""
    base = make_tree(tmp_path)
    with open(base / "disk.img", "wb") as handle:
        handle.truncate(32 << 20)
        handle.seek(20 << 20)
        handle.write(b"data" * 1000)
    age(base)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    (base / "src/app.py").write_text("print('edited')\n")
    report = chain.create(rescan=["src/app.py"])
    assert report.scan == "incremental"
    chain.check(report)
    entry = store.get("s", "n").entry("disk.img")
    assert entry is not None and entry.size == 32 << 20
    with open(base / "disk.img", "r+b") as handle:
        handle.seek(1 << 20)
        handle.write(b"more")
    report = chain.create(rescan=["disk.img"])
    assert report.scan == "incremental"
    chain.check(report)
    assert store.read("s", "n", "disk.img") == (base / "disk.img").read_bytes()
    target = tmp_path / "out"
    store.restore("s", "n", target)
    assert read_tree(target) == read_tree(base)
    assert store.verify().ok


def test_hard_links_mean_a_full_scan(store: SnapStore, tmp_path: Path):
    """A write through one link of a file changes every link, but a watch reports only the
    name written through: a checkpoint recording link groups, or a changed file with several
    links, is never built on."""
    base = make_tree(tmp_path)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    os.link(base / "src/app.py", base / "docs/app-link.py")
    report = chain.create(rescan=["docs/app-link.py"], refresh=["docs"])
    assert report.scan == "full"
    assert report.reason == "a changed path is a file with several hard links"
    chain.check(report)
    (base / "docs/app-link.py").write_text("print('through the link')\n")
    report = chain.create(rescan=["docs/app-link.py"])
    assert report.scan == "full" and report.reason == "the previous checkpoint records hard links"
    chain.check(report)
    assert store.read("s", "n", "src/app.py") == b"print('through the link')\n"


def test_a_file_linked_from_outside_the_tree_is_looked_at_again_when_written_there(
    store: SnapStore, tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
):
    """A write through a link outside the tree changes a file of the tree, but no watch of
    the tree sees it: the parent's files with several links are looked at again whenever
    their inode changed since the parent's scan began."""
    monkeypatch.setattr(statcache, "RACY_NS", 100_000_000)
    base = make_tree(tmp_path)
    outside = tmp_path / "outside.py"
    os.link(base / "src/app.py", outside)
    age(base)
    time.sleep(0.15)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    time.sleep(0.15)
    reads.clear()
    unchanged = chain.create()
    assert unchanged.scan == "incremental" and reads == []
    outside.write_text("print('written outside')\n")
    report = chain.create()
    assert report.scan == "full", "the file was rescanned, and has several links"
    assert report.reason == "a changed path is a file with several hard links"
    assert store.read("s", "n", "src/app.py") == b"print('written outside')\n"
    chain.check(report)


@pytest.mark.parametrize("where", ["above the base", "on the way", "info/exclude"])
def test_git_rules_outside_the_checkpointed_paths_are_read_again_by_every_create(
    store: SnapStore, tmp_path: Path, where: str
):
    """No watch of the checkpointed paths sees a .gitignore above them or the repository's
    info/exclude change: every create reads those rules again, and scans everything when they
    differ from the parent's."""
    top = tmp_path / "repo"
    rules = ".git/info/exclude" if where == "info/exclude" else ".gitignore"
    write_tree(top, {".git/HEAD": "ref: main\n", "src/a.py": "a\n", "src/b.log": "b\n"})
    write_tree(top, {rules: "*.tmp\n"})
    age(top)
    base, paths = (top / "src", ["."]) if where == "above the base" else (top, ["src"])
    chain = Chain(store, base, paths)
    chain.create(known=False)
    assert chain.create().scan == "incremental"
    (top / rules).write_text("*.log\n")
    report = chain.create()
    assert report.scan == "full" and "exclude rules changed" in (report.reason or "")
    assert not any(
        path.endswith(".log") for path in {row[0] for row in rows_of(store, report.info)}
    )
    chain.check(report)


def test_the_rules_of_a_rescanned_directory_with_a_glob_name_are_not_trusted(
    store: SnapStore, tmp_path: Path
):
    """The rules a walk read from ``x*/.gitignore`` are recorded escaped (``x\\*/...``); a
    rescan of ``x*`` must still find that they came from there (the file may be gone)."""
    base = make_tree(tmp_path)
    write_tree(base, {"x*/.gitignore": "secret\n", "x*/secret": "s\n", "xyz/secret": "d\n"})
    age(base)
    chain = Chain(store, base, ["."])
    chain.create(known=False)
    (base / "x*/.gitignore").unlink()
    (base / "x*/new.txt").write_text("new\n")
    report = chain.create(rescan=["x*/new.txt", "x*"])
    assert report.scan == "full", report.reason
    chain.check(report)
    assert "x*/secret" in {row[0] for row in rows_of(store, report.info)}
