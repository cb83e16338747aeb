"""A checkpoint killed while it stores a chunked file (at every write, whole or torn) leaves
the last committed state, or the new one whole once it was committed: the earlier snapshot
reads whole and verify passes."""

from __future__ import annotations

from pathlib import Path

from helpers.fork import run_killed
from helpers.scenarios import BIG_V1, BIG_V2, BY_NAME, SESSION, open_store, template
from helpers.seam import CountingFileSystem
from helpers.trees import copy_tree, remove_tree


def test_a_killed_checkpoint_of_a_chunked_file_leaves_the_last_committed_state(
    tmp_path: Path,
) -> None:
    scenario = BY_NAME["create_chunked"]
    template_dir = template(scenario, tmp_path / "template")
    counting = CountingFileSystem()
    copy_tree(template_dir, tmp_path / "count")
    scenario.run(tmp_path / "count", counting)
    writes = [n for n, operation in enumerate(counting.trace, 1) if operation == "write"]
    assert writes, "the checkpoint wrote nothing through the seam"
    uncommitted = 0
    for kill_at in writes:
        for torn in (False, True):
            work = tmp_path / f"kill-{kill_at}-{int(torn)}"
            copy_tree(template_dir, work)
            assert not run_killed(scenario, work, kill_at, torn=torn)
            store = open_store(work)
            names = [info.name for info in store.list(SESSION)]
            assert names in (["base"], ["base", "new"])
            assert store.read(SESSION, "base", "dir/big.bin") == BIG_V1
            if names == ["base", "new"]:
                assert store.read(SESSION, "new", "dir/big.bin") == BIG_V2
            uncommitted += names == ["base"]
            assert store.verify(deep=True).ok
            store.close()
            remove_tree(work)
    assert uncommitted >= 2  # killed while its chunks were written, at least
