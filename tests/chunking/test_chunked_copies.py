"""gc and fold copy blobs into new packs; an extent map keeps a block of its own there, as its
writer stored it, so a create that reuses the file never decompresses file data to read it.
Other small blobs are still packed together."""

from __future__ import annotations

import random
from pathlib import Path

from snapstore import SnapStore
from snapstore.format.packfile import RECORD_HEAD
from snapstore.internals import repository
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy

MIB = 1 << 20


def block_of(store: SnapStore, name: str, path: str) -> tuple[str, int, int]:
    """The pack, raw block size and blob size of ``path``'s stored digest in ``name``."""
    entry = store.get("s", name).entry(path)
    assert entry is not None and entry.digest is not None
    repository(store).blobs.refresh()
    location = repository(store).blobs.packs.locate(entry.digest)
    assert location is not None
    return location.pack_id, location.block.raw, location.size


def assert_alone(store: SnapStore, name: str, path: str) -> str:
    pack_id, raw, size = block_of(store, name, path)
    assert raw == RECORD_HEAD.size + size, f"{path}'s map shares a block of {raw} bytes"
    return pack_id


def test_gc_keeps_each_map_in_a_block_of_its_own(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "project"
    base.mkdir()
    for number in range(2):
        (base / f"big{number}.bin").write_bytes(random.Random(number).randbytes(3 * MIB))
        (base / f"note{number}.txt").write_text(f"note {number}\n" * 50)
        store.create("s", f"v{number}", ["."], base_dir=base)
        repository(store).blobs.close()  # as if each create ran in a process of its own
    before = {assert_alone(store, "v1", f"big{n}.bin") for n in range(2)}
    assert len(before) == 2  # one pack per create

    store.gc()
    after = {assert_alone(store, "v1", f"big{n}.bin") for n in range(2)}
    assert after.isdisjoint(before)  # gc did copy them, into one pack
    notes = {block_of(store, "v1", f"note{n}.txt")[:2] for n in range(2)}
    assert len(notes) == 1  # small files still share a block
    for number in range(2):
        data = random.Random(number).randbytes(3 * MIB)
        assert store.read("s", "v1", f"big{number}.bin") == data
    assert store.verify(deep=True).ok


def test_fold_keeps_each_map_in_a_block_of_its_own(tmp_path: Path) -> None:
    root = tmp_path / "store"
    base = tmp_path / "project"
    base.mkdir()
    with SnapStore(root, fold_threshold=0, durable=False) as store:
        for number in range(3):
            with open(base / f"sparse{number}.img", "wb") as handle:
                handle.truncate(512 * 1024)  # a small file with holes: a fixed-cut map
                handle.write(random.Random(number).randbytes(20_000))
            (base / f"note{number}.txt").write_text(f"note {number}\n" * 50)
            store.create("s", f"v{number}", ["."], base_dir=base)
            repository(store).blobs.close()  # as if each create ran in a process of its own
        before = {assert_alone(store, "v2", f"sparse{n}.img") for n in range(3)}

        repo = repository(store)
        fold = write_merged(repo, FoldPolicy(threshold=2))
        assert fold is not None and set(fold.sources) == before
        assert drop_sources(repo, fold)
        after = {assert_alone(store, "v2", f"sparse{n}.img") for n in range(3)}
        assert after.isdisjoint(before) and len(after) == 1
        for number in range(3):
            assert store.read("s", "v2", f"sparse{number}.img").startswith(
                random.Random(number).randbytes(20_000)
            )
        assert store.verify(deep=True).ok
