"""Failed mutations are raised and leave the last committed state intact, with no leftovers."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from helpers.seam import FailingOperation

from snapstore import SnapStore


def temp_files(root: Path) -> list[str]:
    return os.listdir(root / "tmp")


@pytest.mark.parametrize("operation", ["replace", "fsync", "write", "fsync_dir", "open"])
def test_failed_overwrite_keeps_the_old_snapshot(root: Path, project: Path, operation: str) -> None:
    SnapStore(root).create("s", "n", ["."], base_dir=project)
    old = SnapStore(root).get("s", "n")
    (project / "src/app.py").write_text("new version")
    failing = FailingOperation(operation, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(OSError, match="No space"):
        SnapStore(root, fs=failing).create("s", "n", ["."], base_dir=project)
    fresh = SnapStore(root)
    current = fresh.get("s", "n")
    if operation == "fsync_dir" and current != old:
        assert fresh.read("s", "n", "src/app.py") == b"new version"
    else:
        assert current == old
        assert fresh.read("s", "n", "src/app.py") == b"print('hello')\n"
    assert temp_files(root) == []
    assert fresh.verify(deep=True).ok


def test_failed_manifest_rename_leaves_old_snapshot_and_no_temp(root: Path, project: Path) -> None:
    store = SnapStore(root)
    store.create("s", "n", ["README.md"], base_dir=project)
    (project / "README.md").write_text("v2")
    # The first rename publishes the new blob, the second would commit the manifest.
    failing = FailingOperation("replace", OSError(errno.EIO, "I/O error on rename"), nth=2)
    with pytest.raises(OSError, match="I/O error on rename"):
        SnapStore(root, fs=failing).create("s", "n", ["README.md"], base_dir=project)
    assert store.read("s", "n", "README.md") == b"# sample\n"
    assert temp_files(root) == []


@pytest.mark.parametrize("operation", ["unlink", "fsync_dir"])
def test_failed_delete_raises(root: Path, project: Path, operation: str) -> None:
    SnapStore(root).create("s", "n", ["README.md"], base_dir=project)
    # The first unlink removes the session's head (a hint), the second the manifest.
    failing = FailingOperation(
        operation, OSError(errno.EIO, "injected"), nth=2 - (operation != "unlink")
    )
    with pytest.raises(OSError, match="injected"):
        SnapStore(root, fs=failing).delete("s", "n")
    if operation == "unlink":
        assert SnapStore(root).read("s", "n", "README.md") == b"# sample\n"


def test_failed_sweep_raises_and_keeps_the_snapshot(root: Path, project: Path) -> None:
    SnapStore(root).create("s", "n", ["README.md"], base_dir=project)
    failing = FailingOperation("unlink", OSError(errno.EACCES, "Permission denied"), nth=2)
    with pytest.raises(PermissionError):
        SnapStore(root, fs=failing).sweep(keep_last=0)
    assert [i.name for i in SnapStore(root).list()] == ["n"]


def test_failed_put_state_keeps_the_old_value(root: Path) -> None:
    SnapStore(root).put_state("c", "k", {"offset": 1})
    failing = FailingOperation("fsync", OSError(errno.EIO, "injected"))
    with pytest.raises(OSError):
        SnapStore(root, fs=failing).put_state("c", "k", {"offset": 2})
    assert SnapStore(root).get_state("c", "k") == {"offset": 1}
    assert temp_files(root) == []


def test_failed_blob_fsync_commits_nothing(root: Path, project: Path) -> None:
    failing = FailingOperation("fsync", OSError(errno.EIO, "injected"), nth=2)
    with pytest.raises(OSError):
        SnapStore(root, fs=failing).create("s", "n", ["."], base_dir=project)
    store = SnapStore(root)
    assert store.list() == []
    assert temp_files(root) == []
