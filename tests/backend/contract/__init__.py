"""The contract every storage backend keeps: one suite, bound once per backend.

``BackendContract`` is a plain test class. A backend binds it by subclassing it in a test
module (the class name must start with ``Test``) and providing its fixtures:

- ``make_backend``: a callable returning a new, unopened backend. Called with no argument it
  makes a fresh store in a fresh place; with ``sharing=<backend>`` it makes another backend on
  the same store, as another process or host would open it (a backend that cannot be opened
  twice, such as memory, returns the one given). Backends are made with
  ``lock_timeout=LOCK_TIMEOUT``.
- ``failing``: ``failing(backend)`` is a context manager inside which every change the
  backend makes to the store fails with an OSError before it is applied (the I/O seam for the
  local backend, refused requests for object storage); or None where a change cannot fail.
- ``plant_stale_temp``: ``plant_stale_temp(backend)`` leaves what a writer killed half-way
  through an object leaves behind (a temp file, an unfinished upload); or None where nothing
  can be left.
- ``plant_unfit``: ``plant_unfit(backend, handle)`` puts something at ``handle``'s place that
  is no object (a FIFO, say); or None where nothing but objects can be there.

A hook set to None is a statement about the backend, and the tests that need it say so in the
report (they skip with the reason); a binding that forgets one fails. What differs between
backends by design is read from ``Properties`` and checked as promised, never skipped.
``docs/backends.md`` describes the seam in prose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from snapstore.backend.seam import Backend, Handle

from .appending import AppendingContract
from .listing import ListingContract
from .locks import LocksAndFailuresContract
from .objects import ObjectsContract
from .shared import (
    HOSTILE_NAMES,
    LOCK_TIMEOUT,
    SAMPLES,
    Failing,
    MakeBackend,
    digest,
    payload,
    same_object,
)

__all__ = [
    "HOSTILE_NAMES",
    "LOCK_TIMEOUT",
    "SAMPLES",
    "BackendContract",
    "Failing",
    "MakeBackend",
    "digest",
    "payload",
    "same_object",
]


class BackendContract(
    ObjectsContract, ListingContract, LocksAndFailuresContract, AppendingContract
):
    """The suite; see the module docstring for how to bind it."""

    # ------------------------------------------------------------------ what a binding gives

    @pytest.fixture
    def make_backend(self) -> MakeBackend:
        pytest.fail("the binding must provide the make_backend fixture")

    @pytest.fixture
    def failing(self) -> Failing | None:
        pytest.fail("the binding must provide the failing fixture (None: changes cannot fail)")

    @pytest.fixture
    def plant_stale_temp(self) -> Callable[[Backend], None] | None:
        pytest.fail("the binding must provide plant_stale_temp (None: nothing is left)")

    @pytest.fixture
    def plant_unfit(self) -> Callable[[Backend, Handle], None] | None:
        pytest.fail("the binding must provide plant_unfit (None: only objects can be there)")

    # ------------------------------------------------------------------ the suite's own

    @pytest.fixture
    def backend(self, make_backend: MakeBackend) -> Iterator[Backend]:
        made = make_backend()
        assert made.open(create=True) is True
        yield made
        made.close()

    @pytest.fixture
    def other(self, make_backend: MakeBackend, backend: Backend) -> Iterator[Backend]:
        """Another process's (or host's) backend on the same store."""
        made = make_backend(sharing=backend)
        assert made.open(create=False) is True
        yield made
        if made is not backend:
            made.close()
