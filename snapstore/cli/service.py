"""``snapstore serve``: the store as a service a bridge keeps running.

Registered lazily (``snapstore.cli.lazy``); the servers themselves (``snapstore.service``) are
imported only when a command starts one.
"""

from __future__ import annotations

import click

from snapstore.cli.context import Settings, pass_settings


@click.command()
@pass_settings
def serve(settings: Settings) -> int:
    """Serve the API as JSON-RPC 2.0 on stdin/stdout, one JSON object per line.

    For bridges that keep one server per client running instead of spawning a command per
    call (docs/protocol.md). Any number of servers may share a root. Ends with exit code 0
    when stdin is closed or the client calls shutdown.
    """
    from snapstore.service.server import run

    return run(settings.root, lock_timeout=settings.lock_timeout)
