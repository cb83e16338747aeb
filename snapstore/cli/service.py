"""``snapstore serve`` and ``snapstore mcp``: the store as a service a bridge keeps running.

Registered lazily (``snapstore.cli.lazy``); the servers themselves (``snapstore.service``) are
imported only when a command starts one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.parsing import Command

MCP_EXTRA_MISSING = (
    "snapstore mcp needs the 'mcp' extra, which is not installed: pip install 'snapstore[mcp]'"
)


def allow_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The repeatable ``--allow DIR`` of ``serve`` and ``mcp``."""
    return click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help=help_text,
    )


@click.command(cls=Command)
@allow_option(
    "Confine the server to this directory (repeatable): a base_dir, path or target "
    "outside every --allow is refused. Without it, the server is not confined."
)
@pass_settings
def serve(settings: Settings, allow: tuple[Path, ...]) -> int:
    """Serve the API as JSON-RPC 2.0 on stdin/stdout, one JSON object per line.

    For bridges that keep one server per client running instead of spawning a command per
    call (docs/protocol.md). Any number of servers may share a root. Ends with exit code 0
    when stdin is closed or the client calls shutdown. With --allow, every directory a call
    reads or writes must lie inside one of the given ones.
    """
    from snapstore.service.server import run

    return run(
        settings.root,
        lock_timeout=settings.lock_timeout,
        allow=list(allow),
        password=settings.password(),
    )


@click.command(cls=Command)
@allow_option(
    "Let the agent also work in this directory (repeatable); it always may in the "
    "server's working directory, and nowhere else."
)
@pass_settings
def mcp(settings: Settings, allow: tuple[Path, ...]) -> int:
    """Serve checkpoint tools to an agent over the Model Context Protocol (stdio).

    Tools: checkpoint, list_checkpoints, diff_checkpoint, restore_checkpoint,
    read_checkpoint_file and undo_restore (docs/mcp.md), confined to the working directory
    and the --allow directories. Needs the 'mcp' extra; without it, exits 1 with one line
    saying so.
    """
    try:
        import mcp.server  # noqa: F401
    except ImportError:
        raise click.ClickException(MCP_EXTRA_MISSING) from None
    from snapstore.service.mcp import run

    return run(
        settings.root,
        lock_timeout=settings.lock_timeout,
        allow=list(allow),
        password=settings.password(),
    )
