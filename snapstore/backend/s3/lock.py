"""The store's named locks on object storage, held as leases (``s3lease``): shared or
exclusive, with timeouts, as the backend seam's ``Lock`` describes.

An exclusive holder first claims the lock (which holds back new shared holders at once),
then waits for the shared holders already in to leave. Whoever takes the gc lock tells the
backend (``Leases.on_acquire``), which then forgets what its listings said.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from snapstore.backend.s3.lease import Leases
from snapstore.errors import LockTimeout

_POLL_START = 0.02
_POLL_MAX = 0.5

T = TypeVar("T")


class S3Lock:
    """One named lock of the store over ``Leases``."""

    def __init__(self, leases: Leases, name: str, label: str, timeout: float) -> None:
        self.leases = leases
        self.lock_name = name
        self.name = label
        self.timeout = timeout

    def _deadline(self, timeout: float | None) -> tuple[float, float]:
        limit = self.timeout if timeout is None else timeout
        return limit, time.monotonic() + limit

    def _poll(self, attempt: Callable[[], T | None], limit: float, deadline: float) -> T:
        """What ``attempt`` returns once it returns something, trying again after growing
        pauses; LockTimeout (of ``limit`` seconds) if the next try would come after
        ``deadline``."""
        delay = _POLL_START
        while True:
            found = attempt()
            if found is not None:
                return found
            if time.monotonic() + delay > deadline:
                raise LockTimeout(self.name, limit)
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)

    def _drained(self) -> bool | None:
        """True once no shared holder is left, else None (to poll again)."""
        return self.leases.drained(self.lock_name) or None

    def _acquired(self) -> None:
        if self.leases.on_acquire is not None:
            self.leases.on_acquire(self.lock_name)

    @contextlib.contextmanager
    def shared(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock together with other shared holders."""
        limit, deadline = self._deadline(timeout)
        key = self._poll(lambda: self.leases.try_shared(self.lock_name), limit, deadline)
        self._acquired()
        with self.leases.holding(key):
            yield

    @contextlib.contextmanager
    def exclusive(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock alone: claim it, then wait for the shared holders to leave."""
        limit, deadline = self._deadline(timeout)
        key = self._poll(lambda: self.leases.try_exclusive_claim(self.lock_name), limit, deadline)
        with self.leases.holding(key):
            self._poll(self._drained, limit, deadline)
            self._acquired()
            yield

    @contextlib.contextmanager
    def exclusive_if_free(self) -> Iterator[bool]:
        """Hold the lock alone if nobody holds it now (yields True), else yield False."""
        key = self.leases.try_exclusive_claim(self.lock_name)
        if key is None:
            yield False
            return
        with self.leases.holding(key):
            if not self.leases.drained(self.lock_name):
                yield False
                return
            self._acquired()
            yield True


class NoLock:
    """A lock that excludes nothing, for a name whose job another lock already does."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout

    @contextlib.contextmanager
    def shared(self, timeout: float | None = None) -> Iterator[None]:
        """Nothing to take."""
        yield

    @contextlib.contextmanager
    def exclusive(self, timeout: float | None = None) -> Iterator[None]:
        """Nothing to take."""
        yield

    @contextlib.contextmanager
    def exclusive_if_free(self) -> Iterator[bool]:
        """Always free."""
        yield True
