"""What opens an encrypted store: a password, or a file holding one, and whether a new store
is to be made encrypted. Kept apart from the ciphers, so that naming a secret imports no
cryptography."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from snapstore.errors import EncryptionError, InvalidValueError

MAX_PASSWORD_FILE_BYTES = 64 << 10


@dataclass(frozen=True)
class Secret:
    """A password (``value``) or the path of a key file holding one (its first line), and
    ``encrypt``: a store made with this secret is encrypted (a store opened with one is
    encrypted when its config says so)."""

    value: bytes | None = field(default=None, repr=False)
    key_file: str | None = None
    encrypt: bool = False

    @classmethod
    def given(
        cls,
        password: str | bytes | None,
        key_file: str | os.PathLike[str] | None,
        *,
        encrypt: bool = False,
    ) -> Secret | None:
        """The secret of ``SnapStore``'s arguments; None when none was given (and ``encrypt``
        is false). InvalidValueError for both, or for ``encrypt`` with neither."""
        if password is not None and key_file is not None:
            raise InvalidValueError("give a password or a key_file, not both")
        if password is None and key_file is None:
            if encrypt:
                raise InvalidValueError("an encrypted store needs a password or a key_file")
            return None
        if isinstance(password, str):
            password = password.encode("utf-8")
        if password is not None and not isinstance(password, bytes):
            raise InvalidValueError(f"password must be str or bytes, not {type(password)}")
        if password == b"":
            raise InvalidValueError("the password must not be empty")
        path = None if key_file is None else os.fspath(key_file)
        return cls(password, path, encrypt)

    def password(self) -> bytes:
        """The password (read from the key file now, if that is where it is)."""
        if self.value is not None:
            return self.value
        assert self.key_file is not None
        try:
            return read_password_file(self.key_file)
        except OSError as error:
            raise EncryptionError(f"cannot read the key file {self.key_file}: {error}") from None
        except ValueError:
            raise EncryptionError(f"the key file {self.key_file} holds no password") from None


def read_password_file(path: str) -> bytes:
    """The password in the file at ``path``: its first line (OSError if it cannot be read,
    ValueError if that line is empty)."""
    with open(path, "rb") as file:
        password = first_line(file.read(MAX_PASSWORD_FILE_BYTES + 1))
    if not password:
        raise ValueError(f"{path} holds no password")
    return password


def first_line(data: bytes) -> bytes:
    """A password file's first line, without its line ending (as restic reads one)."""
    return data.split(b"\n", 1)[0].removesuffix(b"\r")
