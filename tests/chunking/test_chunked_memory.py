"""Memory does not grow with a large file's size: its checkpoint, restore and partial read
hold a bounded amount whatever the file's length (measured with tracemalloc, which sees every
buffer the library allocates, on a file many times the bound)."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from snapstore import SnapStore

MIB = 1 << 20
FILE_BYTES = 96 * MIB
BOUND = 40 * MIB


def _peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_file_is_checkpointed_restored_and_read_in_bounded_memory(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    with open(base / "big.bin", "wb") as handle:
        for _ in range(FILE_BYTES // (8 * MIB)):
            handle.write(os.urandom(8 * MIB))
    created = _peak(lambda: store.create("s", "v1", ["."], base_dir=base))
    restored = _peak(lambda: store.restore("s", "v1", tmp_path / "restored", backup=False))
    sliced = _peak(lambda: store.read_slice("s", "v1", "big.bin", offset=50 * MIB, length=4096))
    assert created < BOUND, f"checkpoint peaked at {created} bytes"
    assert restored < BOUND, f"restore peaked at {restored} bytes"
    assert sliced < 8 * MIB, f"a 4 KiB read peaked at {sliced} bytes"
    assert (tmp_path / "restored" / "big.bin").stat().st_size == FILE_BYTES
