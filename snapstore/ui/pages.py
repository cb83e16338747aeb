"""The pages of the web UI (GET only: reading never changes the store) and the small JSON
endpoints the timeline polls.

Names of sessions, checkpoints and paths travel as query parameters (``?s=...&n=...``), so
any name the library accepts, ``/`` and all, reaches the page as it is.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from snapstore.errors import InvalidValueError, PathNotInSnapshotError
from snapstore.patch import is_binary
from snapstore.ui import views
from snapstore.ui.diffs import MAX_SIDE_BYTES, Change, TextDiff, file_diff
from snapstore.ui.state import UiState, state_of

MAX_NAMES_PER_REQUEST = 100
"""How many checkpoints one request for change counts may name."""
PAGE_BUDGET = 0.25
"""Seconds a checkpoint page spends on diffs before it leaves the rest to load after it."""
FRAGMENT_BUDGET = 0.5
"""Seconds one request for the rest of a page's diffs spends on them."""


def _param(request: Request, key: str) -> str:
    """A required query parameter (InvalidValueError, a 400, when missing)."""
    value = request.query_params.get(key)
    if not value:
        raise InvalidValueError(f"missing query parameter {key!r}")
    return value


def _page_number(request: Request) -> int:
    """The requested page (1 when missing or not a number)."""
    try:
        return int(request.query_params.get("page", "1"))
    except ValueError:
        return 1


def sessions_page(request: Request) -> Response:
    """Every session: its checkpoints, state values, and newest checkpoints; it follows new
    checkpoints by itself."""
    state = state_of(request)
    summaries = views.session_summaries(state.store)
    signature = views.sessions_signature(summaries)
    return state.render(
        request, "sessions.html", title="Sessions", summaries=summaries, signature=signature
    )


def sessions_rows(request: Request) -> Response:
    """The rows of the sessions page, for the page to swap in when checkpoints come or go."""
    state = state_of(request)
    summaries = views.session_summaries(state.store)
    signature = views.sessions_signature(summaries)
    return state.render(request, "_sessions.html", summaries=summaries, signature=signature)


def session_page(request: Request) -> Response:
    """A session's timeline, newest first, paged; it follows new checkpoints by itself."""
    state = state_of(request)
    session = _param(request, "s")
    timeline = views.timeline(state.store, session, _page_number(request))
    return state.render(request, "session.html", title=session, session=session, timeline=timeline)


def timeline_rows(request: Request) -> Response:
    """The rows of one page of the timeline, for the page to swap in when checkpoints come."""
    state = state_of(request)
    session = _param(request, "s")
    timeline = views.timeline(state.store, session, _page_number(request))
    return state.render(request, "_rows.html", session=session, timeline=timeline)


def timeline_head(request: Request) -> Response:
    """How many checkpoints the session has and the newest one's name (polled)."""
    state = state_of(request)
    found = views.checkpoints(state.store, _param(request, "s"))
    return JSONResponse({"count": len(found), "newest": found[-1].name if found else None})


def change_counts(request: Request) -> Response:
    """What changed at each named checkpoint since the one before it, as counts."""
    state = state_of(request)
    names = request.query_params.getlist("n")[:MAX_NAMES_PER_REQUEST]
    counts = views.change_counts(state.store, state.cache, _param(request, "s"), names)
    return JSONResponse(counts)


def _diffs_within(
    state: UiState, comparison: views.Comparison, start: int, budget: float
) -> list[tuple[int, Change, TextDiff | None]]:
    """The page's diffs from change ``start`` on, computed until ``budget`` seconds are spent
    (at least one); the rest come as None, for the page to fetch (``more_diffs``). Reading a
    file costs the store a look at its packs, which on a store of thousands of unpacked
    checkpoints takes a while: the page shows what it has within the budget."""
    deadline = time.monotonic() + budget
    found: list[tuple[int, Change, TextDiff | None]] = []
    for index, change in comparison.shown:
        if index < start:
            continue
        if found and time.monotonic() > deadline:
            found.append((index, change, None))
            continue
        found.append(
            (index, change, file_diff(state.store, comparison.old, comparison.new, change))
        )
    return found


