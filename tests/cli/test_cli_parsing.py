"""Option parsing: short options read as before, suggestions for mistyped long options as
before, and every command parsed by the parser that builds suggestions only where they show
(``snapstore.cli.parsing``)."""

from __future__ import annotations

from pathlib import Path

import click
import click.parser
import pytest
from click.testing import CliRunner
from helpers.cli import Cli

from snapstore import SnapStore
from snapstore.cli import parsing
from snapstore.cli.app import COMMANDS
from snapstore.cli.app import cli as snapstore_group
from snapstore.cli.parsing import Command, ShortOptionsParsing


def _every_command() -> list[tuple[str, click.Command]]:
    """Every command and subcommand of the command line, by its path."""
    found: list[tuple[str, click.Command]] = [("snapstore", snapstore_group)]
    pending = [("snapstore " + spec.name, spec.load()) for spec in COMMANDS]
    while pending:
        path, command = pending.pop()
        found.append((path, command))
        if isinstance(command, click.Group):
            pending += [(f"{path} {name}", sub) for name, sub in command.commands.items()]
    return found


@pytest.mark.parametrize("path, command", _every_command(), ids=lambda value: str(value))
def test_every_command_parses_with_the_short_options_parser(
    path: str, command: click.Command
) -> None:
    assert isinstance(command, ShortOptionsParsing), path
    if isinstance(command, click.Group) and command.commands:
        assert issubclass(command.command_class or click.Command, ShortOptionsParsing), path


def test_the_short_options_parser_is_the_one_made() -> None:
    command = Command("probe", params=[click.Option(["--json", "-j"], is_flag=True)])
    with click.Context(command, info_name="probe") as ctx:
        parser = command.make_parser(ctx)
        assert parsing.SHORT_OPTIONS_PARSER is not None  # this click is the one it fits
        assert isinstance(parser, parsing.SHORT_OPTIONS_PARSER)
        assert command.parse_args(ctx, ["-j"]) == [] and ctx.params == {"json": True}


@pytest.mark.parametrize(
    "args, message",
    [
        (("list", "--jsn"), "No such option '--jsn'. Did you mean '--json'?"),
        (("--jsn", "list"), "No such option '--jsn'. Did you mean '--json'?"),
        (("list", "-x"), "No such option '-x'. (see 'snapstore list --help')"),
        (("-qx", "list"), "No such option '-x'. (see 'snapstore --help')"),
        (("list", "-json"), "No such option '-j'."),
    ],
)
def test_unknown_options_are_reported_as_click_reports_them(
    cli: Cli, args: tuple[str, ...], message: str
) -> None:
    result = cli.run(*args)
    assert result.code == 2
    assert message in result.stderr


def test_short_options_take_their_values_joined_or_apart(cli: Cli, project: Path) -> None:
    cli.ok("-q", "create", "s1", "README.md", "--base", str(project), "-n", "apart")
    cli.ok("create", "-q", "s1", "README.md", "--base", str(project), "-njoined")
    quiet = cli.ok("-qv", "create", "s1", "README.md", "--base", str(project))
    assert quiet.stdout.strip() and " " not in quiet.stdout.strip()  # --quiet prints the name
    assert sorted(info.name for info in cli.store().list("s1")) == sorted(
        ["apart", "joined", quiet.stdout.strip()]
    )


@pytest.mark.parametrize(
    "args, code, words",
    [
        (("-qv", "list"), 0, ""),
        (("list", "-q", "--json"), 0, "[]"),
        (("list", "--jsn"), 2, "Did you mean '--json'?"),
        (("list", "-x"), 2, "No such option '-x'"),
    ],
)
def test_a_click_without_the_expected_parser_gets_its_own(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    code: int,
    words: str,
) -> None:
    """A click whose internals differ (``SHORT_OPTIONS_PARSER`` None) parses as click does."""
    root = tmp_path / "store"
    SnapStore(root)
    monkeypatch.setattr(parsing, "SHORT_OPTIONS_PARSER", None)
    result = CliRunner().invoke(snapstore_group, ["--root", str(root), *args])
    assert result.exit_code == code, result.output
    assert words in result.output


def test_no_override_where_click_s_parser_lacks_the_method(monkeypatch: pytest.MonkeyPatch) -> None:
    class Unlike:
        pass

    monkeypatch.setattr(click.parser, "_OptionParser", Unlike)
    assert parsing._short_options_parser() is None


@pytest.mark.parametrize(
    "root, shown", [("", "."), ("nowhere/", "nowhere"), ("./nowhere//", "nowhere")]
)
def test_a_missing_root_is_named_in_its_normal_form(cli: Cli, root: str, shown: str) -> None:
    result = cli.run("--root", root, "list", root=False)
    assert result.code == 10
    assert f"no store at '{shown}'" in result.stderr
