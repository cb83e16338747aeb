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


def filesystem_type(path: str) -> str | None:
    """The type of the filesystem holding ``path``, from /proc/self/mountinfo (Linux): the
    mount with the device number of ``path``, else the innermost mount point above it (the
    last mounted, of several on one point). None if unknown: not Linux, or ``path`` cannot
    be stat'ed."""
    try:
        info = os.stat(path)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mounts:
            lines = mounts.read().splitlines()
    except OSError:
        return None
    device = f"{os.major(info.st_dev)}:{os.minor(info.st_dev)}"
    real = os.path.realpath(path)
    innermost, innermost_type = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or not tail:
            continue
        if fields[2] == device:
            return tail[0]
        point = fields[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(innermost):
            innermost, innermost_type = point, tail[0]
    return innermost_type
