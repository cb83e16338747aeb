"""``snapstore ui``: the local web page over the store (the optional ``ui`` extra).

Registered lazily (``snapstore.cli.lazy``); Starlette, uvicorn and Jinja2 are imported only when
the command runs.
"""

from __future__ import annotations

import click

from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.parsing import Command

UI_EXTRA_MISSING = (
    "snapstore ui needs the 'ui' extra, which is not installed: pip install 'snapstore[ui]'"
)


@click.command(cls=Command)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port to listen on, on 127.0.0.1 only (0: a free one).",
)
@click.option("--no-browser", is_flag=True, help="Do not open a browser; just print the URL.")
@click.option("--read-only", is_flag=True, help="Serve pages only: no restore, undo or delete.")
@pass_settings
def ui(settings: Settings, port: int, no_browser: bool, read_only: bool) -> int:
    """Serve a local web page to browse and restore the store's checkpoints.

    Prints the page's URL (with its access token) as the first line of stdout and opens it in
    a browser unless --no-browser. Listens on 127.0.0.1 only; runs until interrupted (Ctrl-C).
    Needs the 'ui' extra (docs/ui.md).
    """
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise click.ClickException(UI_EXTRA_MISSING) from None
    from snapstore.ui.server import serve

    return serve(settings.store(), port=port, open_browser=not no_browser, read_only=read_only)
