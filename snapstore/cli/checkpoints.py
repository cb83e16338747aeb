"""``snapstore checkpoint list|inspect|reset``: an operator's view of pipeline resume points.

Part of the command line, not of ``snapstore.checkpoint``, so that the library never imports
click and the two packages do not import each other.
"""

from __future__ import annotations

import json
from typing import Any

import click

from snapstore.checkpoint.errors import CheckpointError, CheckpointNotFound
from snapstore.checkpoint.inspect import explain, plan_lines
from snapstore.checkpoint.persistence import FileCheckpointStore, jsonable
from snapstore.cli.completion import complete_checkpoint_key
from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.maintenance import confirm
from snapstore.cli.output import print_note, render_table
from snapstore.cli.parsing import Group
from snapstore.frontend.words import human_age


def _checkpoints(settings: Settings) -> FileCheckpointStore:
    """The checkpoint store in the root the global options name (which must exist)."""
    return FileCheckpointStore(settings.store())


def _position(value: Any, width: int = 40) -> str:
    """A saved value as short JSON for a table cell."""
    text = json.dumps(jsonable(value), separators=(",", ":"))
    return text if len(text) <= width else text[: width - 3] + "..."


@click.group("checkpoint", cls=Group)
def checkpoint_group() -> None:
    """List, inspect and reset resume checkpoints."""


@checkpoint_group.command("list")
@pass_settings
def list_checkpoints(settings: Settings) -> None:
    """List checkpoints and their saved positions.

    A checkpoint that cannot be read is listed as CORRUPT.
    """
    store = _checkpoints(settings)
    documents: list[dict[str, Any]] = []
    rows: list[list[str]] = []
    keys = store.keys()
    for key in keys:
        try:
            checkpoint = store.load(key)
        except CheckpointError as error:
            documents.append({"key": key, "error": str(error)})
            rows.append([key, "CORRUPT", "-", "-", "-"])
            continue
        if checkpoint is None:
            continue
        run = checkpoint.run
        documents.append(checkpoint.to_dict())
        rows.append(
            [
                key,
                human_age(checkpoint.saved_at),
                "-" if run is None else run.source,
                "-" if run is None else str(run.every),
                _position(checkpoint.value),
            ]
        )
    for damage in store.unreadable():
        documents.append({"key": None, "error": damage})
        rows.append(["?", "CORRUPT", "-", "-", "-"])
    if not rows and not settings.json and not settings.quiet:
        print_note("no checkpoints")
    headers = ["KEY", "SAVED", "SOURCE", "EVERY", "POSITION"]
    settings.emit({"checkpoints": documents}, render_table(headers, rows) if rows else [])


@checkpoint_group.command("inspect")
@click.argument("key", shell_complete=complete_checkpoint_key)
@pass_settings
def inspect_checkpoint(settings: Settings, key: str) -> None:
    """Explain KEY and what its next run will do.

    Shows the raw value, when it was saved, the resume key and granularity, and how many
    records a crash after this save makes the next run process again.
    """
    checkpoint = _checkpoints(settings).load(key)
    if checkpoint is None:
        raise CheckpointNotFound(key)
    plan = explain(checkpoint)
    settings.emit(plan.to_dict(), plan_lines(plan))


@checkpoint_group.command("reset")
@click.argument("key", shell_complete=complete_checkpoint_key)
@click.option("--yes", "-y", is_flag=True, help="Confirm: the next run starts from the beginning.")
@pass_settings
def reset_checkpoint(settings: Settings, key: str, yes: bool) -> None:
    """Delete KEY so its next run starts over.

    The next run starts from its initial position (the beginning of its input).
    """
    store = _checkpoints(settings)
    previous: Any
    try:
        loaded = store.load(key)
    except CheckpointError as error:
        previous = {"error": str(error)}
    else:
        if loaded is None:
            raise CheckpointNotFound(key)
        previous = jsonable(loaded.value)
    confirm(settings, yes, f"reset checkpoint {key!r} (its next run starts from the beginning)")
    deleted = store.delete(key)
    if not deleted:
        raise CheckpointNotFound(key)
    line = f"reset checkpoint {key!r}: the next run starts from the beginning"
    settings.emit({"key": key, "deleted": deleted, "previous": previous}, [line], info=True)
