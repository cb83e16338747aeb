"""Which backend a store root names: a local directory or an object storage URL."""

from __future__ import annotations

import os
import warnings

from snapstore.backend.filelock import is_untrusted_lock_filesystem
from snapstore.backend.local import LocalBackend
from snapstore.backend.s3.client import is_store_url as is_store_url
from snapstore.backend.seam import Backend
from snapstore.errors import UnreliableLockWarning
from snapstore.fs.mounts import filesystem_type
from snapstore.fs.seam import FileSystem


def open_backend(
    root: str | os.PathLike[str] | Backend, *, fs: FileSystem, durable: bool, lock_timeout: float
) -> Backend:
    """The backend of ``root``: given as is, opened from an ``s3://`` URL, or the local
    directory. A local directory on a filesystem whose locks other machines may not honour
    (NFS, SMB, FUSE...) warns with UnreliableLockWarning."""
    if not isinstance(root, str | os.PathLike):
        return root
    path = os.fspath(root)
    if is_store_url(path):
        return open_object_store(path, lock_timeout=lock_timeout)
    fs_type = filesystem_type(path)
    if is_untrusted_lock_filesystem(fs_type):
        warnings.warn(
            f"snapstore root {path} is on a {fs_type} filesystem, whose locks are not "
            "trustworthy: do not share it between processes on different machines",
            UnreliableLockWarning,
            stacklevel=3,
        )
    return LocalBackend(path, fs=fs, durable=durable, lock_timeout=lock_timeout)


def open_object_store(url: str, *, lock_timeout: float) -> Backend:
    """The backend of the store at ``url`` (imported only when one is opened: the S3
    client costs import time a local store never pays)."""
    from snapstore.backend.s3.backend import S3Backend

    return S3Backend(url, lock_timeout=lock_timeout)
