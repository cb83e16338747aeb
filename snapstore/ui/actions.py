"""What the web UI can change: restore, undo and delete (POST only; not served with
``--read-only``).

Each takes a JSON object and answers one: the page first asks for a dry run to show in its
confirmation dialog, then, on **Confirm**, for the real thing. A restore goes into the
checkpoint's recorded base directory, as ``snapstore restore`` does without ``--target``.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from snapstore.errors import InvalidValueError
from snapstore.models import RestoreReport
from snapstore.ui.state import state_of

PATHS_SHOWN = 200
"""The most paths of each kind (written, removed, left alone) an answer lists."""
MAX_BODY = 1024 * 1024


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object (InvalidValueError, a 400, otherwise)."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise InvalidValueError("request too large")
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise InvalidValueError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidValueError("the request body must be a JSON object")
    return body


def _text(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    """A string field of the request."""
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidValueError(f"{key!r} must be a non-empty string")
    return value


def _paths(body: dict[str, Any]) -> list[str] | None:
    """The selected paths (None or empty: all of the checkpoint)."""
    paths = body.get("paths")
    if not paths:
        return None
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise InvalidValueError("'paths' must be a list of non-empty strings")
    return paths


def _report(report: RestoreReport) -> dict[str, Any]:
    """A restore's report, its lists cut at ``PATHS_SHOWN`` (their lengths given in full)."""
    return {
        "dry_run": report.dry_run,
        "target": report.target,
        "backup": report.backup,
        "counts": {
            "written": len(report.written),
            "removed": len(report.removed),
            "unchanged": len(report.unchanged),
            "kept": len(report.kept),
        },
        "written": report.written[:PATHS_SHOWN],
        "removed": report.removed[:PATHS_SHOWN],
        "kept": report.kept[:PATHS_SHOWN],
    }


async def restore(request: Request) -> Response:
    """Restore checkpoint ``name`` (all, or ``paths``) into its base directory."""
    state = state_of(request)
    body = await _body(request)
    session, name = _text(body, "session"), _text(body, "name")
    assert session is not None and name is not None
    paths, dry_run = _paths(body), bool(body.get("dry_run"))

    def run() -> RestoreReport:
        return state.store.restore(session, name, paths=paths, dry_run=dry_run)

    report = await _in_thread(run)
    return JSONResponse({"session": session, "name": name, **_report(report)})


async def undo(request: Request) -> Response:
    """Put back undo backup ``backup`` (default: the session's newest)."""
    state = state_of(request)
    body = await _body(request)
    session = _text(body, "session")
    backup = _text(body, "backup", required=False)
    assert session is not None
    dry_run = bool(body.get("dry_run"))

    def run() -> RestoreReport:
        return state.store.undo(session, backup=backup, dry_run=dry_run)

    report = await _in_thread(run)
    return JSONResponse({"session": session, "undone": backup, **_report(report)})


async def delete(request: Request) -> Response:
    """Delete one checkpoint by its full name (no selector: a delete cannot be undone)."""
    state = state_of(request)
    body = await _body(request)
    session, name = _text(body, "session"), _text(body, "name")
    assert session is not None and name is not None
    deleted = await _in_thread(lambda: state.store.delete(session, name))
    return JSONResponse({"session": session, "name": name, "deleted": deleted})


async def _in_thread(call: Any) -> Any:
    """Run a blocking store call in Starlette's thread pool."""
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(call)


ROUTES = [
    Route("/api/restore", restore, methods=["POST"]),
    Route("/api/undo", undo, methods=["POST"]),
    Route("/api/delete", delete, methods=["POST"]),
]
