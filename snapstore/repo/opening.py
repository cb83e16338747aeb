"""Which backend a store root names: a local directory or an object storage URL."""

from __future__ import annotations

import os
import warnings

from snapstore.errors import UnreliableLockWarning
from snapstore.fs.seam import FileSystem
from snapstore.repo.backend import Backend
from snapstore.repo.local import LocalBackend
from snapstore.repo.locks import filesystem_type, is_untrusted_lock_filesystem
from snapstore.repo.s3client import is_store_url, open_object_store


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
