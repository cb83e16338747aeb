"""Option parsing that builds click's "did you mean" suggestions only where they are shown.

click's parser tries every option as a long option first, so ``-q`` is looked up as the long
option ``-q`` before it is read as the short option ``q``. A failed lookup raises
``NoSuchOption`` with every long option of the command as candidates, and building that
exception runs ``difflib.get_close_matches`` (importing ``difflib`` and ``heapq`` on the
way): about 1 ms of every ``snapstore -q create`` for a message nobody sees, since the parser
catches it and goes on to the short options. Here a single-dash option that is no long option
fails that first lookup without candidates; an unknown ``--option`` still gets its
suggestions, as before.

Every command of the command line is made with :class:`Command` or :class:`Group` (the
top-level group with a subclass of :class:`Group`), so every parser is one of these.
"""

from __future__ import annotations

from typing import Any

import click

try:
    from click.parser import _OptionParser as OptionParser
except ImportError:  # pragma: no cover - click 8.1 names it without the underscore
    from click.parser import OptionParser  # type: ignore[no-redef,unused-ignore]


class ShortOptionsParser(OptionParser):
    """click's parser, minus the suggestions of a single-dash option's long lookup."""

    def _match_long_opt(self, opt: str, explicit_value: str | None, state: Any) -> None:
        if opt not in self._long_opt and opt[:2] not in self._opt_prefixes:
            raise click.NoSuchOption(opt, ctx=self.ctx)  # read as short options next
        super()._match_long_opt(opt, explicit_value, state)


class ShortOptionsParsing(click.Command):
    """Parses its arguments with :class:`ShortOptionsParser` (as ``click.Command`` does with
    click's own parser)."""

    def make_parser(self, ctx: click.Context) -> Any:
        parser = ShortOptionsParser(ctx)
        for param in self.get_params(ctx):
            param.add_to_parser(parser, ctx)
        return parser


class Command(ShortOptionsParsing):
    """A command of the command line."""


class Group(ShortOptionsParsing, click.Group):
    """A group of commands of the command line, whose commands are :class:`Command`s."""

    command_class = Command
    group_class = type
