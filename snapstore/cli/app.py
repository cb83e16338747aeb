"""The ``snapstore`` command group, its global options, and how errors become exit codes."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import click

import snapstore
from snapstore.checkpoint.cli import checkpoint_group
from snapstore.cli import diagnostics
from snapstore.cli.context import Settings
from snapstore.cli.demo import demo
from snapstore.cli.demo_bridges import demo_editor, demo_recover
from snapstore.cli.exitcodes import ExitCode, exit_code_for
from snapstore.cli.maintenance import delete, delete_session, gc, sweep, verify
from snapstore.cli.options import global_options, global_parameters
from snapstore.cli.output import one_line, print_error, print_json
from snapstore.cli.restoring import diff, restore
from snapstore.cli.snapshots import cat, create, list_snapshots, show
from snapstore.cli.state import state
from snapstore.errors import SnapstoreError


@click.group(
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
    delete,
    delete_session,
    sweep,
    gc,
    verify,
    state,
    checkpoint_group,
    demo,
    demo_editor,
    demo_recover,
):
    cli.add_command(global_options(_command))


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


def _quiet_broken_pipe() -> int:
    """Stop writing after the reader went away (``snapstore list | head``)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return ExitCode.ERROR


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
    except BrokenPipeError:
        return _quiet_broken_pipe()
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
