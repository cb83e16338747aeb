"""``state get|set|reset``: the small resume values (cursors, etags) pipelines keep in a store."""

from __future__ import annotations

from typing import Any

import click

from snapstore.cli.completion import complete_session, snapshot_names
from snapstore.cli.context import Settings, StoreNotFound, pass_settings
from snapstore.cli.maintenance import confirm
from snapstore.cli.output import to_json
from snapstore.cli.params import DURATION, JSON_VALUE
from snapstore.cli.parsing import Group
from snapstore.errors import NotAStateSnapshotError, SnapshotNotFound
from snapstore.frontend import shapes
from snapstore.frontend.words import human_expiry

_MISSING = object()


@click.group(cls=Group)
def state() -> None:
    """Read and write resume values (given and printed as JSON)."""


def _saved_value(settings: Settings, session: str, name: str, *, no_store_ok: bool) -> Any:
    """The saved value, or ``_MISSING`` (also when there is no store yet, if
    ``no_store_ok``: a default was given; else StoreNotFound, so that a mistyped root is
    not taken for an empty store)."""
    try:
        store = settings.store()
    except StoreNotFound:
        if no_store_ok:
            return _MISSING
        raise
    return store.get_state(session, name, _MISSING)


@state.command("get")
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("state"))
@click.option(
    "--default",
    "default",
    type=JSON_VALUE,
    default=_MISSING,
    help="Print this JSON value instead of failing when there is no saved value.",
)
@pass_settings
def get_value(settings: Settings, session: str, name: str, default: Any) -> None:
    """Print the value saved as NAME in SESSION, as JSON."""
    value = _saved_value(settings, session, name, no_store_ok=default is not _MISSING)
    found = value is not _MISSING
    if not found:
        if default is _MISSING:
            raise SnapshotNotFound(session, name)
        value = default
    settings.emit(shapes.state_document(session, name, found, value), [to_json(value)])


@state.command("set")
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("state"))
@click.argument("value", type=JSON_VALUE)
@click.option("--ttl", type=DURATION, help="Expire after this long (90s, 15m, 24h, 7d).")
@pass_settings
def set_value(settings: Settings, session: str, name: str, value: Any, ttl: float | None) -> None:
    """Save the JSON VALUE as NAME in SESSION, replacing any old value.

    Quote it for the shell: '{"cursor": 42}', '"etag-1"', 17.
    """
    info = settings.store(create=True).put_state(session, name, value, ttl=ttl)
    line = f"saved {session}/{name} (expires {human_expiry(info.expires_at)})"
    settings.emit(shapes.saved_state_document(info, value), [line], info=True)


@state.command("reset")
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("state"))
@click.option("--yes", "-y", is_flag=True, help="Confirm: the next run starts from scratch.")
@pass_settings
def reset_value(settings: Settings, session: str, name: str, yes: bool) -> None:
    """Forget the value saved as NAME in SESSION, so its pipeline starts over."""
    confirm(settings, yes, f"reset state {session}/{name}")
    store = settings.store()
    info = store.get(session, name).info
    if info.kind != "state":
        raise NotAStateSnapshotError(
            f"{session}/{name} is a file snapshot, not a state value (use 'snapstore delete')"
        )
    deleted = store.delete(session, name)
    line = f"reset {session}/{name}"
    settings.emit(shapes.deleted_document(session, name, deleted), [line], info=True)
