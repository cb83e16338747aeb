"""Power cuts during gc in the corners the main power-loss suite does not reach: a loose copy
whose writer died before flushing it, a gc after a failed one, a store missing its packs/
directory."""

from __future__ import annotations

from pathlib import Path

from helpers.blobs import two_file_packs
from helpers.replay import check_every_power_cut, recorded_model
from helpers.scenarios import (
    Scenario,
    _prepare_gc,
    _setup_store,
    expectation,
    open_store,
    template,
)
from helpers.trees import write_tree

from snapstore.backend.layout import FORMAT_TEXT
from snapstore.fs.seam import FileSystem
from snapstore.internals import repository


def _run_gc_after_dead_loose_writer(scenario_dir: Path, fs: FileSystem) -> object:
    """A writer stored a loose copy of a blob that is already packed (and referenced by
    'kept') and died before flushing its shard directory; then gc rewrites that pack."""
    store = open_store(scenario_dir, fs)
    repository(store).blobs.put_bytes(b"new file\n")  # TREE_V2's dir/new.txt, packed and referenced
    store.close()
    report = open_store(scenario_dir, fs).gc()
    assert report.packs_deleted >= 1, report
    return report


def _survives_every_power_cut(scenario: Scenario, scratch: Path) -> None:
    """Record the scenario once, then check every disk a power cut during it could leave."""
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    model = recorded_model(scenario, template_dir, scratch / "recorded")
    check_every_power_cut(scenario, model, expect, scratch, random_per_prefix=0)


def test_gc_drops_packed_copy_trusting_an_unflushed_loose_copy(scratch: Path) -> None:
    scenario = Scenario("gc_dead_loose", _prepare_gc, _run_gc_after_dead_loose_writer)
    _survives_every_power_cut(scenario, scratch)


def _prepare_loose_format_1_without_packs_dir(scenario_dir: Path) -> None:
    """A format 1 store whose blobs are all loose (as versions before packs, or stores with
    fewer than 32 new blobs per snapshot, left them) and that has no (empty) packs/
    directory, as a copy by a tool that drops empty directories leaves it."""
    import shutil

    import blake3
    from helpers.scenarios import _prepare_upgrade

    from snapstore.format import packfile

    _prepare_upgrade(scenario_dir)
    root = scenario_dir / "root"
    packs = root / "packs"
    for index in packs.glob("*.idx"):
        data = index.read_bytes()
        _, count, _ = packfile.INDEX_HEAD_V1.unpack_from(data)
        pack = (packs / (index.stem + ".pack")).read_bytes()
        for k in range(count):
            digest, offset, size = packfile.INDEX_ENTRY_V1.unpack_from(
                data, packfile.INDEX_HEAD_V1.size + k * packfile.INDEX_ENTRY_V1.size
            )
            blob = pack[offset : offset + size]
            assert blake3.blake3(blob).digest() == digest
            shard = root / "blobs" / digest.hex()[:2]
            shard.mkdir(exist_ok=True)
            (shard / digest.hex()[2:]).write_bytes(blob)
            (shard / digest.hex()[2:]).chmod(0o444)
    shutil.rmtree(packs)


def test_upgrade_of_store_without_packs_dir_survives_power_loss(scratch: Path) -> None:
    from helpers.scenarios import _run_upgrade

    scenario = Scenario(
        "upgrade_no_packs_dir", _prepare_loose_format_1_without_packs_dir, _run_upgrade
    )
    template_dir = template(scenario, scratch / "template")
    assert not (template_dir / "root" / "packs").exists()
    expect = expectation(scenario, template_dir, scratch / "reference")
    assert expect.old and expect.old == expect.new
    model = recorded_model(scenario, template_dir, scratch / "recorded")
    check_every_power_cut(scenario, model, expect, scratch, random_per_prefix=0)


def _prepare_marked_loose_store_without_packs_dir(scenario_dir: Path) -> None:
    """As above, but a put_state (any first write) already marked the store format 2."""
    import shutil

    _prepare_loose_format_1_without_packs_dir(scenario_dir)
    root = scenario_dir / "root"
    (root / "packs").mkdir()
    store = _setup_store(scenario_dir)
    store.put_state("s9", "marker", 1)
    store.close()
    shutil.rmtree(root / "packs")
    assert (root / "FORMAT").read_text() == FORMAT_TEXT


def test_gc_of_marked_store_without_packs_dir_survives_power_loss(scratch: Path) -> None:
    from helpers.scenarios import _run_gc

    scenario = Scenario("gc_no_packs_dir", _prepare_marked_loose_store_without_packs_dir, _run_gc)
    _survives_every_power_cut(scenario, scratch)


def test_orphan_pack_unlinked_before_its_index_unlink_is_durable(scratch: Path) -> None:
    """gc #1 unlinks a dead pack's index, then its flush of packs/ fails (EIO; a kill at the
    same point leaves the same disk). gc #2 sees the pack as an orphan and unlinks it without
    flushing packs/. A power cut may then keep the second unlink and lose the first: an
    index naming a missing pack, which verify reports as damage (and gc never clears)."""
    import errno

    import pytest
    from helpers.powerloss import PowerLossModel, capture
    from helpers.seam import RecordingFileSystem
    from helpers.trees import copy_tree

    class FailFirstPacksFlushAfterIdxUnlink(RecordingFileSystem):
        """Fails the flush of packs/ that follows gc's last index unlink."""

        armed = True
        idx_unlinks = 0
        last = 0

        def unlink(self, path, *, dir_fd=None):
            super().unlink(path, dir_fd=dir_fd)
            if path.endswith(".idx"):
                self.idx_unlinks += 1

        def fsync_dir(self, path, *, dir_fd=None):
            if self.armed and self.idx_unlinks == self.last and path.endswith("packs"):
                self.armed = False
                raise OSError(errno.EIO, "injected EIO on fsync of packs/")
            super().fsync_dir(path, dir_fd=dir_fd)

    def run(scenario_dir: Path, fs) -> object:
        if isinstance(fs, FailFirstPacksFlushAfterIdxUnlink):
            with pytest.raises(OSError):
                open_store(scenario_dir, fs).gc()
        return open_store(scenario_dir, fs).gc()

    def prepare(scenario_dir: Path) -> None:
        """As for the gc scenario, with packs that have index files (an appendable pack has
        none: gc unlinks it whole, under the lock)."""
        _prepare_gc(scenario_dir)
        with two_file_packs(_setup_store(scenario_dir)) as store:
            store.gc()  # merges every small pack into one with an index file
            write_tree(scenario_dir / "dead", {"unique.txt": b"garbage soon\n"})
            store.create("s", "dead", ["."], base_dir=scenario_dir / "dead")
            store.delete("s", "dead")  # a pack with an index file, all garbage

    scenario = Scenario("gc_after_failed_gc", prepare, run)
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    work = scratch / "recorded"
    copy_tree(template_dir, work)
    image = capture(work)
    counter = FailFirstPacksFlushAfterIdxUnlink()
    counter.armed = False
    copy_tree(template_dir, scratch / "count")
    open_store(scratch / "count", counter).gc()
    assert counter.idx_unlinks >= 1
    recorder = FailFirstPacksFlushAfterIdxUnlink()
    recorder.last = counter.idx_unlinks
    run(work, recorder)
    assert not recorder.armed
    model = PowerLossModel(work, image, recorder.recording.events)
    check_every_power_cut(scenario, model, expect, scratch, random_per_prefix=0)
