"""Which filesystem holds a path, and the two families of filesystem whose behaviour snapstore
cares about: network filesystems, whose advisory locks may not exclude a process on another
host (the store warns), and local filesystems, where every change passes through this kernel
and so reaches inotify (a watch trusts no other)."""

from __future__ import annotations

import os

NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "9p", "afs", "ncpfs", "sshfs"}
)
"""Filesystems shared over a network (FUSE filesystems, ``fuse.*``, may be too)."""

LOCAL_FILESYSTEMS = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "tmpfs",
        "ramfs",
        "f2fs",
        "zfs",
        "bcachefs",
        "jfs",
        "reiserfs",
        "nilfs2",
        "overlay",
        "hfsplus",
        "vfat",
        "exfat",
    }
)
"""Local filesystems, where every change passes through this kernel and so reaches inotify.
Changes to a network or FUSE filesystem made elsewhere are never reported."""


SYNCFS_FILESYSTEMS = frozenset({"ext3", "ext4", "xfs", "btrfs", "bcachefs", "tmpfs", "ramfs"})
"""Filesystems whose ``syncfs`` makes what it writes back durable as an ``fsync`` of each file
and directory would, and (on Linux 5.17 and later) reports its failures as ``fsync`` does:
their own sync commits the journal or transaction, flushes the disk's cache and returns the
error of either (tmpfs and ramfs keep nothing across a power cut either way). Left out:
f2fs, whose sync returns success without a checkpoint after an I/O error or on a
``checkpoint=disable`` mount; ZFS, whose sync returns success on a suspended pool, where an
``fsync`` waits; FUSE, network filesystems, vfat and the like, whose ``syncfs`` may write
back without flushing the disk or the server. There each file and directory gets an
``fsync`` of its own."""


def syncfs_flushes(path: str, *, device: int | None = None) -> bool:
    """True if a ``syncfs`` of the filesystem holding ``path`` (on ``device``, if known)
    flushes it as ``fsync`` does (its type is one of ``SYNCFS_FILESYSTEMS``); False where
    the type is unknown."""
    return filesystem_type(path, device=device) in SYNCFS_FILESYSTEMS


def filesystem_type(path: str, *, device: int | None = None) -> str | None:
    """The type of the filesystem holding ``path``, from /proc/self/mountinfo (Linux): the
    mount with the device number of ``path`` (``device``, when the caller has it from a
    descriptor), else the innermost mount point above it (the last mounted, of several on
    one point). None if unknown: not Linux, or ``path`` cannot be stat'ed."""
    try:
        if device is None:
            device = os.stat(path).st_dev
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mounts:
            lines = mounts.read().splitlines()
    except OSError:
        return None
    number = f"{os.major(device)}:{os.minor(device)}"
    real = os.path.realpath(path)
    innermost, innermost_type = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or not tail:
            continue
        if fields[2] == number:
            return tail[0]
        point = fields[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(innermost):
            innermost, innermost_type = point, tail[0]
    return innermost_type
