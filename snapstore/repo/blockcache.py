"""The raw bytes of the blocks a process decompressed last, so that a restore reading the
blobs of one block in turn decompresses it once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

BLOCK_CACHE_BYTES = 16 << 20


class BlockCache:
    """The raw bytes of recently decompressed blocks, up to a byte budget (oldest dropped)."""

    def __init__(self, budget: int = BLOCK_CACHE_BYTES) -> None:
        self.budget = budget
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], data: bytes) -> None:
        with self._lock:
            if key in self._blocks or len(data) > self.budget:
                return
            self._blocks[key] = data
            self._bytes += len(data)
            while self._bytes > self.budget:
                _, dropped = self._blocks.popitem(last=False)
                self._bytes -= len(dropped)

    def forget(self, keys: Iterable[tuple[str, int]]) -> None:
        """Drop these blocks (of deleted packs), at a cost that grows with them, not the cache."""
        with self._lock:
            for key in keys:
                dropped = self._blocks.pop(key, None)
                self._bytes -= 0 if dropped is None else len(dropped)
