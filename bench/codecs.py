"""Compare compression codecs on real data, per blob and per block, as packs would hold it.

    .venv/bin/python bench/codecs.py history /tmp/flask-history 100  # versions of N states
    .venv/bin/python bench/codecs.py tree medium                     # a generated bench tree

Prints, for each codec and level, the ratio (raw / stored, a unit stored raw when it does not
shrink) and the speed over the raw bytes. ``history`` also groups the versions by path into
1 and 4 MiB blocks, as gc writes them. lz4 is measured when installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))


def codecs() -> dict[str, Callable[[bytes], bytes]]:
    found: dict[str, Callable[[bytes], bytes]] = {}
    for level in (-1, 1, 3, 6, 9, 19):
        found[f"zstd{level}"] = zstandard.ZstdCompressor(level=level).compress
    try:
        import lz4.block  # type: ignore[import-not-found]

        found["lz4"] = lambda data: lz4.block.compress(data, store_size=False)
    except ImportError:
        pass
    found["zlib1"] = lambda data: zlib.compress(data, 1)
    found["zlib6"] = lambda data: zlib.compress(data, 6)
    return found


def blocks(blobs: list[bytes], size: int) -> list[bytes]:
    units, current, filled = [], [], 0
    for blob in blobs:
        current.append(blob)
        filled += len(blob)
        if filled >= size:
            units.append(b"".join(current))
            current, filled = [], 0
    return [*units, b"".join(current)] if current else units


def measure(title: str, units: list[bytes]) -> None:
    raw = sum(map(len, units))
    print(f"== {title}: {raw / 1e6:.2f} MB raw in {len(units)} units")
    for name, compress in codecs().items():
        started = time.perf_counter()
        sizes = [min(len(compress(unit)), len(unit)) for unit in units]
        seconds = time.perf_counter() - started
        print(f"  {name:8s} ratio {raw / sum(sizes):5.2f}  {raw / seconds / 1e6:7.0f} MB/s")


def history_versions(repo: str, states: int) -> list[tuple[str, bytes]]:
    """Each distinct blob of the last ``states`` first-parent commits, with a path of it."""
    commits = subprocess.check_output(
        ["git", "-C", repo, "rev-list", "--first-parent", f"-n{states}", "HEAD"], text=True
    ).split()
    paths: dict[str, str] = {}
    for commit in reversed(commits):
        listing = subprocess.check_output(["git", "-C", repo, "ls-tree", "-r", commit], text=True)
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            _, kind, sha = meta.split()
            if kind == "blob":
                paths.setdefault(sha, path)
    batch = subprocess.run(
        ["git", "-C", repo, "cat-file", "--batch"],
        input=("\n".join(paths) + "\n").encode(),
        capture_output=True,
        check=True,
    ).stdout
    found, position = [], 0
    while position < len(batch):
        end = batch.index(b"\n", position)
        sha, _, size = batch[position:end].split()
        data = batch[end + 1 : end + 1 + int(size)]
        found.append((paths[sha.decode()], data))
        position = end + 1 + int(size) + 1
    return found


def main(argv: list[str]) -> None:
    if argv[0] == "history":
        versions = history_versions(argv[1], int(argv[2]))
        measure("versions, per blob", [data for _, data in versions])
        by_path = [data for _, data in sorted(versions, key=lambda item: item[0])]
        for size in (1 << 20, 4 << 20):
            measure(f"versions grouped by path, {size >> 20} MiB blocks", blocks(by_path, size))
    else:
        import trees

        base = Path(os.environ.get("TMPDIR", "/tmp")) / f"codecs-tree-{argv[1]}"
        if not base.exists():
            trees.generate(base, trees.SIZES[argv[1]], 1)
        data = [p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()]
        measure("bench tree, per blob", data)
        measure("bench tree, 1 MiB blocks", blocks(data, 1 << 20))


if __name__ == "__main__":
    main(sys.argv[1:])
