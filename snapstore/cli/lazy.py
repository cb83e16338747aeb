"""Commands registered by name and loaded only when run, so ``snapstore --help`` (and every
other command) never imports what they need."""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyCommand(click.Command):
    """A stand-in for the command ``module:attribute``: its name and one-line help are known
    up front, the command itself is imported when it is invoked, completed or asked for its
    ``--help``. ``prepare`` (such as adding the global options) is applied to it once loaded;
    give the stand-in the same options, so that code listing each command's options sees
    them."""

    def __init__(self, name: str, target: str, short_help: str, prepare: Any = None) -> None:
        super().__init__(name, short_help=short_help, help=short_help)
        self.target = target
        self.prepare = prepare
        self._loaded: click.Command | None = None

    def load(self) -> click.Command:
        """The real command."""
        if self._loaded is None:
            module, _, attribute = self.target.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command)
            self._loaded = self.prepare(command) if self.prepare else command
        return self._loaded

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        return self.load().make_context(info_name, args, parent, **extra)
