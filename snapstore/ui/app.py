"""The web UI as a Starlette application: its routes and error pages.

``build_app`` ties the pages (``pages``), the actions (``actions``, left out when read-only)
and the guard every request passes (``security``) around what the endpoints share
(``state``: one ``SnapStore``, the secrets, the templates). Endpoints are plain functions,
which Starlette runs in its thread pool: the store is safe from any number of threads.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from snapstore.errors import (
    InvalidNameError,
    InvalidValueError,
    PathNotInSnapshotError,
    SnapshotNotFound,
    SnapstoreError,
)
from snapstore.ui import actions, pages
from snapstore.ui.security import Guard
from snapstore.ui.state import HERE, UiState, state_of

__all__ = ["UiState", "build_app"]


def _status_for(error: Exception) -> int:
    """The HTTP status for a library error."""
    if isinstance(error, SnapshotNotFound | PathNotInSnapshotError):
        return 404
    if isinstance(error, InvalidNameError | InvalidValueError | ValueError):
        return 400
    return 409 if isinstance(error, SnapstoreError) else 500


async def _error_page(request: Request, error: Exception) -> Response:
    """A library error as a page (or, for the API, a JSON error document)."""
    status = _status_for(error)
    message = str(error) or type(error).__name__
    if request.url.path.startswith("/api/"):
        return JSONResponse(
            {"error": {"type": type(error).__name__, "message": message}}, status_code=status
        )
    return state_of(request).render(request, "error.html", status, title="Error", message=message)


def build_app(state: UiState) -> Guard:
    """The application, behind its guard."""
    routes: list[Route | Mount] = [
        *pages.ROUTES,
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if not state.read_only:
        routes += actions.ROUTES
    app = Starlette(
        routes=routes,
        exception_handlers={SnapstoreError: _error_page, OSError: _error_page},
    )
    app.state.ui = state
    return Guard(app, state.secrets)
