"""The options of a create as ``SnapStore.create`` and ``create_incremental`` take them, in one
value: both hand them to ``worktree.create.checkpoint_request`` unchecked. A module of its
own, so the facade names them without importing the create pipeline."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple


class CreateOptions(NamedTuple):
    """A create's options, unchecked (``SnapStore.create`` says what each means); ``ttl`` in
    seconds."""

    base_dir: str | os.PathLike[str] = "."
    meta: Mapping[str, Any] | None = None
    ttl: float | None = None
    exclude: Iterable[str] = ()
    default_excludes: bool = True
    gitignore: bool = True
    if_exists: str = "replace"
    missing: str = "absent"
    skip_unreadable: bool = False
    rehash: bool = False
