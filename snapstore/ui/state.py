"""What every endpoint of the web UI shares: the store, the server's secrets, the templates
(``UiState``, kept on the application), and the URLs of this server (``link``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from snapstore.frontend.words import human_age, human_size
from snapstore.ui.diffs import EntryCache
from snapstore.ui.security import Secrets

if TYPE_CHECKING:
    from snapstore.store import SnapStore

HERE = Path(__file__).resolve().parent


@dataclass
class UiState:
    """What the endpoints share: the store, the server's secrets, whether actions are
    offered, the templates, and the entries of recently compared checkpoints."""

    store: SnapStore
    secrets: Secrets
    read_only: bool
    templates: jinja2.Environment = field(init=False)
    cache: EntryCache = field(default_factory=EntryCache)

    def __post_init__(self) -> None:
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.globals["url"] = link
        self.templates.filters["size"] = human_size
        self.templates.filters["ago"] = human_age
        self.templates.filters["when"] = lambda moment: moment.strftime("%Y-%m-%d %H:%M:%S UTC")

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """A page from ``template``, every value in it escaped; ``page_url(n)`` links to page
        ``n`` of the same view."""

        def page_url(number: int) -> str:
            params = {**request.query_params, "page": number}
            return link(request.url.path, **params)

        page = self.templates.get_template(template).render(
            csrf=self.secrets.csrf, read_only=self.read_only, page_url=page_url, **context
        )
        return HTMLResponse(page, status_code=status)


def link(route: str, /, **params: Any) -> str:
    """A URL of this server: ``route`` with its query parameters encoded (None left out)."""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        pairs += [(key, str(item)) for item in values]
    return route + (f"?{urlencode(pairs)}" if pairs else "")


def state_of(request: Request) -> UiState:
    """The UI's shared state, from the application."""
    state = request.app.state.ui
    assert isinstance(state, UiState)
    return state
