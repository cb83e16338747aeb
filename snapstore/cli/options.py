"""The global options, accepted before the command name and after it, on every command.

``snapstore --json list`` and ``snapstore list --json`` mean the same, and so do
``snapstore -q state get ...`` and ``snapstore state get ... -q``. Each option is declared once
here; the top-level group gets the full version (with defaults and ``$SNAPSTORE_ROOT``) and
every command and subcommand a copy without defaults that only overrides what it is given.
The values land in the run's :class:`Settings` (through callbacks), never in command
functions' arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from snapstore.cli.context import Settings
from snapstore.cli.params import DURATION

C = TypeVar("C", bound=click.Command)
DEFAULT_ROOT = ".snapstore"
DEFAULT_LOCK_TIMEOUT = 30.0


class RootParam(click.Path):
    """A store's directory, or an object storage URL (``s3://bucket/prefix``) kept as is."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("s3://"):
            return value
        return super().convert(value, param, ctx)


def _settings(ctx: click.Context) -> Settings:
    return ctx.ensure_object(Settings)


def _set_root(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    settings = _settings(ctx)
    settings.root = value
    if param.name and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
        settings.root_given = True


def _set_lock_timeout(ctx: click.Context, _param: click.Parameter, value: float | None) -> None:
    if value is not None:
        _settings(ctx).lock_timeout = value


def _set_text(name: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            setattr(_settings(ctx), name, value)

    return callback


def _set_flag(name: str) -> Callable[[click.Context, click.Parameter, bool], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            setattr(_settings(ctx), name, True)
            apply_diagnostics(ctx)

    return callback


def _add_verbosity(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    if value:
        _settings(ctx).verbose += value
        apply_diagnostics(ctx)


def apply_diagnostics(ctx: click.Context) -> None:
    """Route warnings and log records to stderr as the run's options say
    (``snapstore.cli.diagnostics``, imported here: ``logging`` is not for ``--help``)."""
    from snapstore.cli import diagnostics

    settings = _settings(ctx)
    diagnostics.configure(settings.verbose, settings.debug)


def global_parameters(*, top: bool) -> list[click.Parameter]:
    """The global options; ``top`` for the group's own, with defaults and the environment."""
    common: dict[str, Any] = {"expose_value": False}
    return [
        click.Option(
            ["--root"],
            type=RootParam(file_okay=False),
            metavar="DIR|URL",
            envvar="SNAPSTORE_ROOT" if top else None,
            default=DEFAULT_ROOT if top else None,
            show_default="$SNAPSTORE_ROOT, else ./.snapstore" if top else False,
            callback=_set_root,
            help="The store's directory, or s3://BUCKET/PREFIX for object storage.",
            **common,
        ),
        click.Option(
            ["--password-file"],
            metavar="FILE",
            callback=_set_text("password_file"),
            help="Read an encrypted store's password from FILE's first line "
            "(else $SNAPSTORE_PASSWORD_FILE, $SNAPSTORE_PASSWORD).",
            **common,
        ),
        click.Option(
            ["--password-command"],
            metavar="COMMAND",
            callback=_set_text("password_command"),
            help="Run COMMAND (no shell) and use the first line it prints as the password.",
            **common,
        ),
        click.Option(
            ["--json"],
            is_flag=True,
            callback=_set_flag("json"),
            help="Print one JSON document on stdout.",
            **common,
        ),
        click.Option(
            ["--lock-timeout"],
            type=DURATION,
            default=DEFAULT_LOCK_TIMEOUT if top else None,
            show_default=top,
            callback=_set_lock_timeout,
            help="Seconds to wait for another process's lock before failing.",
            **common,
        ),
        click.Option(
            ["--quiet", "-q"],
            is_flag=True,
            callback=_set_flag("quiet"),
            help="No progress bars or success messages.",
            **common,
        ),
        click.Option(
            ["--verbose", "-v"],
            count=True,
            callback=_add_verbosity,
            help="Show what the library does: -v its INFO log records, -vv DEBUG too.",
            **common,
        ),
        click.Option(
            ["--debug"],
            is_flag=True,
            callback=_set_flag("debug"),
            help="Show tracebacks, full warnings and DEBUG log records.",
            **common,
        ),
    ]


def global_options(command: C) -> C:
    """Let ``command``, and every subcommand below it, take the global options after its name
    (once: a command that already takes them is left as it is)."""
    if not any("--root" in param.opts for param in command.params):
        command.params.extend(global_parameters(top=False))
    if isinstance(command, click.Group):
        for subcommand in command.commands.values():
            global_options(subcommand)
    return command
