"""Deterministic benchmark trees: seeded file sizes, directory layout and source-like text.

The same (size, seed) always gives byte-identical trees, so runs on different machines and
days compare. Sizes are log-uniform in three bands (many small files, some medium, a few
large), scaled to the preset's total; contents are slices of a seeded text corpus with a
unique first line, so no two files share a blob and git's zlib sees realistic text.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TreeSize:
    """A preset: how many files and about how many bytes in total."""

    files: int
    total_bytes: int


SIZES = {
    "tiny": TreeSize(60, 600_000),
    "small": TreeSize(500, 6_000_000),
    "medium": TreeSize(5_000, 60_000_000),
    "large": TreeSize(50_000, 600_000_000),
}
SIZE_BANDS = ((0.88, 100, 16_000), (0.11, 16_000, 200_000), (0.01, 200_000, 3_000_000))
EXTENSIONS = (".py", ".js", ".ts", ".md", ".json", ".txt", ".c", ".h", ".html", ".css")
CORPUS_BYTES = 4 << 20
FILES_PER_DIR = 20


def _corpus(rng: random.Random) -> bytes:
    letters = "abcdefghijklmnopqrstuvwxyz_"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(3000)]
    lines = []
    size = 0
    while size < CORPUS_BYTES:
        indent = "    " * rng.randint(0, 3)
        line = indent + " ".join(rng.choices(words, k=rng.randint(3, 12))) + "\n"
        lines.append(line)
        size += len(line)
    return "".join(lines).encode()


def _sizes(rng: random.Random, count: int, total: int) -> list[int]:
    raw = []
    for _ in range(count):
        pick = rng.random()
        low, high = SIZE_BANDS[-1][1:]
        for share, band_low, band_high in SIZE_BANDS:
            if pick < share:
                low, high = band_low, band_high
                break
            pick -= share
        raw.append(math.exp(rng.uniform(math.log(low), math.log(high))))
    scale = total / sum(raw)
    return [max(1, int(size * scale)) for size in raw]


def _directories(rng: random.Random, count: int) -> list[str]:
    dirs = [""]
    for index in range(max(0, count - 1)):
        parent = rng.choice(dirs[: 1 + len(dirs) // 2])
        name = f"dir{index:04d}"
        dirs.append(f"{parent}/{name}" if parent else name)
    return dirs


def generate(base: Path, size: TreeSize, seed: int) -> list[str]:
    """Write the tree for ``size`` and ``seed`` under ``base``; returns its file paths, sorted."""
    rng = random.Random(seed)
    corpus = _corpus(rng)
    dirs = _directories(rng, max(1, size.files // FILES_PER_DIR))
    paths = []
    for index, file_size in enumerate(_sizes(rng, size.files, size.total_bytes)):
        directory = rng.choice(dirs)
        name = f"file{index:05d}{rng.choice(EXTENSIONS)}"
        relative = f"{directory}/{name}" if directory else name
        header = f"# {relative} seed {seed}\n".encode()
        body = bytearray(header)
        while len(body) < file_size:
            start = rng.randrange(len(corpus) - 1)
            body += corpus[start : start + file_size - len(body)]
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(body[:file_size]))
        paths.append(relative)
    return sorted(paths)


def change_files(base: Path, paths: list[str], fraction: float, seed: int) -> list[str]:
    """Append a line to ``fraction`` of the files (at least one), chosen by ``seed``."""
    rng = random.Random(seed)
    chosen = rng.sample(paths, max(1, round(len(paths) * fraction)))
    for relative in chosen:
        with open(base / relative, "ab") as file:
            file.write(f"edit {seed} {rng.random()}\n".encode())
    return chosen


def tree_stats(base: Path) -> tuple[int, int]:
    """(number of files, total bytes) under ``base``."""
    count = total = 0
    for directory, _, files in os.walk(base):
        for name in files:
            count += 1
            total += os.lstat(os.path.join(directory, name)).st_size
    return count, total
