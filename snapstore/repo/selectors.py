"""Selectors: the snapshot name ``latest``, ``latest~N`` or the start of a name means now.

``latest`` is the session's newest file checkpoint: the last committed, never an undo backup
or a state value. It is read from the session's head where the head names it (``heads``: no
listing), and checked against the manifest it names (a head is a hint, a manifest replaced
since under that name by something else is not the checkpoint); else from a listing of the
session.
"""

from __future__ import annotations

import contextlib
import re
from typing import Protocol

from snapstore.errors import CorruptManifestError, InvalidNameError, SnapshotNotFound
from snapstore.format.names import encode_name
from snapstore.models import SnapshotInfo
from snapstore.repo.catalog import Catalog, manifest_name
from snapstore.repo.heads import Head
from snapstore.repo.sessions import Sessions


class Repository(Protocol):
    """What a selector reads of the repository: a session's head, the headers of its
    manifests, and its file checkpoints."""

    catalog: Catalog
    sessions: Sessions

    def checkpoints(self, session: str) -> list[SnapshotInfo]: ...


LATEST = "latest"
_LATEST_N = re.compile(r"latest~(\d+)")


def latest(repo: Repository, session: str, back: int = 0) -> SnapshotInfo:
    """The ``back``-th file checkpoint of the session before its newest (0: the newest),
    read from the session's head where it names it (see ``repo.heads``), else from a
    listing of the session; SnapshotNotFound if there is none."""
    encode_name(session, "session")
    head = repo.sessions.head(session)
    name = _back_from(head, session, back)
    if name is not None:
        try:
            header = repo.catalog.read_header(manifest_name(session, name))
        except (OSError, CorruptManifestError):
            header = None
        if header is not None and _is_checkpoint(header.info, name):
            return header.info
    checkpoints = repo.checkpoints(session)
    if back >= len(checkpoints):
        raise SnapshotNotFound(session, LATEST if back == 0 else f"{LATEST}~{back}")
    return checkpoints[-1 - back]


def resolve(repo: Repository, session: str, selector: str, *, prefix: bool = False) -> str:
    """The snapshot name a selector means (see ``SnapStore.resolve``)."""
    encode_name(selector, "snapshot name")
    if repo.catalog.exists(session, selector):
        return selector
    if selector == LATEST or _LATEST_N.fullmatch(selector):
        back = 0 if selector == LATEST else int(selector[len(LATEST) + 1 :])
        head = repo.sessions.head(session)
        name = _back_from(head, session, back, selector)
        if name is not None:
            with contextlib.suppress(OSError, CorruptManifestError):
                header = repo.catalog.read_header(manifest_name(session, name))
                if _is_checkpoint(header.info, name):
                    return name
        checkpoints = repo.checkpoints(session)
        if back >= len(checkpoints):
            raise SnapshotNotFound(session, selector)
        return checkpoints[-1 - back].name
    if not prefix:
        raise SnapshotNotFound(session, selector)
    return _by_prefix(repo, session, selector)


def _by_prefix(repo: Repository, session: str, start: str) -> str:
    """The one checkpoint whose name begins with ``start``; InvalidNameError if several do."""
    matches = [i.name for i in repo.checkpoints(session) if i.name.startswith(start)]
    if not matches:
        raise SnapshotNotFound(session, start)
    if len(matches) > 1:
        shown = ", ".join(repr(match) for match in sorted(matches)[:5])
        raise InvalidNameError(
            f"{start!r} is the start of {len(matches)} snapshot names in session "
            f"{session!r} ({shown}); give more of the name"
        )
    return matches[0]


def _is_checkpoint(info: SnapshotInfo, name: str) -> bool:
    """Whether the snapshot read is still the file checkpoint ``name`` a head named (not a
    state value or an undo backup that replaced it under that name since)."""
    return info.name == name and info.kind == "files" and not info.is_backup


def _back_from(head: Head | None, session: str, back: int, selector: str = LATEST) -> str | None:
    """The name of the ``back``-th checkpoint before the newest, if the head names it;
    SnapshotNotFound if the head knows the session has none that far back."""
    if head is None:
        return None
    try:
        return head.checkpoint_back(back)
    except IndexError:
        raise SnapshotNotFound(session, selector) from None
