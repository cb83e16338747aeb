"""Commands that make a store and manage an encrypted store's passwords: init and key."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from snapstore.cli.context import Settings, StoreNotFound, pass_settings, shown_root
from snapstore.cli.exitcodes import ExitCode
from snapstore.cli.output import align_rows
from snapstore.cli.parsing import Command, Group
from snapstore.cli.passwords import read_password_file

if TYPE_CHECKING:
    from snapstore.store import SnapStore


class NotEncrypted(click.ClickException):
    """A key command on a store that is not encrypted."""

    exit_code = ExitCode.USAGE


@click.command(cls=Command)
@click.option(
    "--encrypt",
    is_flag=True,
    help="Make the new store encrypted, with the password from --password-file, "
    "--password-command, $SNAPSTORE_PASSWORD_FILE or $SNAPSTORE_PASSWORD.",
)
@pass_settings
def init(settings: Settings, encrypt: bool) -> None:
    """Make a new store at --root (an existing one is left as it is).

    With --encrypt, everything the store keeps is encrypted and authenticated, and only its
    passwords open it (docs/encryption.md).
    """
    if encrypt and settings.password() is None:
        raise click.UsageError(
            "--encrypt needs a password: --password-file, --password-command, "
            "SNAPSTORE_PASSWORD_FILE or SNAPSTORE_PASSWORD"
        )
    store = settings.writable_store("init makes the store", create=True, encrypt=encrypt)
    encrypted = store.encrypted
    settings.emit(
        {"root": str(store.root), "encrypted": encrypted},
        [f"{'encrypted ' if encrypted else ''}store at {store.root}"],
        info=True,
    )


def _require_encrypted(settings: Settings) -> SnapStore:
    store = settings.store()
    if not store.encrypted:
        raise NotEncrypted(
            f"the store at {shown_root(settings.root)} is not encrypted: it has no keys"
        )
    return store


new_password_option = click.option(
    "--new-password-file",
    metavar="FILE",
    required=True,
    help="Read the new password from FILE's first line.",
)


@click.group("key", cls=Group)
def key_group() -> None:
    """Add, list, remove and change the passwords of an encrypted store."""


@key_group.command("add")
@new_password_option
@pass_settings
def add(settings: Settings, new_password_file: str) -> None:
    """Add a password: a new key wrapping the store's master key."""
    new = read_password_file(new_password_file, "new password file")
    key_id = _require_encrypted(settings).add_password(new)
    settings.emit({"id": key_id}, [f"added key {key_id}"], info=True)


@key_group.command("list")
@pass_settings
def list_keys(settings: Settings) -> None:
    """List the store's keys (* marks the one the password given opens)."""
    store = _require_encrypted(settings)
    keys, current = store.list_keys(), store.current_key
    documents = [
        {
            "id": key.id,
            "current": key.id == current,
            "created": key.created,
            "host": key.host,
            "kdf": key.kdf,
        }
        for key in keys
    ]
    rows = [
        ["*" if key.id == current else " ", key.id, key.created, key.host, key.kdf] for key in keys
    ]
    settings.emit({"keys": documents}, align_rows([[" ", "ID", "CREATED", "HOST", "KDF"], *rows]))


@key_group.command("remove")
@click.argument("key_id", metavar="ID")
@pass_settings
def remove(settings: Settings, key_id: str) -> None:
    """Remove key ID (not the one the password given opens: use another password)."""
    _require_encrypted(settings).remove_key(key_id)
    settings.emit({"removed": key_id}, [f"removed key {key_id}"], info=True)


@key_group.command("passwd")
@new_password_option
@pass_settings
def passwd(settings: Settings, new_password_file: str) -> None:
    """Change the password given: add a key for the new one, then remove the old key."""
    new = read_password_file(new_password_file, "new password file")
    key_id, old = _require_encrypted(settings).change_password(new)
    settings.emit({"id": key_id, "removed": old}, [f"key {old} replaced by {key_id}"], info=True)


@click.command(cls=Command)
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="DIR|URL",
    help="Where the encrypted copy goes: a new store, or one a stopped run began.",
)
@pass_settings
def encrypt(settings: Settings, destination: str) -> None:
    """Copy the unencrypted store at --root into a new encrypted store at --to.

    The password of the new store comes from --password-file, --password-command,
    SNAPSTORE_PASSWORD_FILE or SNAPSTORE_PASSWORD. The store at --root is only read (under
    its gc lock: no create or restore runs on it meanwhile) and is left as it is; a run that
    is stopped is taken up by the next. Point your tools at --to, then remove the old store.
    """
    from snapstore import SnapStore
    from snapstore.errors import PasswordRequiredError, StoreNotFoundError

    password = settings.password()
    if password is None:
        raise click.UsageError(
            "encrypt needs the new store's password: --password-file, --password-command, "
            "SNAPSTORE_PASSWORD_FILE or SNAPSTORE_PASSWORD"
        )
    if os.path.abspath(str(settings.root)) == os.path.abspath(destination):
        raise click.UsageError("--to must name another store than --root")
    try:  # without the password: it would make an empty store encrypted
        source = SnapStore(settings.root, lock_timeout=settings.lock_timeout, create=False)
    except PasswordRequiredError:
        raise NotEncrypted(
            f"the store at {shown_root(settings.root)} is encrypted already"
        ) from None
    except StoreNotFoundError:
        raise StoreNotFound(settings.root) from None
    with (
        source,
        SnapStore(
            destination, lock_timeout=settings.lock_timeout, password=password, encrypt=True
        ) as target,
    ):
        report = source.copy_into(target)
    settings.emit(
        {
            "destination": destination,
            "copied": report.copied,
            "present": report.present,
            "bytes_copied": report.bytes_copied,
        },
        [
            f"encrypted copy at {destination}: {report.copied} objects copied "
            f"({report.present} there already)"
        ],
    )
