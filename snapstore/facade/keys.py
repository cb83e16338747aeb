"""The passwords of an encrypted store, and copying an unencrypted store into an encrypted
one (docs/encryption.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from snapstore.errors import EncryptionError
from snapstore.facade.base import StoreBase

if TYPE_CHECKING:
    from snapstore.backend.encrypted import EncryptedBackend
    from snapstore.backend.keyring import KeyInfo
    from snapstore.maintenance.encrypt import CopyReport


def _password(value: str | bytes) -> bytes:
    password = value.encode("utf-8") if isinstance(value, str) else value
    if not isinstance(password, bytes) or not password:
        raise EncryptionError("a password must be a non-empty str or bytes")
    return password


class KeyMethods(StoreBase):
    """``encrypted``, ``current_key``, ``list_keys``, ``add_password``, ``remove_key``,
    ``change_password`` and ``copy_into`` of ``SnapStore``."""

    def _encrypted_backend(self) -> EncryptedBackend | None:
        from snapstore.backend.encrypted import EncryptedBackend

        backend = self._repository.backend
        return backend if isinstance(backend, EncryptedBackend) else None

    def _keyring(self) -> EncryptedBackend:
        backend = self._encrypted_backend()
        if backend is None:
            raise EncryptionError(f"the store at {self.root} is not encrypted: it has no keys")
        return backend

    @property
    def encrypted(self) -> bool:
        """True if the store is encrypted."""
        return self._encrypted_backend() is not None

    @property
    def current_key(self) -> str:
        """The id of the key the password this store was opened with opens."""
        return self._keyring().key_id

    def list_keys(self) -> list[KeyInfo]:
        """The store's keys, oldest first (EncryptionError for an unencrypted store)."""
        return self._keyring().list_keys()

    def add_password(self, password: str | bytes) -> str:
        """Add a key for ``password``; its id."""
        self._repository.check_writable("add a password")
        return self._keyring().add_password(_password(password))

    def remove_key(self, key_id: str) -> None:
        """Remove key ``key_id`` (KeyNotFoundError if there is none; EncryptionError for the
        key this store was opened with: open it with another password to remove it)."""
        self._repository.check_writable("remove a key")
        self._keyring().remove_key(key_id)

    def change_password(self, password: str | bytes) -> tuple[str, str]:
        """Replace the password this store was opened with: a key for ``password`` is
        added, then the old one removed. Returns (new key id, removed key id)."""
        self._repository.check_writable("change the password")
        return self._keyring().change_password(_password(password))

    def copy_into(self, destination: KeyMethods) -> CopyReport:
        """Copy this unencrypted store into the encrypted store ``destination``: every blob,
        pack, index and manifest it does not hold yet (see ``maintenance.encrypt``)."""
        from snapstore.maintenance.encrypt import copy_into_encrypted

        if self.encrypted:
            raise EncryptionError(f"the store at {self.root} is encrypted already")
        target = destination._keyring()
        destination._repository.check_writable("copy a store into it")
        return copy_into_encrypted(self._repository, target)
