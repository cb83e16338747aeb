"""A writer killed with SIGKILL at a random moment leaves the old or the new snapshot, whole."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.trees import write_tree

from snapstore import SnapStore

WRITER = """
import sys
from pathlib import Path
from snapstore import SnapStore
root, base = sys.argv[1], Path(sys.argv[2])
store = SnapStore(root)
version = 0
while True:
    version += 1
    for index in range(20):
        (base / f"f{index}.txt").write_text(f"v{version}-{index}" * 200)
    store.create("s", "n", ["."], base_dir=base, meta={"version": version})
    print(version, flush=True)
"""


def test_kill_9_during_repeated_overwrites(root: Path, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {f"f{i}.txt": "initial" for i in range(20)})
    SnapStore(root).create("s", "n", ["."], base_dir=base, meta={"version": 0})
    rng = random.Random(1234)
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(base)], stdout=subprocess.PIPE
        )
        time.sleep(rng.uniform(0.05, 0.6))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        store = SnapStore(root)
        snapshot = store.get("s", "n")
        version = snapshot.info.meta["version"]
        for entry in snapshot.entries:
            data = store.read("s", "n", entry.path)
            if version:
                index = entry.path.removeprefix("f").removesuffix(".txt")
                assert data == (f"v{version}-{index}" * 200).encode()
            else:
                assert data == b"initial"
        assert store.verify(deep=True).ok
    store = SnapStore(root)
    store.gc()
    assert os.listdir(root / "tmp") == []
    assert store.verify(deep=True).ok