def _comparison(request: Request) -> views.Comparison:
    """The comparison a checkpoint page's query names."""
    state = state_of(request)
    return views.compare(
        state.store,
        state.cache,
        _param(request, "s"),
        _param(request, "n"),
        request.query_params.get("against") or "previous",
        _page_number(request),
    )


def checkpoint_page(request: Request) -> Response:
    """A checkpoint's changes against the previous checkpoint, another one or the directory,
    with a file tree and one page of unified diffs (those not ready in time load after)."""
    state = state_of(request)
    comparison = _comparison(request)
    session = comparison.info.session
    return state.render(
        request,
        "checkpoint.html",
        title=f"{session} / {comparison.info.name}",
        session=session,
        comparison=comparison,
        diffs=_diffs_within(state, comparison, 0, PAGE_BUDGET),
        tree=views.change_tree(comparison.changes),
    )


def more_diffs(request: Request) -> Response:
    """The diffs of a checkpoint page from change ``from`` on, as HTML for the page to put in
    place of those it could not show in time."""
    state = state_of(request)
    comparison = _comparison(request)
    try:
        start = int(request.query_params.get("from", "0"))
    except ValueError:
        start = 0
    return state.render(
        request,
        "_diffs.html",
        session=comparison.info.session,
        comparison=comparison,
        diffs=_diffs_within(state, comparison, start, FRAGMENT_BUDGET),
    )


def files_page(request: Request) -> Response:
    """Every path a checkpoint records, paged."""
    state = state_of(request)
    session, name = _param(request, "s"), _param(request, "n")
    listing = views.file_listing(state.store, session, name, _page_number(request))
    return state.render(
        request,
        "files.html",
        title=f"{session} / {listing.info.name}",
        session=session,
        listing=listing,
    )


def file_page(request: Request) -> Response:
    """A file as checkpoint ``n`` recorded it: its text, or what it is when not text."""
    state = state_of(request)
    session, name, path = _param(request, "s"), _param(request, "n"), _param(request, "path")
    snapshot = state.store.get(session, name)
    entry = snapshot.entry(path)
    if entry is None:
        raise PathNotInSnapshotError(f"{path!r} is not recorded in {session}/{name}")
    text: str | None = None
    note = ""
    if entry.kind == "file" and entry.size <= MAX_SIDE_BYTES:
        data = state.store.read(session, snapshot.info.name, path)
        if is_binary(data):
            note = "binary file"
        else:
            text = data.decode("utf-8", errors="replace")
    elif entry.kind == "file":
        note = "too large to show here"
    return state.render(
        request,
        "file.html",
        title=path,
        session=session,
        info=snapshot.info,
        entry=entry,
        text=text,
        note=note,
    )


def history_page(request: Request) -> Response:
    """The checkpoints of a session in which a path changed (``snapstore log``)."""
    state = state_of(request)
    session, path = _param(request, "s"), _param(request, "path")
    history = state.store.history(session, path)
    if not history:
        raise PathNotInSnapshotError(f"no checkpoint of session {session!r} records {path!r}")
    return state.render(
        request,
        "history.html",
        title=f"History of {path}",
        session=session,
        path=path,
        history=history,
    )


def backups_page(request: Request) -> Response:
    """A session's undo backups, newest first, apart from its checkpoints."""
    state = state_of(request)
    session = _param(request, "s")
    backups = list(reversed(state.store.backups(session)))
    names = {backup.name for backup in backups}
    return state.render(
        request,
        "backups.html",
        title=f"{session}: undo backups",
        session=session,
        backups=backups,
        backup_names=names,
    )


ROUTES = [
    Route("/", sessions_page),
    Route("/sessions/rows", sessions_rows),
    Route("/session", session_page),
    Route("/session/rows", timeline_rows),
    Route("/api/head", timeline_head),
    Route("/api/changes", change_counts),
    Route("/checkpoint", checkpoint_page),
    Route("/checkpoint/diffs", more_diffs),
    Route("/files", files_page),
    Route("/file", file_page),
    Route("/history", history_page),
    Route("/backups", backups_page),
]
