"""Which filesystems a restore flushes with one syncfs: those whose own sync flushes as
fsync does, judged by the device a descriptor gives, the path only where it must."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from snapstore.fs import mounts, seam

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


def test_the_trusted_filesystems_are_exactly_those_whose_sync_reports_its_failures() -> None:
    """ext4, xfs, btrfs, bcachefs: their sync commits and returns the commit's or the
    flush's error (Linux 5.17+); tmpfs, ramfs: nothing to lose. Not f2fs (success without a
    checkpoint after an I/O error, or with checkpoint=disable), not zfs (success on a
    suspended pool)."""
    assert {
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "bcachefs",
        "tmpfs",
        "ramfs",
    } == mounts.SYNCFS_FILESYSTEMS


@pytest.mark.parametrize(
    ("release", "trusted"),
    [
        ("5.8.0", False),
        ("5.10.209-1-amd64", False),
        ("5.16.20", False),
        ("5.17.0", True),
        ("6.18.2", True),
        ("garbage", False),
    ],
)
def test_syncfs_is_trusted_from_the_kernel_that_reports_the_filesystems_sync_errors(
    release: str, trusted: bool
) -> None:
    assert seam._syncfs_reports_errors(release) is trusted


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
