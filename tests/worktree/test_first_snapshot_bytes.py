"""What a first snapshot stores is pinned: the same tree gives the same root tree digest and
the same pack layout (which blob lies where in which block) from one release to the next.

A change meant only to make a first snapshot cheaper (fewer steps per file read, hashed or
packed) must leave both as they are; anything that changes what a user finds on disk fails
here first, and needs a decision of its own (and new pinned values). The layout is compared
before compression (each block's kind and raw size, each blob's block, offset and length),
so another zstd version, which may compress the same block to other bytes, does not fail it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from snapstore import SnapStore, internals

MIB = 1 << 20
MTIME_NS = 1_700_000_000_123_456_789
ROOT_TREE = "1468a2b3a69fec10a1c32fa1a62569b699501aea84f0af6588024594b7634179"
PACK_LAYOUT = "38fe2a8c2d38be73f0c1a5af1f066cabdb9f0b8ab9c6e3075b5867530fdc9c63"


def _content(seed: int, size: int) -> bytes:
    """``size`` bytes that compress a little (a digest stream, each value repeated)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        digest = hashlib.blake2b(f"{seed}:{counter}".encode()).digest()
        out += digest * 3
        counter += 1
    return bytes(out[:size])


def _tree(root: Path) -> Path:
    """Nested directories of small files, an empty file, files read whole and files cut into
    chunks (1 to 3 MiB, one past the reading-aside limit), a symlink, two hard links of one
    file and a .gitignore, every mode and mtime set."""
    tree = root / "tree"
    for index in range(40):
        directory = tree / f"d{index % 7}" / f"e{index % 3}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{index:02}.txt").write_bytes(_content(index, 50 + 997 * index))
    (tree / "empty").write_bytes(b"")
    for index, size in enumerate((MIB, 2 * MIB + 17, 3 * MIB + 5, 9 * MIB)):
        (tree / "d1" / f"large{index}.bin").write_bytes(_content(100 + index, size))
    (tree / "d2" / "linked").write_bytes(_content(7, 5000))
    os.link(tree / "d2" / "linked", tree / "d3" / "linked-too")
    (tree / ".gitignore").write_text("*.log\n")
    (tree / "ignored.log").write_text("left out\n")
    os.symlink("d1/large0.bin", tree / "to-large")
    for directory, subdirectories, files in os.walk(tree, topdown=False):
        for name in files:
            path = os.path.join(directory, name)
            os.chmod(path, 0o755 if name.endswith("3.txt") else 0o644)
            os.utime(path, ns=(MTIME_NS, MTIME_NS + len(name)))
        for name in subdirectories:
            os.chmod(os.path.join(directory, name), 0o755)
            os.utime(os.path.join(directory, name), ns=(MTIME_NS, MTIME_NS))
    # One inode under two names: its mtime must not depend on the file system's walk order.
    os.utime(tree / "d2" / "linked", ns=(MTIME_NS, MTIME_NS + 10))
    os.utime(tree / "to-large", ns=(MTIME_NS, MTIME_NS), follow_symlinks=False)
    os.utime(tree, ns=(MTIME_NS, MTIME_NS))
    return tree


def _layout(store: SnapStore) -> str:
    """A digest of the packs' layout before compression: each block's kind and raw size,
    each blob's block, offset and length, by digest."""
    indexes = internals.repository(store).blobs.packs.indexes()
    described = hashlib.sha256()
    for index in sorted(indexes, key=lambda found: min(found.entries)):
        for block in index.blocks:
            described.update(f"block {block.kind} {block.raw}\n".encode())
        for digest, entry in sorted(index.entries.items()):
            described.update(f"{digest.hex()} {entry}\n".encode())
    return described.hexdigest()


def test_a_first_snapshot_stores_the_same_bytes(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    store = SnapStore(tmp_path / "store")
    store.create("s", "first", ["."], base_dir=tree)
    manifest = internals.repository(store).catalog.read("s", "first")
    assert manifest.tree is not None
    assert (manifest.tree.digest.hex(), _layout(store)) == (ROOT_TREE, PACK_LAYOUT)
