"""The format marker of an encrypted store: what it reads on disk, and the plain marker the
layers above see instead."""

from __future__ import annotations

from snapstore.backend.layout import FORMAT_MAJOR, FORMAT_TEXT

SEALED_MARKERS = {
    f"snapstore format {major}\n".encode(): f"snapstore format {major}-encrypted\n".encode()
    for major in (3, FORMAT_MAJOR)
}
"""The plain marker of each format an encrypted store may have (encryption came with format
3), and the marker the store holds instead: versions that know no encryption refuse it."""
ENCRYPTED_MARKER = SEALED_MARKERS[FORMAT_TEXT.encode()]


def plain_marker(sealed: bytes) -> bytes | None:
    """The plain marker an encrypted store's ``sealed`` one stands for (None: not one)."""
    return next((plain for plain, known in SEALED_MARKERS.items() if known == sealed), None)
