"""The memory backend keeps the backend contract (it makes no I/O that could fail, and
leaves nothing half-written: those hooks are None, and their tests say so)."""

from __future__ import annotations

import pytest

from snapstore.backend.memory import MemoryBackend
from snapstore.backend.seam import Backend

from .contract import LOCK_TIMEOUT, BackendContract, MakeBackend


class TestMemoryBackend(BackendContract):
    @pytest.fixture
    def make_backend(self) -> MakeBackend:
        def make(*, sharing: Backend | None = None) -> Backend:
            return sharing or MemoryBackend(lock_timeout=LOCK_TIMEOUT)

        return make

    @pytest.fixture
    def failing(self) -> None:
        return None

    @pytest.fixture
    def plant_stale_temp(self) -> None:
        return None

    @pytest.fixture
    def plant_unfit(self) -> None:
        return None
