"""What one server keeps between calls, for ``snapstore serve`` and ``snapstore mcp`` alike:
the store (opened at the first call that needs it), the directories it watches, and those it
may work in."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from snapstore.backend.opening import is_store_url
from snapstore.service.protocol import StoreNotFound

if TYPE_CHECKING:
    from snapstore import SnapStore
    from snapstore.service.confine import AllowedDirectories
    from snapstore.service.watch import WatchSet


class Service:
    """What one server keeps between calls: one ``SnapStore`` (opened at the first call that
    needs it, closed by ``close``) and the directories it watches."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float = 30.0,
        allowed: AllowedDirectories | None = None,
        password: bytes | None = None,
    ) -> None:
        text = os.fspath(root)
        self.allowed = allowed
        """The directories calls may read or write (None: anywhere)."""
        self.root = text if is_store_url(text) else os.path.abspath(text)
        self.lock_timeout = lock_timeout
        self._password = password
        self._store: SnapStore | None = None
        self._opening = threading.Lock()
        self._watches: WatchSet | None = None

    def store(self, *, create: bool = False) -> SnapStore:
        """The open store; only methods that write new data (``create``, ``put_state``) may
        create a missing one, as on the command line."""
        with self._opening:
            return self._open(create)

    def _open(self, create: bool) -> SnapStore:
        if self._store is None:
            from snapstore import SnapStore
            from snapstore.errors import StoreNotFoundError

            try:
                self._store = SnapStore(
                    self.root,
                    lock_timeout=self.lock_timeout,
                    create=create,
                    password=self._password,
                )
            except StoreNotFoundError:
                raise StoreNotFound(
                    f"no store at '{self.root}' (start the server with --root DIR, or call "
                    "create or put_state to make a new one)"
                ) from None
        return self._store

    def store_exists(self) -> bool:
        """Whether there is a store at the root (opening it if there is)."""
        try:
            self.store()
        except StoreNotFound:
            return False
        return True

    @property
    def watches(self) -> WatchSet:
        """The directories this server watches (set up at the first watch)."""
        if self._watches is None:
            from snapstore.service.watch import WatchSet

            self._watches = WatchSet(str(self.root))
        return self._watches

    def close(self) -> None:
        """Stop every watch and release the store's open files."""
        if self._watches is not None:
            self._watches.close()
        if self._store is not None:
            self._store.close()
