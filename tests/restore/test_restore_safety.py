"""Restores that must never lose data: nested stores, backups kept apart from checkpoints,
skipped special files, deep trees, undecodable names, concurrent restores, skewed clocks."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import socket
import time
from pathlib import Path

import pytest
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.errors import LockTimeout, RestoreError, UnsafePathError
from snapstore.internals import target_locks


def test_a_restore_never_removes_the_store_nor_another_store_inside_the_target(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    write_tree(project, {"README.md": "# p\n", "src/app.py": "print(1)\n"})
    SnapStore(tmp_path / "store").create("s", "before-tools", ["."], base_dir=project)
    (project / ".tools").mkdir()
    os.rename(tmp_path / "store", project / ".tools" / "snapstore")  # the user moves it
    (project / ".tools" / "other-tool.cfg").write_text("cfg")
    other = SnapStore(project / "vendor" / "deep" / "otherstore")
    other.put_state("c", "cursor", 7)
    store = SnapStore(project / ".tools" / "snapstore")

    report = store.restore("s", "before-tools")

    assert store.list("s")[0].name == "before-tools"
    assert store.verify(deep=True).ok
    assert SnapStore(project / "vendor" / "deep" / "otherstore").get_state("c", "cursor") == 7
    assert not (project / ".tools" / "other-tool.cfg").exists()  # not a store: removed
    assert ".tools/snapstore" in report.kept and "vendor/deep/otherstore" in report.kept
    assert report.backup is not None
    store.undo("s")
    assert (project / ".tools" / "other-tool.cfg").read_text() == "cfg"


def test_no_store_root_is_ever_snapshotted(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write_tree(project, {"a.txt": "a"})
    store = SnapStore(project / ".snapstore")
    SnapStore(project / "sub" / "nested").put_state("x", "y", 1)
    info = store.create("s", "n", ["."], base_dir=project)
    paths = {entry.path for entry in store.get("s", info.name).entries}
    assert paths == {"a.txt", "sub"}
    for inside in (".snapstore/blobs", "sub/nested", "sub/nested/sessions"):
        with pytest.raises(UnsafePathError, match="snapstore root"):
            store.create("s", "bad", [inside], base_dir=project)
    with pytest.raises(UnsafePathError, match="snapstore root"):
        store.create("s", "bad", ["."], base_dir=project / "sub" / "nested")
    with pytest.raises(UnsafePathError, match="snapstore root"):
        store.restore("s", "n", project / ".snapstore" / "tmp")
    with pytest.raises(UnsafePathError, match="snapstore root"):
        store.restore("s", "n", project / "sub" / "nested")


def test_a_directory_to_replace_that_holds_a_store_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write_tree(project, {"data": "a file, in the snapshot"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=project)
    (project / "data").unlink()
    SnapStore(project / "data" / "store").put_state("x", "y", 1)
    with pytest.raises(UnsafePathError, match="nothing was written"):
        store.restore("s", "n")
    assert SnapStore(project / "data" / "store").get_state("x", "y") == 1


def test_backups_are_not_checkpoints(store: SnapStore, project: Path) -> None:
    store.create("s", "a", ["."], base_dir=project)
    (project / "README.md").write_text("b")
    store.create("s", "b", ["."], base_dir=project)
    (project / "README.md").write_text("my edits")
    report = store.restore("s", "a")
    assert report.backup is not None
    assert [info.name for info in store.list("s")] == ["a", "b"]
    assert store.latest("s").name == "b"
    assert store.get("s", "latest").info.name == "b"
    assert store.get("s", "latest~1").info.name == "a"
    assert [info.backup_of for info in store.backups("s")] == ["a"]
    report = store.sweep(keep_last=1)
    assert report.deleted == [("s", "a")]
    assert [info.name for info in store.list("s")] == ["b"]
    store.undo("s")
    assert (project / "README.md").read_text() == "my edits"
    assert store.sessions() == ["s"]


def test_latest_selector_errors(store: SnapStore, project: Path) -> None:
    from snapstore.errors import InvalidNameError, SnapshotNotFound

    with pytest.raises(SnapshotNotFound):
        store.latest("nothing")
    store.put_state("s", "cursor", 1)
    with pytest.raises(SnapshotNotFound):
        store.latest("s")  # a state value is not a checkpoint
    store.create("s", "run-1", ["."], base_dir=project)
    store.create("s", "run-2", ["."], base_dir=project)
    with pytest.raises(SnapshotNotFound):
        store.get("s", "latest~2")
    with pytest.raises(SnapshotNotFound):
        store.get("s", "run")  # no prefixes in the library: a deleted name means nothing
    with pytest.raises(InvalidNameError, match="start of 2"):
        store.resolve("s", "run", prefix=True)
    store.delete("s", "run-1")
    assert store.resolve("s", "run", prefix=True) == "run-2"


def test_the_undo_history_is_bounded(tmp_path: Path, project: Path) -> None:
    store = SnapStore(tmp_path / "store", undo_depth=3)
    store.create("s", "cp", ["."], base_dir=project)
    for round_ in range(5):
        (project / "README.md").write_text(f"edit {round_}")
        store.restore("s", "cp")
    assert len(store.backups("s")) == 3
    store.undo("s")
    assert (project / "README.md").read_text() == "edit 4"
    with pytest.raises(ValueError, match="undo_depth"):
        SnapStore(tmp_path / "store", undo_depth=0)


def test_skipped_special_files_are_left_alone_by_restores(store: SnapStore, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write_tree(project, {"a.txt": "a", "run/keep.txt": "k"})
    os.mkfifo(project / "run" / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(project / "run" / "sock"))
    try:
        info = store.create("s", "n", ["."], base_dir=project, skip_unreadable=True)
        assert {skipped.path for skipped in info.skipped} == {"run/pipe", "run/sock"}
        (project / "a.txt").write_text("changed")
        report = store.restore("s", "n")
        assert (project / "a.txt").read_text() == "a"
        assert sorted(report.kept) == ["run/pipe", "run/sock"]
        store.restore("s", "n", backup=False)
        assert (project / "run" / "pipe").exists() and (project / "run" / "sock").exists()
        os.mkfifo(project / "later-fifo")  # not in the snapshot either: still left alone
        assert "later-fifo" in store.restore("s", "n").kept
        assert (project / "later-fifo").exists()
    finally:
        server.close()


def test_a_special_file_at_a_recorded_path_is_replaced_and_not_reported_kept(
    store: SnapStore, tmp_path: Path
) -> None:
    """The snapshot records a file where the target now holds a FIFO: the restore puts the
    file back, and the report does not call the path left alone."""
    project = tmp_path / "proj"
    write_tree(project, {"a.txt": "a", "b.txt": "b"})
    store.create("s", "n", ["."], base_dir=project)
    (project / "a.txt").unlink()
    os.mkfifo(project / "a.txt")
    report = store.restore("s", "n")
    assert (project / "a.txt").read_text() == "a"
    assert report.kept == [] and "a.txt" in report.written


def test_an_undecodable_name_is_skipped_and_left_alone(store: SnapStore, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write_tree(project, {"a.txt": "a"})
    odd = os.path.join(os.fsencode(project), b"caf\xe9.txt")
    with open(odd, "wb") as file:
        file.write(b"latin-1 name")
    info = store.create("s", "n", ["."], base_dir=project, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["caf\\xe9.txt"]
    (project / "a.txt").write_text("b")
    report = store.restore("s", "n")
    assert report.kept == ["caf\\xe9.txt"]
    with open(odd, "rb") as file:
        assert file.read() == b"latin-1 name"


def test_a_tree_500_levels_deep(store: SnapStore, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    deep = "/".join(["d"] * 500)
    write_tree(project, {f"{deep}/leaf.txt": "bottom", "top.txt": "top"})
    store.create("s", "n", ["."], base_dir=project)
    store.restore("s", "n", tmp_path / "copy")
    assert (tmp_path / "copy" / deep / "leaf.txt").read_text() == "bottom"
    write_tree(project, {"other.txt": "o"})
    store.create("s", "flat", ["other.txt", "top.txt", "d"], base_dir=project)
    shutil.rmtree(project / "d")
    write_tree(project, {f"{deep}/extra.txt": "x"})
    store.restore("s", "n")
    assert read_tree(project / "d") == read_tree(tmp_path / "copy" / "d")


def _restore_in_process(root: str, name: str, target: str, result: list[str]) -> None:
    try:
        SnapStore(root).restore("s", name, target)
        result.append("ok")
    except BaseException as error:  # reported to the parent
        result.append(repr(error))


def test_concurrent_restores_into_one_target_run_one_at_a_time(tmp_path: Path) -> None:
    source = tmp_path / "src"
    store = SnapStore(tmp_path / "store")
    for version in "ab":
        write_tree(
            source, {f"d{i}/f{k}.txt": f"{version} {i} {k}\n" for i in range(20) for k in range(20)}
        )
        store.create("s", version, ["."], base_dir=source)
        shutil.rmtree(source)
    pictures = {}
    for version in "ab":
        store.restore("s", version, tmp_path / f"pic-{version}")
        pictures[version] = read_tree(tmp_path / f"pic-{version}")
    target = tmp_path / "target"
    context = multiprocessing.get_context("fork")
    manager = context.Manager()
    results = manager.list()
    workers = [
        context.Process(
            target=_restore_in_process, args=(str(tmp_path / "store"), v, str(target), results)
        )
        for v in "abab"
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert list(results) == ["ok"] * 4
    assert read_tree(target) in (pictures["a"], pictures["b"])


def test_a_create_waits_for_a_restore_into_its_directory(store: SnapStore, project: Path) -> None:
    store.create("s", "n", ["."], base_dir=project)
    impatient = SnapStore(store.root, lock_timeout=0.3)
    with target_locks(store).restoring(os.path.realpath(project)):
        with pytest.raises(LockTimeout, match="target"):
            impatient.create("s", "m", ["."], base_dir=project)
        with pytest.raises(LockTimeout, match="target"):
            impatient.create("s", "m", ["src"], base_dir=project / "src")
        with pytest.raises(LockTimeout, match="target"):
            impatient.restore("s", "n")


@pytest.mark.parametrize("spelling", ["/{}", "/{}/", "{}/.", "{}/src/.."])
def test_a_create_of_a_base_spelt_otherwise_waits_for_a_restore_into_it(
    store: SnapStore, project: Path, spelling: str
) -> None:
    """``//path`` (two leading slashes, which ``abspath`` keeps) names the same directory as
    ``/path``: the create must take the restore-target locks of its real path."""
    store.create("s", "n", ["."], base_dir=project)
    impatient = SnapStore(store.root, lock_timeout=0.3)
    base = spelling.format(project)
    with target_locks(store).restoring(os.path.realpath(project)):
        with pytest.raises(LockTimeout, match="target"):
            impatient.create("s", "m", ["."], base_dir=base)
        with pytest.raises(LockTimeout, match="target"):
            impatient.create("s", "m", ["src"], base_dir=base)
    assert [info.name for info in store.list("s")] == ["n"]


def test_an_io_error_while_planning_is_a_restore_error(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("s", "n", ["."], base_dir=project)
    (project / "README.md").write_text("changed")
    real_lstat = os.lstat

    def failing_lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).endswith("README.md"):
            raise OSError(5, "injected Input/output error")
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", failing_lstat)
    with pytest.raises(RestoreError, match="nothing was changed") as caught:
        store.restore("s", "n")
    assert caught.value.rolled_back
    monkeypatch.undo()
    assert (project / "README.md").read_text() == "changed"


def test_a_future_timestamp_neither_survives_ttl_nor_wins_keep_last(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import snapstore.repo.repository as committing

    year_ns = 365 * 24 * 3600 * 10**9

    class SkewedClock:
        @staticmethod
        def time_ns() -> int:
            return time.time_ns() + year_ns

    monkeypatch.setattr(committing, "time", SkewedClock)
    store.create("s", "skewed", ["."], base_dir=project)
    monkeypatch.undo()
    store.create("s", "real-1", ["."], base_dir=project)
    store.create("s", "real-2", ["."], base_dir=project)
    assert [info.name for info in store.list("s")] == ["skewed", "real-1", "real-2"]
    assert store.latest("s").name == "real-2"
    report = store.sweep(keep_last=1, dry_run=True)
    assert sorted(report.deleted) == [("s", "real-1"), ("s", "skewed")]
    assert report.future_stamped == [("s", "skewed")]
    assert sorted(store.sweep(ttl=0).deleted) == [("s", "real-1"), ("s", "real-2"), ("s", "skewed")]
