"""Restore: exact, minimal, safe against planted symlinks and hostile paths, all-or-nothing."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from helpers.blobs import corrupt_blob
from helpers.seam import FailingOperation
from helpers.trees import read_tree, write_tree

from snapstore import (
    CorruptBlobError,
    PathNotInSnapshotError,
    RestoreError,
    SnapStore,
    UnsafePathError,
)


def test_restore_brings_back_edits_deletions_and_additions(store: SnapStore, project: Path) -> None:
    before = read_tree(project)
    store.create("s", "cp", ["."], base_dir=project)
    (project / "src/app.py").write_text("broken")
    (project / "README.md").unlink()
    write_tree(project, {"new.txt": "n", "newdir/deep/x.txt": "x"})
    (project / "src/link.py").unlink()
    (project / "src/link.py").symlink_to("/etc/passwd")

    report = store.restore("s", "cp")

    assert read_tree(project) == before
    assert sorted(report.written) == ["README.md", "src/app.py", "src/link.py"]
    assert sorted(report.removed) == ["new.txt", "newdir"]
    assert report.backup is not None
    assert [info.name for info in store.backups("s")] == [report.backup]
    assert [info.name for info in store.list("s")] == ["cp"]


def test_restore_can_be_undone_and_the_undo_too(store: SnapStore, project: Path) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    restored = read_tree(project)
    (project / "src/app.py").write_text("my later work")
    write_tree(project, {"notes.txt": "keep me"})
    after_edits = read_tree(project)
    store.restore("s", "cp")
    assert not (project / "notes.txt").exists()
    store.undo("s")
    assert read_tree(project) == after_edits
    store.undo("s")
    assert read_tree(project) == restored
    assert [info.backup_of is not None for info in store.backups("s")] == [True, True, True]


def test_unchanged_files_are_not_rewritten(store: SnapStore, project: Path) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    untouched = project / "src/util.py"
    os.utime(untouched, ns=(1_000_000_000, 1_000_000_000))
    inode = untouched.stat().st_ino
    (project / "src/app.py").write_text("changed")
    report = store.restore("s", "cp")
    assert report.written == ["src/app.py"]
    assert "src/util.py" in report.unchanged
    assert untouched.stat().st_mtime_ns == 1_000_000_000
    assert untouched.stat().st_ino == inode
    again = store.restore("s", "cp")
    assert again.written == [] and again.removed == [] and again.backup is None


def test_mode_only_change_is_restored(store: SnapStore, project: Path) -> None:
    script = project / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    store.create("s", "cp", ["."], base_dir=project)
    script.chmod(0o600)
    report = store.restore("s", "cp")
    assert report.written == ["run.sh"]
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_setuid_and_setgid_are_dropped_unless_asked_for(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    tool = project / "tool"
    tool.write_text("x")
    tool.chmod(0o4755 | 0o2000)
    store.create("s", "cp", ["tool"], base_dir=project)
    assert store.get("s", "cp").entries[0].mode & 0o6000
    store.restore("s", "cp", tmp_path / "plain")
    assert stat.S_IMODE((tmp_path / "plain/tool").stat().st_mode) == 0o755
    store.restore("s", "cp", tmp_path / "special", keep_special_bits=True)
    assert stat.S_IMODE((tmp_path / "special/tool").stat().st_mode) & 0o6000


def test_restore_into_another_target(store: SnapStore, project: Path, tmp_path: Path) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    target = tmp_path / "elsewhere"
    store.restore("s", "cp", target)
    assert read_tree(target) == read_tree(project)


def test_restore_subset_of_paths(store: SnapStore, project: Path) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    (project / "src/app.py").write_text("changed")
    (project / "README.md").write_text("changed")
    report = store.restore("s", "cp", paths=["src"])
    assert report.written == ["src/app.py"]
    assert (project / "README.md").read_text() == "changed"
    with pytest.raises(PathNotInSnapshotError):
        store.restore("s", "cp", paths=["nope"])
    with pytest.raises(UnsafePathError):
        store.restore("s", "cp", paths=["../x"])


def test_dry_run_and_diff_change_nothing(store: SnapStore, project: Path) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    (project / "src/app.py").write_text("changed")
    (project / "README.md").unlink()
    write_tree(project, {"extra.txt": "x"})
    picture = read_tree(project)
    report = store.restore("s", "cp", dry_run=True)
    assert report.dry_run and report.written == ["README.md", "src/app.py"]
    assert report.removed == ["extra.txt"]
    diff = store.diff("s", "cp")
    assert (diff.added, diff.modified, diff.removed) == (  # from the checkpoint to the dir
        ["extra.txt"],
        ["src/app.py"],
        ["README.md"],
    )
    assert read_tree(project) == picture
    assert [i.name for i in store.list()] == ["cp"]


def test_absent_entries_are_removed(store: SnapStore, project: Path) -> None:
    store.create("s", "cp", ["later.txt", "later-dir"], base_dir=project)
    write_tree(project, {"later.txt": "x", "later-dir/a/b.txt": "y"})
    report = store.restore("s", "cp")
    assert sorted(report.removed) == ["later-dir", "later.txt"]
    assert not (project / "later.txt").exists() and not (project / "later-dir").exists()


def test_planted_directory_symlink_never_redirects_a_write(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    store.create("s", "cp", ["src/app.py"], base_dir=project)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "src").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symlink"):
        store.restore("s", "cp", target)
    assert list(outside.iterdir()) == []


def test_recorded_directory_replaces_a_planted_symlink(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    store.create("s", "cp", ["src"], base_dir=project)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "src").symlink_to(outside)
    store.restore("s", "cp", target)
    assert not (target / "src").is_symlink() and (target / "src/app.py").is_file()
    assert list(outside.iterdir()) == []


def test_a_target_given_as_a_symlink_to_a_directory_is_restored_through_it(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    before = read_tree(project)
    store.create("s", "cp", ["."], base_dir=project)
    real = tmp_path / "real"
    store.restore("s", "cp", real)
    write_tree(real, {"extra.txt": "x", "src/extra.py": "y"})
    (real / "README.md").write_text("changed")
    (tmp_path / "alias").symlink_to(real)
    report = store.restore("s", "cp", tmp_path / "alias")
    assert read_tree(real) == before
    assert sorted(report.removed) == ["extra.txt", "src/extra.py"]


def test_planted_file_symlink_is_replaced_not_followed(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    store.create("s", "cp", ["README.md"], base_dir=project)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (project / "README.md").unlink()
    (project / "README.md").symlink_to(victim)
    store.restore("s", "cp")
    assert victim.read_text() == "precious"
    assert not (project / "README.md").is_symlink()
    assert (project / "README.md").read_text() == "# sample\n"


def test_symlinks_are_restored_as_links(store: SnapStore, project: Path, tmp_path: Path) -> None:
    (project / "escape").symlink_to("../../../etc/passwd")
    store.create("s", "cp", ["."], base_dir=project)
    store.restore("s", "cp", tmp_path / "copy")
    assert os.readlink(tmp_path / "copy/escape") == "../../../etc/passwd"
    assert os.readlink(tmp_path / "copy/src/link.py") == "app.py"


def test_case_collisions_are_reported_before_writing(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"Makefile": "a", "makefile": "b", "caf\u00e9": "c", "cafe\u0301": "d"})
    store.create("s", "cp", ["."], base_dir=base)
    target = tmp_path / "t"
    with pytest.raises(UnsafePathError, match="collide"):
        store.restore("s", "cp", target)
    assert not target.exists() or list(target.iterdir()) == []


def test_corrupt_blob_never_reaches_the_target_and_rolls_back(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    digest = next(e.digest for e in store.get("s", "cp").entries if e.path == "src/util.py")
    assert digest is not None
    corrupt_blob(store, digest)
    (project / "README.md").write_text("edited")
    (project / "src/util.py").write_text("edited too")
    picture = read_tree(project)
    with pytest.raises(RestoreError) as caught:
        store.restore("s", "cp")
    assert caught.value.rolled_back is True
    assert isinstance(caught.value.__cause__, CorruptBlobError)
    assert read_tree(project) == picture
    assert not any(p.name.startswith(".snapstore-tmp") for p in project.rglob("*"))


def _edited_project(root: Path, base: Path) -> None:
    SnapStore(root).create("s", "cp", ["."], base_dir=base)
    (base / "src/app.py").write_text("edited")
    (base / "README.md").unlink()
    (base / "data/blob.bin").unlink()
    (base / "data").rmdir()
    write_tree(base, {"extra/file.txt": "x"})


@pytest.mark.parametrize("operation", ["replace", "write", "fsync", "unlink", "mkdir", "fchmod"])
def test_failure_at_the_last_step_of_a_restore_rolls_back(
    tmp_path: Path, project: Path, operation: str
) -> None:
    import shutil

    shutil.copytree(project, tmp_path / "rehearsal", symlinks=True)
    _edited_project(tmp_path / "rehearsal-store", tmp_path / "rehearsal")
    counting = FailingOperation(operation, OSError(errno.EIO, "injected"), nth=0)
    SnapStore(tmp_path / "rehearsal-store", fs=counting).restore("s", "cp")
    assert counting.matched > 0

    _edited_project(tmp_path / "store", project)
    picture = read_tree(project)
    failing = FailingOperation(operation, OSError(errno.EIO, "injected"), nth=counting.matched)
    store = SnapStore(tmp_path / "store", fs=failing)
    with pytest.raises(RestoreError) as caught:
        store.restore("s", "cp")
    assert caught.value.rolled_back is True
    assert isinstance(caught.value.__cause__, OSError)
    assert read_tree(project) == picture
    assert not any(p.name.startswith(".snapstore-tmp") for p in project.rglob("*"))
    assert SnapStore(tmp_path / "store").verify().ok


def test_failed_restore_into_a_new_directory_removes_it(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    digest = next(e.digest for e in store.get("s", "cp").entries if e.path == "src/util.py")
    assert digest is not None
    corrupt_blob(store, digest)
    target = tmp_path / "fresh" / "copy"
    with pytest.raises(RestoreError) as caught:
        store.restore("s", "cp", target)
    assert caught.value.rolled_back is True
    assert not target.exists()


def test_one_path_given_alone_to_restore_is_one_path(tmp_path: Path) -> None:
    base = tmp_path / "proj"
    write_tree(base, {"a": "a", "b": "b", "ab": "ab"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    write_tree(base, {"a": "a changed", "b": "b changed", "ab": "ab changed"})
    assert store.restore("s", "n", paths="ab").written == ["ab"]
    assert store.restore("s", "n", paths=Path("a")).written == ["a"]
    assert (base / "b").read_text() == "b changed"


def test_the_plan_of_a_restore_into_a_new_directory_looks_nothing_up_in_it(
    store: SnapStore, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is at the target: every path is new, so none is looked at (one lstat per
    top-level path and a listing of the target were made for nothing)."""
    from snapstore.restore import targetview

    store.create("s", "cp", ["."], base_dir=project)
    target = tmp_path / "fresh" / "out"
    looked: list[str] = []
    real_lstat, real_scandir = os.lstat, os.scandir

    def lstat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).startswith(f"{target}/"):
            looked.append(str(path))
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    def scandir(path: str) -> object:
        if str(path).startswith(f"{target}/") or str(path) == str(target):
            looked.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(targetview.os, "lstat", lstat)
    monkeypatch.setattr(targetview.os, "scandir", scandir)
    store.restore("s", "cp", target)
    monkeypatch.undo()
    assert read_tree(target) == read_tree(project)
    assert looked == []
