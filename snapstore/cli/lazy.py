"""A click group whose commands are imported only when they are used.

``snapstore --help`` and ``snapstore --version`` should not pay for importing the store, its
locks, hashing and serialisation: a command module imports the library at its top, so the group
knows each command by a :class:`CommandSpec` (where it lives and its one-line summary) and
imports its module the first time the command runs or its own help or completion is needed.
The group's help lists the summaries without importing anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any, NamedTuple

import click

from snapstore.cli.options import global_options
from snapstore.cli.parsing import Group


class CommandSpec(NamedTuple):
    """A command the group can import: its name, ``module:attribute``, and the summary its
    group help shows (the first sentence of the command's docstring; a test keeps them equal)."""

    name: str
    target: str
    summary: str
    hidden: bool = False

    def load(self) -> click.Command:
        """Import the command object."""
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


class LazyGroup(Group):
    """A group of commands given as :class:`CommandSpec`s (``lazy_commands=``), each imported
    on first use and given the global options (``global_options``) then."""

    def __init__(
        self, *args: Any, lazy_commands: Iterable[CommandSpec] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = {spec.name: spec for spec in lazy_commands}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        spec = self.lazy_commands.get(cmd_name)
        if spec is None:
            return None
        command = global_options(spec.load())
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of the help, from the summaries: imports no command."""
        rows = [
            (spec.name, spec.summary) for spec in self.lazy_commands.values() if not spec.hidden
        ]
        rows += [
            (name, command.get_short_help_str())
            for name, command in self.commands.items()
            if name not in self.lazy_commands and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))
