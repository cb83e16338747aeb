"""Which backend a store root names: a local directory or an object storage URL."""

from __future__ import annotations

import os
import warnings

from snapstore.backend.filelock import is_untrusted_lock_filesystem
from snapstore.backend.layout import MARKER_MAX_BYTES
from snapstore.backend.local import LocalBackend
from snapstore.backend.s3.url import is_store_url as is_store_url
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.backend.secret import Secret
from snapstore.errors import EncryptionError, PasswordRequiredError, UnreliableLockWarning
from snapstore.fs.mounts import filesystem_type
from snapstore.fs.reading import UnfitFileError
from snapstore.fs.seam import FileSystem

ENCRYPTION_CONFIG = Handle(Kind.KEY, "config")
"""The object whose presence makes a store encrypted (``keyring.CONFIG``)."""


def open_backend(
    root: str | os.PathLike[str] | Backend,
    *,
    fs: FileSystem,
    durable: bool,
    lock_timeout: float,
    secret: Secret | None = None,
) -> Backend:
    """The backend of ``root``: given as is, opened from an ``s3://`` URL, or the local
    directory; with ``secret``, or for an encrypted store, wrapped in the encrypting layer
    (``choose_encryption``). A local directory on a filesystem whose locks other machines
    may not honour (NFS, SMB, FUSE...) warns with UnreliableLockWarning."""
    if not isinstance(root, str | os.PathLike):
        return root
    return choose_encryption(_plain_backend(root, fs, durable, lock_timeout), secret)


def _plain_backend(
    root: str | os.PathLike[str], fs: FileSystem, durable: bool, lock_timeout: float
) -> Backend:
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


def choose_encryption(backend: Backend, secret: Secret | None) -> Backend:
    """``backend`` as it is for an unencrypted store, else behind the encrypting layer.

    A store is encrypted if its marker says so, or if it has a config (a process making it
    encrypted writes the config, then the marker). An encrypted store without a secret is
    PasswordRequiredError. A secret makes a new (or still empty) store encrypted; given for
    an unencrypted store that holds anything, it is an EncryptionError: a password means
    the caller counts on encryption, and a store that lost its config and marker must not
    be written in the clear."""
    marker = _marker(backend)
    encrypted = marker is not None and marker.rstrip().endswith(b"-encrypted")
    if not encrypted:
        try:
            backend.stat(ENCRYPTION_CONFIG)
            encrypted = True
        except FileNotFoundError:
            encrypted = False
    if encrypted:
        if secret is None:
            raise PasswordRequiredError(
                f"the store at {_where(backend)} is encrypted: give its password "
                "(SNAPSTORE_PASSWORD, --password-file, --password-command)"
            )
        return _encrypting(backend, secret)
    if secret is None:
        return backend
    if marker is None or _holds_nothing(backend):
        return _encrypting(backend, secret)
    raise EncryptionError(
        f"the store at {_where(backend)} is not encrypted, and a password was given: unset "
        "the password to use it as it is, or copy it into an encrypted store "
        "('snapstore encrypt --to')"
    )


def _marker(backend: Backend) -> bytes | None:
    """The store's format marker, or None where there is none (yet)."""
    try:
        data, _ = backend.read(Handle(Kind.MARKER, ""), max_bytes=MARKER_MAX_BYTES)
    except (FileNotFoundError, UnfitFileError):
        return None
    return data


def _holds_nothing(backend: Backend) -> bool:
    """True for a store with no snapshot and no pack yet: a store another process is making
    encrypted right now looks so, before its config is written."""
    return not backend.names(Kind.MANIFEST) and not backend.names(Kind.PACK)


def _where(backend: Backend) -> str:
    return backend.properties.local_root or backend.describe(Handle(Kind.MARKER, ""))


def _encrypting(backend: Backend, secret: Secret) -> Backend:
    """The encrypting layer over ``backend`` (its ciphers imported only now)."""
    try:
        from snapstore.backend.encrypted import EncryptedBackend
    except ImportError as error:
        raise EncryptionError(
            f"encrypted stores need the 'cryptography' package: pip install "
            f"'snapstore[encryption]' ({error})"
        ) from None
    return EncryptedBackend(backend, secret)


def open_object_store(url: str, *, lock_timeout: float) -> Backend:
    """The backend of the store at ``url`` (imported only when one is opened: the S3
    client costs import time a local store never pays)."""
    from snapstore.backend.s3.backend import S3Backend

    return S3Backend(url, lock_timeout=lock_timeout)
