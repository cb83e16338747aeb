"""``snapstore serve`` and ``snapstore mcp``: the store as a service a bridge keeps running.

Registered lazily (``snapstore.cli.lazy``); the servers themselves (``snapstore.service``) are
imported only when a command starts one.
"""

from __future__ import annotations

import click

from snapstore.cli.context import Settings, pass_settings

MCP_EXTRA_MISSING = (
    "snapstore mcp needs the 'mcp' extra, which is not installed: pip install 'snapstore[mcp]'"
)


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


@click.command()
@pass_settings
def mcp(settings: Settings) -> int:
    """Serve checkpoint tools to an agent over the Model Context Protocol (stdio).

    Tools: checkpoint, list_checkpoints, diff_checkpoint, restore_checkpoint,
    read_checkpoint_file and undo_restore (docs/mcp.md). Needs the 'mcp' extra; without it,
    exits 1 with one line saying so.
    """
    try:
        import mcp.server  # noqa: F401
    except ImportError:
        raise click.ClickException(MCP_EXTRA_MISSING) from None
    from snapstore.service.mcp import run

    return run(settings.root, lock_timeout=settings.lock_timeout)
