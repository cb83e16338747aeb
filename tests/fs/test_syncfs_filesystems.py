"""Which filesystems a restore flushes with one syncfs: those whose own sync flushes as
fsync does, judged by the device a descriptor gives, the path only where it must."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from snapstore.fs import mounts

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mountinfo")


def test_the_device_of_a_descriptor_names_the_same_filesystem_as_the_path(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        device = os.fstat(fd).st_dev
    finally:
        os.close(fd)
    found = mounts.filesystem_type(str(tmp_path), device=device)
    assert found is not None and found == mounts.filesystem_type(str(tmp_path))
    assert mounts.syncfs_flushes(str(tmp_path), device=device) == (
        found in mounts.SYNCFS_FILESYSTEMS
    )


@pytest.mark.parametrize(
    ("kind", "flushes"),
    [
        ("ext4", True),
        ("xfs", True),
        ("btrfs", True),
        ("fuse.sshfs", False),
        ("nfs4", False),
        ("vfat", False),
        (None, False),
    ],
)
def test_only_filesystems_whose_sync_commits_are_flushed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str | None, flushes: bool
) -> None:
    monkeypatch.setattr(mounts, "filesystem_type", lambda path, device=None: kind)
    assert mounts.syncfs_flushes(str(tmp_path)) is flushes
