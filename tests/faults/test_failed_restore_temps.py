"""A restore that fails part-way and cannot remove the temp files it left keeps its journal,
so that the next open of the store removes them: a ``.snapstore-tmp-*`` file is never left
behind that no recovery would find, with or without an undo backup."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from helpers.seam import FastFileSystem
from helpers.trees import temp_leftovers

from snapstore import SnapStore
from snapstore.errors import RestoreError
from snapstore.fs.tempnames import is_restore_temp


class TempsStuck(FastFileSystem):
    """Fails the rename of a restore's temp file into place, and every removal of one."""

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        if is_restore_temp(src):
            raise OSError(errno.EIO, "injected EIO in replace")
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        if is_restore_temp(path):
            raise OSError(errno.EIO, "injected EIO in unlink")
        super().unlink(path, dir_fd=dir_fd)


@pytest.mark.parametrize("backup", [True, False])
def test_temp_files_a_failed_restore_cannot_remove_are_removed_at_the_next_open(
    root: Path, project: Path, backup: bool
) -> None:
    SnapStore(root).create("s", "cp", ["."], base_dir=project)
    (project / "src/app.py").write_text("edited\n")
    with pytest.raises(RestoreError, match="injected EIO in replace"):
        SnapStore(root, fs=TempsStuck()).restore("s", "cp", project, backup=backup)
    assert temp_leftovers(project), "the injected faults left no temp file to look for"
    SnapStore(root)
    assert temp_leftovers(project) == []
    # With a backup the next open rolls the target back; without one it finishes the restore.
    expected = "edited\n" if backup else "print('hello')\n"
    assert (project / "src/app.py").read_text() == expected


class StoreAppearsThenFails(FastFileSystem):
    """At the restore's first rename of a temp file into place, another process makes a
    store inside the new target, and the rename fails."""

    def __init__(self, inner_store: Path) -> None:
        self.inner_store = inner_store

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        if is_restore_temp(src):
            SnapStore(self.inner_store)
            raise OSError(errno.EIO, "injected EIO in replace")
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


def test_a_failed_restore_into_a_new_directory_that_cannot_remove_it_is_a_restore_error(
    root: Path, project: Path, tmp_path: Path
) -> None:
    """Removing the new directory stops at a store made inside it meanwhile: the caller gets
    a RestoreError saying the target was not rolled back, never an UnsafePathError (which
    means nothing was written)."""
    SnapStore(root).create("s", "cp", ["."], base_dir=project)
    target = tmp_path / "new"
    failing = StoreAppearsThenFails(target / "inner-store")
    with pytest.raises(RestoreError, match="injected EIO in replace") as caught:
        SnapStore(root, fs=failing).restore("s", "cp", target)
    assert not caught.value.rolled_back
    assert "snapstore root" in str(caught.value)
    assert SnapStore(target / "inner-store").sessions() == []
