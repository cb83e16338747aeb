"""Whether a store's root names object storage: the one question every store's opening asks,
answered without importing the S3 client (``snapstore.backend.s3.client``), which a local
store never needs."""

from __future__ import annotations

SCHEME = "s3://"


def is_store_url(root: object) -> bool:
    """True if ``root`` is an object storage URL (``s3://bucket[/prefix]``)."""
    return isinstance(root, str) and root.startswith(SCHEME)
