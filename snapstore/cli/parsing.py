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
top-level group with a subclass of :class:`Group`), so every parser is one of these. The
parser class and the method overridden are click's internals, so a click whose parser does
not look as expected gets no override at all: its own parser runs, as in any click program.
"""

from __future__ import annotations

from typing import Any

import click
import click.parser


def _short_options_parser() -> type[Any] | None:
    """click's parser class with the suggestions of a single-dash option's long lookup left
    out, or None where this click's parser is not the one this was written for (its class
    and the method overridden are click's own, not its public API): every command then
    parses with click's parser as it is, suggestions and all."""
    base = getattr(click.parser, "_OptionParser", None)  # click 8.2 and later
    if base is None:
        base = getattr(click.parser, "OptionParser", None)  # click 8.1
    if not isinstance(base, type) or not callable(getattr(base, "_match_long_opt", None)):
        return None

    class ShortOptionsParser(base):  # type: ignore[valid-type,misc]
        """click's parser, minus the suggestions of a single-dash option's long lookup."""

        def _match_long_opt(self, opt: str, *args: Any, **kwargs: Any) -> None:
            long_options = getattr(self, "_long_opt", None)
            prefixes = getattr(self, "_opt_prefixes", None)
            if (
                isinstance(long_options, dict)
                and isinstance(prefixes, set)
                and opt not in long_options
                and opt[:2] not in prefixes
            ):
                raise click.NoSuchOption(opt, ctx=self.ctx)  # read as short options next
            super()._match_long_opt(opt, *args, **kwargs)

    return ShortOptionsParser


SHORT_OPTIONS_PARSER = _short_options_parser()
"""The parser class commands use, or None: click's own."""


class ShortOptionsParsing(click.Command):
    """Parses its arguments with ``SHORT_OPTIONS_PARSER`` where there is one (as
    ``click.Command`` does with click's own parser), else with click's parser."""

    def make_parser(self, ctx: click.Context) -> Any:
        if SHORT_OPTIONS_PARSER is None:
            return super().make_parser(ctx)
        parser = SHORT_OPTIONS_PARSER(ctx)
        for param in self.get_params(ctx):
            param.add_to_parser(parser, ctx)
        return parser


class Command(ShortOptionsParsing):
    """A command of the command line."""


class Group(ShortOptionsParsing, click.Group):
    """A group of commands of the command line, whose commands are :class:`Command`s."""

    command_class = Command
    group_class = type
