"""Which names an object of each kind can have, checked by every backend before it turns a
name into a path or a key: a name that could escape its kind's place (``..``, an absolute
path, an empty component) or that has the wrong shape for its kind never reaches the
filesystem or the bucket (InvalidNameError)."""

from __future__ import annotations

from snapstore.backend.seam import Handle, Kind
from snapstore.errors import InvalidNameError

_MARKER, _BLOB, _MANIFEST, _CACHE = Kind.MARKER, Kind.BLOB, Kind.MANIFEST, Kind.CACHE
_MIN_BLOB_NAME = 3
"""A blob's first two characters name its shard directory; the rest must not be empty."""


def check_name(handle: Handle) -> None:
    """Refuse (InvalidNameError) a name no object of ``handle``'s kind can have: a manifest's
    has two ``/``-separated components, a cache's one or more, any other kind's one. Cheap
    for the names stores make (no dots): a listing turns thousands of names into paths."""
    kind, name = handle.kind, handle.name
    if kind is _MARKER:
        if name:
            raise InvalidNameError(f"the format marker has no name, not {name!r}")
        return
    slashes = name.count("/")
    if (
        not name
        or name[0] == "/"
        or name[-1] == "/"
        or "//" in name
        or "\x00" in name
        or ("." in name and any(part in (".", "..") for part in name.split("/")))
        or (slashes != 1 if kind is _MANIFEST else slashes != 0 and kind is not _CACHE)
        or (kind is _BLOB and len(name) < _MIN_BLOB_NAME)
    ):
        raise InvalidNameError(f"{name!r} is not the name of a {kind.value} object")
