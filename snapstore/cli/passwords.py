"""Where the command line finds an encrypted store's password: never on the command line.

In this order (restic's): ``--password-command`` (its standard output's first line),
``--password-file`` (the file's first line), ``$SNAPSTORE_PASSWORD_FILE``, then
``$SNAPSTORE_PASSWORD``. None of them: no password (an encrypted store then fails with
PasswordRequiredError, exit code 16).
"""

from __future__ import annotations

import os

import click

from snapstore.backend import secret
from snapstore.backend.secret import first_line
from snapstore.cli.exitcodes import ExitCode

COMMAND_TIMEOUT = 120.0


class PasswordSourceError(click.ClickException):
    """A password source was named but gave no password."""

    exit_code = ExitCode.PASSWORD


def read_password_file(path: str, what: str = "password file") -> bytes:
    """The first line of the file at ``path`` (PasswordSourceError if it cannot be read or
    holds no password)."""
    try:
        return secret.read_password_file(path)
    except OSError as error:
        raise PasswordSourceError(f"cannot read the {what} {path}: {error.strerror}") from None
    except ValueError:
        raise PasswordSourceError(f"the {what} {path} holds no password") from None


def run_password_command(command: str) -> bytes:
    """The first line a password command prints (run without a shell)."""
    import shlex  # deferred, as the password command is rarely used: every command that
    import subprocess  # opens a store imports this module

    try:
        done = subprocess.run(
            shlex.split(command),
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        raise PasswordSourceError(f"the password command failed: {error}") from None
    if done.returncode != 0:
        raise PasswordSourceError(f"the password command exited with {done.returncode}")
    password = first_line(done.stdout)
    if not password:
        raise PasswordSourceError("the password command printed no password")
    return password


def find_password(file: str | None, command: str | None) -> bytes | None:
    """The password from the first source given (see the module docstring), or None."""
    if command:
        return run_password_command(command)
    if file:
        return read_password_file(file)
    env_file = os.environ.get("SNAPSTORE_PASSWORD_FILE")
    if env_file:
        return read_password_file(env_file)
    value = os.environ.get("SNAPSTORE_PASSWORD")
    return value.encode() if value else None
