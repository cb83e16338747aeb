"""Map raw session and snapshot names to safe, collision-free directory names.

A directory name is ``<sanitized>-<hash>``: a short readable prefix keeping only
``[A-Za-z0-9._-]`` and a 80-bit blake3 hex digest of the raw UTF-8 name. The hash makes
``a/b`` and ``a_b`` (or ``Foo`` and ``foo`` on a case-insensitive disk) distinct; the prefix
rules make every result a single, portable path component that cannot escape the root.
"""

from __future__ import annotations

import functools
import os
import re
import time

import blake3

from snapstore.errors import InvalidNameError

PREFIX_LENGTH = 40
HASH_HEX_LENGTH = 20
MAX_NAME_BYTES = 4096
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"COM{i}" for i in range(1, 10)]
    + [f"LPT{i}" for i in range(1, 10)]
)


def encode_name(value: object, what: str = "name") -> bytes:
    """Validate a raw session or snapshot name and return its UTF-8 bytes."""
    if not isinstance(value, str):
        raise InvalidNameError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidNameError(f"{what} must not be empty")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidNameError(f"{what} {value!r} is not valid Unicode text: {error}") from None
    if len(raw) > MAX_NAME_BYTES:
        raise InvalidNameError(f"{what} is {len(raw)} bytes long; the limit is {MAX_NAME_BYTES}")
    return raw


def sanitize(value: str) -> str:
    """The readable prefix of a directory name: portable characters only, never special."""
    prefix = _UNSAFE.sub("_", value)[:PREFIX_LENGTH]
    if prefix.startswith("."):
        prefix = "_" + prefix[1:]
    prefix = prefix.rstrip(". ")
    if prefix.split(".")[0].upper() in _WINDOWS_RESERVED:
        prefix = "_" + prefix
    return prefix or "_"


def dir_name(value: str, what: str = "name") -> str:
    """The directory name for a raw name: ``<sanitized>-<hash of the raw bytes>``.
    Remembered for strings (a pure function: a create asks for its session's several
    times, and a bridge for the same session at every create); anything else is refused
    (InvalidNameError) before it could be hashed, and an invalid name raises every time."""
    if type(value) is not str:
        encode_name(value, what)  # InvalidNameError for anything but a str (or a subclass)
    return _dir_name(value, what)


@functools.lru_cache(maxsize=4096)
def _dir_name(value: str, what: str) -> str:
    raw = encode_name(value, what)
    digest = blake3.blake3(raw).hexdigest(length=HASH_HEX_LENGTH // 2)
    return f"{sanitize(value)}-{digest}"


def generated_name() -> str:
    """A fresh snapshot name that sorts by when it was made: UTC time to the microsecond and
    4 random hex digits (``20261130T193744.123456Z-3fa2``), so names made at once differ."""
    now_ns = time.time_ns()
    seconds, fraction = divmod(now_ns, 1_000_000_000)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds))
    return f"{stamp}.{fraction // 1000:06d}Z-{os.urandom(2).hex()}"
