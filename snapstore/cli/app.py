"""The ``snapstore`` command group, and ``run()``: how errors and closed pipes become exit codes."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import click

import snapstore
from snapstore.checkpoint.cli import checkpoint_group
from snapstore.cli import diagnostics
from snapstore.cli.completion import completion
from snapstore.cli.context import Settings
from snapstore.cli.demo import demo
from snapstore.cli.demo_bridges import demo_editor, demo_recover
from snapstore.cli.exitcodes import ExitCode, exit_code_for
from snapstore.cli.lazy import LazyCommand
from snapstore.cli.maintenance import delete, delete_session, gc, sweep, verify
from snapstore.cli.options import global_options, global_parameters
from snapstore.cli.output import one_line, print_error, print_json
from snapstore.cli.restoring import diff, restore, undo
from snapstore.cli.snapshots import backups, cat, create, list_snapshots, show
from snapstore.cli.state import state
from snapstore.errors import SnapstoreError


class OutputClosed(Exception):
    """The reader of stdout went away while a command was writing (``| head``); carries the
    BrokenPipeError as its cause."""


@contextlib.contextmanager
def _output_closed_is_ours() -> Iterator[None]:
    """Re-raise a BrokenPipeError as OutputClosed, which click passes through: click itself
    would turn it into ``sys.exit(1)``."""
    try:
        yield
    except BrokenPipeError as error:
        raise OutputClosed() from error


class SnapstoreGroup(click.Group):
    """The top-level group: lets ``run()``, not click, decide what a closed pipe means."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _output_closed_is_ours():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _output_closed_is_ours():
            return super().invoke(ctx)


@click.group(
    cls=SnapstoreGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    params=global_parameters(top=True),
    epilog="Global options may also follow the command name: snapstore list --json.",
)
@click.version_option(snapstore.__version__, prog_name="snapstore")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Checkpoint sets of files, inspect the checkpoints, and restore them."""
    settings = ctx.ensure_object(Settings)
    diagnostics.configure(settings.verbose, settings.debug)


for _command in (
    create,
    list_snapshots,
    show,
    cat,
    diff,
    restore,
    undo,
    backups,
    delete,
    delete_session,
    sweep,
    gc,
    verify,
    state,
    checkpoint_group,
    completion,
    demo,
    demo_editor,
    demo_recover,
):
    cli.add_command(global_options(_command))

for _name, _help in (
    ("serve", "Serve the API as JSON-RPC over stdin/stdout (docs/protocol.md)."),
    ("mcp", "Serve checkpoint tools to an agent over MCP (needs snapstore[mcp])."),
):
    _lazy = LazyCommand(_name, f"snapstore.cli.service:{_name}", _help, global_options)
    cli.add_command(global_options(_lazy))


def _global_flags(args: Sequence[str]) -> tuple[bool, bool]:
    """Whether ``--json`` and ``--debug`` were asked for, known even if parsing fails."""
    options = list(args[: args.index("--")] if "--" in args else args)
    return "--json" in options, "--debug" in options


def _fail(error_type: str, message: str, json_output: bool, code: int) -> int:
    """Report an error (one line on stderr; a JSON error document too with --json)."""
    print_error(message)
    if json_output:
        print_json({"error": {"type": error_type, "message": one_line(message)}})
    return code


def _usage_failure(error: click.UsageError, json_output: bool) -> int:
    """Report a usage error the way click does, or as a JSON error document."""
    if json_output:
        return _fail("UsageError", error.format_message(), json_output, ExitCode.USAGE)
    error.show()
    return ExitCode.USAGE


def _stdout_reader_gone() -> bool:
    """True when stdout is a pipe whose reader has closed it (``| head`` read all it wanted),
    so a BrokenPipeError came from our output and not from some other pipe."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):
        return True
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def _stop_writing() -> int:
    """The reader of stdout went away (``snapstore list | head -1``): that is how pipelines
    end, not an error. Point stdout at /dev/null so the final flush cannot fail, exit 0."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return ExitCode.OK


def _describe(error: BaseException) -> str:
    """An error's message, or its type name when it has none."""
    return str(error) or type(error).__name__


def run(args: Sequence[str]) -> int:
    """Run the command line on ``args`` and return the exit code (never raises)."""
    json_output, debug = _global_flags(args)
    try:
        result: Any = cli.main(list(args), prog_name="snapstore", standalone_mode=False)
        return int(result) if isinstance(result, int) else ExitCode.OK
    except click.UsageError as error:
        return _usage_failure(error, json_output)
    except click.Abort:
        return _fail("Aborted", "aborted", json_output, ExitCode.ERROR)
    except click.ClickException as error:
        return _fail(type(error).__name__, error.format_message(), json_output, error.exit_code)
    except OutputClosed as closed:
        if _stdout_reader_gone():
            return _stop_writing()
        cause = closed.__cause__ or closed
        return _fail(type(cause).__name__, _describe(cause), json_output, exit_code_for(cause))
    except (SnapstoreError, OSError) as error:
        if debug:
            traceback.print_exc()
        return _fail(type(error).__name__, _describe(error), json_output, exit_code_for(error))
    except Exception as error:
        if debug:
            traceback.print_exc()
        message = f"internal error: {type(error).__name__}: {_describe(error)} (rerun with --debug)"
        return _fail(type(error).__name__, message, json_output, ExitCode.ERROR)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``snapstore`` console script."""
    sys.exit(run(sys.argv[1:] if argv is None else argv))
