"""Start the web UI: bind 127.0.0.1, print the URL with its token, open a browser, serve.

The socket is bound before anything is printed, so the URL names the real port (``--port 0``
picks a free one) and a browser opened at once finds the server listening.
"""

from __future__ import annotations

import secrets
import socket
import sys
import webbrowser
from typing import TYPE_CHECKING, TextIO

from snapstore.ui.security import TOKEN_PARAMETER, Secrets

if TYPE_CHECKING:
    from snapstore.store import SnapStore

HOST = "127.0.0.1"


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: a free port)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, port))
        listener.listen(128)
    except OSError:
        listener.close()
        raise
    return listener


def new_secrets(port: int) -> Secrets:
    """A fresh token (exchanged for the cookie) and CSRF token for a server on ``port``."""
    return Secrets(port=port, token=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32))


def serve(
    store: SnapStore,
    *,
    port: int,
    open_browser: bool,
    read_only: bool,
    out: TextIO = sys.stdout,
) -> int:
    """Serve the UI over ``store`` until interrupted; returns the exit code."""
    import uvicorn

    from snapstore.ui.app import UiState, build_app

    listener = bind(port)
    server_secrets = new_secrets(listener.getsockname()[1])
    app = build_app(UiState(store, server_secrets, read_only or store.read_only))
    url = f"http://{HOST}:{server_secrets.port}/?{TOKEN_PARAMETER}={server_secrets.token}"
    print(url, file=out, flush=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        proxy_headers=False,
    )
    if open_browser:
        webbrowser.open(url)
    uvicorn.Server(config).run(sockets=[listener])
    return 0
