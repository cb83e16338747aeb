"""Shell completion: the ``completion`` command, and the callbacks that complete session and
snapshot names, file paths in a snapshot and checkpoint keys from the store at ``--root`` /
``$SNAPSTORE_ROOT``.

Completion runs on every Tab press, in whatever directory the user is in, so a callback must
never create a store (``SnapStore()`` would create a missing root), never print, and never
raise: on any problem it offers no candidates.

click's completion machinery is imported only when a completion runs: every command that
offers completion imports this module, and a ``create`` never completes.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import click

from snapstore.cli.context import Settings
from snapstore.cli.parsing import Command

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from snapstore.store import SnapStore

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_SNAPSTORE_COMPLETE"

Completer = Callable[[click.Context, click.Parameter, str], "list[CompletionItem]"]


def _root(ctx: click.Context) -> str:
    """The root the command line being completed names (or the environment, or the default)."""
    settings = ctx.find_object(Settings)
    if settings is not None:
        return settings.root
    return os.environ.get("SNAPSTORE_ROOT") or ".snapstore"


def _existing_store(ctx: click.Context) -> SnapStore | None:
    """The store at the root, only if one is already there."""
    root = _root(ctx)
    if root.startswith("s3://") or not os.path.isfile(os.path.join(root, "FORMAT")):
        return None
    from snapstore.store import SnapStore

    return SnapStore(root)


def _candidates(
    ctx: click.Context, incomplete: str, values: Callable[[SnapStore], Iterable[str]]
) -> list[CompletionItem]:
    """``values`` of the store that start with ``incomplete``; none on any error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = _existing_store(ctx)
            if store is None:
                return []
            found = sorted(set(values(store)))
    except Exception:
        return []
    from click.shell_completion import CompletionItem

    return [CompletionItem(value) for value in found if value.startswith(incomplete)]


def complete_session(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Sessions that hold at least one snapshot."""
    return _candidates(ctx, incomplete, lambda store: store.sessions())


def snapshot_names(kind: str | None = None) -> Completer:
    """A completer of the snapshot names of the SESSION argument already given (only those of
    ``kind``, ``files`` or ``state``, if given)."""

    def complete(
        ctx: click.Context, _param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        session = ctx.params.get("session")
        if not isinstance(session, str):
            return []
        return _candidates(
            ctx,
            incomplete,
            lambda store: (
                info.name for info in store.list(session) if kind is None or info.kind == kind
            ),
        )

    return complete


def complete_file_path(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The regular files recorded in the snapshot NAME of SESSION already given (NAME may be
    any selector the command takes)."""
    session, name = ctx.params.get("session"), ctx.params.get("name")
    if not (isinstance(session, str) and isinstance(name, str)):
        return []
    return _candidates(
        ctx,
        incomplete,
        lambda store: (
            entry.path
            for entry in store.get(session, store.resolve(session, name, prefix=True)).entries
            if entry.kind == "file"
        ),
    )


def complete_checkpoint_key(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Keys that have a saved checkpoint."""
    from snapstore.checkpoint.persistence import FileCheckpointStore

    return _candidates(ctx, incomplete, lambda store: FileCheckpointStore(store).keys())


@click.command(cls=Command)
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish).

    \b
    bash: snapstore completion bash > ~/.local/share/bash-completion/completions/snapstore
    zsh:  snapstore completion zsh > ~/.zfunc/_snapstore   (with ~/.zfunc in $fpath)
    fish: snapstore completion fish > ~/.config/fish/completions/snapstore.fish

    Or evaluate it in the shell's startup file: eval "$(snapstore completion bash)".
    Session, snapshot, path and checkpoint names complete from the store at --root or
    $SNAPSTORE_ROOT.
    """
    from click.shell_completion import get_completion_class

    shell_class = get_completion_class(shell)
    if shell_class is None:
        raise click.UsageError(f"no completion support for {shell}")
    root_command = ctx.find_root().command
    script = shell_class(root_command, {}, "snapstore", COMPLETE_VAR).source()
    click.echo(script)
