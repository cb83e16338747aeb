"""The identity of a file a position points into, and the check that it is still that file."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from blake3 import blake3

FINGERPRINT_BYTES = 64
"""How many bytes before the saved offset the fingerprint covers."""


@dataclass(frozen=True)
class FileIdentity:
    """Which file a byte offset belongs to: enough to tell an appended file from a new one.

    ``fingerprint`` hashes the bytes just before the saved offset, so a file recreated with a
    recycled inode number, or rewritten in place, is caught even when its size still fits.
    """

    path: str
    size: int
    mtime_ns: int
    device: int
    inode: int
    fingerprint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain mapping for msgpack and JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> FileIdentity:
        """Rebuild an identity from :meth:`to_dict` output; ValueError if it is malformed."""
        if not isinstance(data, dict):
            raise ValueError(f"identity is a {type(data).__name__}, not a mapping")
        path = data.get("path")
        fingerprint = data.get("fingerprint")
        if not isinstance(path, str):
            raise ValueError("identity has no path")
        if fingerprint is not None and not isinstance(fingerprint, str):
            raise ValueError("identity fingerprint must be a string")
        return cls(
            path=path,
            size=_natural(data, "size"),
            mtime_ns=_natural(data, "mtime_ns"),
            device=_natural(data, "device"),
            inode=_natural(data, "inode"),
            fingerprint=fingerprint,
        )


def _natural(data: dict[Any, Any], field: str) -> int:
    """``data[field]`` if it is a non-negative integer; ValueError otherwise."""
    value = data.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"identity {field} must be a non-negative integer, not {value!r}")
    return value


def fingerprint_at(fd: int, offset: int) -> str | None:
    """Hash of the bytes just before ``offset``; None where the file is shorter or has no pread."""
    if not hasattr(os, "pread") or offset <= 0:
        return None
    start = max(0, offset - FINGERPRINT_BYTES)
    data = os.pread(fd, offset - start, start)
    if len(data) != offset - start:
        return None
    return fingerprint_of(data)


def fingerprint_of(data: bytes) -> str:
    """The fingerprint of the (at most ``FINGERPRINT_BYTES``) bytes before an offset."""
    return blake3(data).hexdigest()[:32]


def identity_of(fd: int, path: str, offset: int) -> FileIdentity:
    """The identity of the open file ``fd`` (opened from ``path``) as seen at ``offset``."""
    status = os.fstat(fd)
    return FileIdentity(
        path=path,
        size=status.st_size,
        mtime_ns=status.st_mtime_ns,
        device=status.st_dev,
        inode=status.st_ino,
        fingerprint=fingerprint_at(fd, offset),
    )


def mismatch_reason(saved: FileIdentity, fd: int, offset: int) -> str | None:
    """Why the open file ``fd`` is not the one ``saved`` describes at ``offset``, or None.

    A file that only grew by appends is the same file; a replaced, truncated or rewritten one
    is not. The mtime alone is not a reason: appends and ``touch`` change it harmlessly.
    """
    status = os.fstat(fd)
    if (status.st_dev, status.st_ino) != (saved.device, saved.inode):
        return (
            f"it is another file (device {status.st_dev} inode {status.st_ino}; the checkpoint "
            f"was saved for device {saved.device} inode {saved.inode}): it was replaced"
        )
    if status.st_size < saved.size:
        return f"it was truncated to {status.st_size} bytes (it had {saved.size} when saved)"
    if status.st_size < offset:
        return f"it has {status.st_size} bytes, fewer than the saved offset {offset}"
    if saved.fingerprint is not None and fingerprint_at(fd, offset) != saved.fingerprint:
        return f"the bytes before offset {offset} changed since the save: it was rewritten"
    return None


def check_path(saved: FileIdentity, offset: int) -> tuple[os.stat_result | None, str | None]:
    """Stat ``saved.path`` now and say why it no longer matches (None when it does)."""
    try:
        with open(saved.path, "rb") as handle:
            status = os.fstat(handle.fileno())
            return status, mismatch_reason(saved, handle.fileno(), offset)
    except FileNotFoundError:
        return None, "the file no longer exists"
    except OSError as error:
        return None, f"the file cannot be opened: {error.strerror or error}"
