"""The ``snapstore`` command group, and ``run()``: how errors and closed pipes become exit codes."""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import click

import snapstore
from snapstore.cli.lazy import CommandSpec, LazyGroup
from snapstore.cli.options import apply_diagnostics, global_parameters
from snapstore.cli.output import one_line, print_error, print_json
from snapstore.cli.startup import resume_collector
from snapstore.cli.version import PROG_NAME, version_line
from snapstore.errors import SnapstoreError
from snapstore.frontend.exitcodes import ExitCode, exit_code_for

COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        "init",
        "snapstore.cli.keys:init",
        "Make a new store at --root (an existing one is left as it is).",
    ),
    CommandSpec(
        "create",
        "snapstore.cli.creating:create",
        "Checkpoint PATHS (files or directories) as a snapshot of SESSION.",
    ),
    CommandSpec(
        "list",
        "snapstore.cli.snapshots:list_snapshots",
        "List snapshots, oldest first (only SESSION's, if given).",
    ),
    CommandSpec(
        "show",
        "snapstore.cli.snapshots:show",
        "Show one snapshot: its header, then every entry with mode, size and digest.",
    ),
    CommandSpec(
        "cat",
        "snapstore.cli.snapshots:cat",
        "Write the bytes PATH had in the snapshot to stdout (verified against its digest).",
    ),
    CommandSpec(
        "diff",
        "snapstore.cli.restoring:diff",
        "Show what changed from snapshot NAME to its base dir (or --target), or to OTHER.",
    ),
    CommandSpec(
        "log",
        "snapstore.cli.history:log",
        "List the checkpoints of SESSION in which PATH changed, oldest first.",
    ),
    CommandSpec(
        "restore",
        "snapstore.cli.restoring:restore",
        "Put the files of snapshot NAME of SESSION back, writing only what differs.",
    ),
    CommandSpec(
        "undo",
        "snapstore.cli.restoring:undo",
        "Undo the newest restore of SESSION: put back what it replaced.",
    ),
    CommandSpec(
        "backups",
        "snapstore.cli.snapshots:backups",
        "List the undo backups of SESSION, oldest first: what each restore replaced.",
    ),
    CommandSpec(
        "delete",
        "snapstore.cli.maintenance:delete",
        "Delete snapshot NAME of SESSION (its blobs are freed by the next gc).",
    ),
    CommandSpec(
        "delete-session",
        "snapstore.cli.maintenance:delete_session",
        "Delete every snapshot of SESSION.",
    ),
    CommandSpec(
        "sweep",
        "snapstore.cli.maintenance:sweep",
        "Delete expired snapshots, and those beyond --ttl or --keep-last.",
    ),
    CommandSpec(
        "gc",
        "snapstore.cli.maintenance:gc",
        "Free blobs no snapshot references, and stale temp files.",
    ),
    CommandSpec(
        "upgrade",
        "snapstore.cli.maintenance:upgrade",
        "Convert a store of an older format to the current one (gc does too).",
    ),
    CommandSpec(
        "stats",
        "snapstore.cli.stats:stats",
        "Show what the store holds and costs, per session (only SESSION's, if given).",
    ),
    CommandSpec(
        "sessions",
        "snapstore.cli.stats:sessions",
        "List the sessions: their checkpoints, state values, undo backups and newest checkpoint.",
    ),
    CommandSpec(
        "verify",
        "snapstore.cli.maintenance:verify",
        "Check every snapshot and blob; exit 13 when committed data is damaged.",
    ),
    CommandSpec(
        "state",
        "snapstore.cli.state:state",
        "Read and write resume values (given and printed as JSON).",
    ),
    CommandSpec(
        "checkpoint",
        "snapstore.cli.checkpoints:checkpoint_group",
        "List, inspect and reset resume checkpoints.",
    ),
    CommandSpec(
        "encrypt",
        "snapstore.cli.keys:encrypt",
        "Copy the unencrypted store at --root into a new encrypted store at --to.",
    ),
    CommandSpec(
        "key",
        "snapstore.cli.keys:key_group",
        "Add, list, remove and change the passwords of an encrypted store.",
    ),
    CommandSpec(
        "serve",
        "snapstore.cli.service:serve",
        "Serve the API as JSON-RPC 2.0 on stdin/stdout, one JSON object per line.",
    ),
    CommandSpec(
        "mcp",
        "snapstore.cli.service:mcp",
        "Serve checkpoint tools to an agent over the Model Context Protocol (stdio).",
    ),
    CommandSpec(
        "ui",
        "snapstore.cli.ui:ui",
        "Serve a local web page to browse and restore the store's checkpoints.",
    ),
    CommandSpec(
        "completion",
        "snapstore.cli.completion:completion",
        "Print the completion script for SHELL (bash, zsh or fish).",
    ),
    CommandSpec(
        "demo",
        "snapstore.cli.demo:demo",
        "Show the store at work: a bridge is killed mid-edit and another one restores its files.",
    ),
    CommandSpec("_demo-editor", "snapstore.cli.demo_bridges:demo_editor", "", hidden=True),
    CommandSpec("_demo-recover", "snapstore.cli.demo_bridges:demo_recover", "", hidden=True),
)
"""Every command, imported only when it runs (or its help or completion is asked for)."""


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


class SnapstoreGroup(LazyGroup):
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
    lazy_commands=COMMANDS,
)
@click.version_option(snapstore.__version__, prog_name=PROG_NAME, message=version_line())
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Checkpoint sets of files, inspect the checkpoints, and restore them."""
    apply_diagnostics(ctx)
    resume_collector()


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
    """Report a usage error as every error is reported: one ``error:`` line on stderr (naming
    the command's help), and a JSON error document with ``--json``."""
    message = error.format_message()
    if error.ctx is not None and not json_output:
        message += f" (see '{error.ctx.command_path} --help')"
    return _fail("UsageError", message, json_output, ExitCode.USAGE)


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
        result: Any = cli.main(list(args), prog_name=PROG_NAME, standalone_mode=False)
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
            _print_traceback()
        return _fail(type(error).__name__, _describe(error), json_output, exit_code_for(error))
    except Exception as error:
        if debug:
            _print_traceback()
        message = f"internal error: {type(error).__name__}: {_describe(error)} (rerun with --debug)"
        return _fail(type(error).__name__, message, json_output, ExitCode.ERROR)


def _print_traceback() -> None:
    """The traceback of the error being handled, on stderr (``--debug``); ``traceback`` is
    imported only then, as a run that succeeds never needs it."""
    import traceback

    traceback.print_exc()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``snapstore`` console script."""
    finish_process(run(sys.argv[1:] if argv is None else argv))


def finish_process(code: int) -> NoReturn:
    """End the process with ``code`` once the command is done, without tearing the
    interpreter down: freeing every module and object one by one (and collecting cycles on
    the way) costs a command 15-25 ms, for memory the kernel takes back at once anyway.

    Everything an ordinary exit does that has effects outside the process still happens:
    the ``atexit`` functions run (logging's flush among them) and stdout and stderr are
    flushed. Whatever the command wrote to the store was made durable before it returned. If
    another thread is still running (an ordinary exit waits for it) or a stream cannot be
    flushed (an ordinary exit reports it), the ordinary exit runs instead."""
    if _other_threads_running():
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


def _other_threads_running() -> bool:
    """Whether a thread besides this one is alive (``threading`` is imported by then if
    any was ever started)."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1
