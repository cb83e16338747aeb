"""The checkpoint stores: round trips, one checkpoint per key, and corrupt values that raise."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgpack
import pytest
from helpers.checkpoints import write_lines

from snapstore import SnapStore
from snapstore.checkpoint import (
    CHECKPOINT_SESSION,
    Checkpointer,
    CheckpointStore,
    CorruptCheckpointError,
    FileCheckpointStore,
    FileIdentity,
    LinesSource,
    MemoryCheckpointStore,
    RunInfo,
)
from snapstore.errors import InvalidNameError, InvalidValueError


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    """Each store implementation, empty."""
    if request.param == "memory":
        return MemoryCheckpointStore()
    return FileCheckpointStore(SnapStore(tmp_path / "root", durable=False))


def test_load_of_a_key_never_saved_is_none(store: CheckpointStore) -> None:
    assert store.load("nothing") is None
    assert store.keys() == []
    assert store.delete("nothing") is False


def test_save_then_load_round_trips_value_identity_and_run(store: CheckpointStore) -> None:
    identity = FileIdentity("/data/in.csv", 120, 1_700_000_000_000_000_000, 64769, 4242, "ab" * 16)
    run = RunInfo("csv", 50, 1200, "interval")
    before = datetime.now(UTC)
    saved = store.save("orders", {"offset": 4096, "records": 1200}, identity=identity, run=run)
    loaded = store.load("orders")
    assert loaded == saved
    assert loaded.value == {"offset": 4096, "records": 1200}
    assert loaded.identity == identity and loaded.run == run
    assert loaded.saved_at.tzinfo is not None and before <= loaded.saved_at <= datetime.now(UTC)


def test_values_read_back_as_msgpack_types(store: CheckpointStore) -> None:
    saved = store.save("k", {"cursor": (1, 2), "etag": b"\x00\xff", "since": None, "ok": True})
    assert saved.value == {"cursor": [1, 2], "etag": b"\x00\xff", "since": None, "ok": True}
    loaded = store.load("k")
    assert loaded is not None and loaded.value == saved.value


def test_a_saved_value_is_a_copy(store: CheckpointStore) -> None:
    value = {"cursor": [1]}
    store.save("k", value)
    value["cursor"].append(2)
    loaded = store.load("k")
    assert loaded is not None and loaded.value == {"cursor": [1]}


@pytest.mark.parametrize("value", [{1: "integer key"}, object(), {"when": datetime.now(UTC)}])
def test_a_value_that_cannot_read_back_is_refused_before_saving(
    store: CheckpointStore, value: object
) -> None:
    store.save("k", "previous")
    with pytest.raises(InvalidValueError, match="'k' cannot be stored"):
        store.save("k", value)
    loaded = store.load("k")
    assert loaded is not None and loaded.value == "previous"


def test_one_checkpoint_per_key_and_delete(store: CheckpointStore) -> None:
    store.save("b", 1)
    store.save("a", 2)
    store.save("b", 3)
    assert store.keys() == ["a", "b"]
    loaded = store.load("b")
    assert loaded is not None and loaded.value == 3
    assert store.delete("b") is True
    assert store.load("b") is None
    assert store.keys() == ["a"]


@pytest.mark.parametrize("key", ["", None, 7])
def test_a_key_must_be_a_non_empty_string(store: CheckpointStore, key: object) -> None:
    with pytest.raises(InvalidNameError):
        store.save(key, 1)  # type: ignore[arg-type]


def test_keys_that_differ_only_in_case_or_slashes_stay_apart(store: CheckpointStore) -> None:
    for key in ("a/b", "a_b", "Feed", "feed"):
        store.save(key, key)
    for key in ("a/b", "a_b", "Feed", "feed"):
        loaded = store.load(key)
        assert loaded is not None and loaded.value == key


def test_file_store_is_shared_by_store_objects_on_one_root(tmp_path: Path) -> None:
    first = FileCheckpointStore(tmp_path / "root")
    second = FileCheckpointStore(tmp_path / "root")
    first.save("feed", {"cursor": "c1"})
    loaded = second.load("feed")
    assert loaded is not None and loaded.value == {"cursor": "c1"}
    assert second.keys() == ["feed"]


def test_file_store_keeps_checkpoints_in_their_own_session(tmp_path: Path) -> None:
    snapstore = SnapStore(tmp_path / "root", durable=False)
    snapstore.put_state("app", "feed", "not a checkpoint")
    store = FileCheckpointStore(snapstore)
    store.save("feed", 1)
    assert snapstore.sessions() == sorted(["app", CHECKPOINT_SESSION])
    assert store.keys() == ["feed"]


def test_default_root_is_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SNAPSTORE_ROOT", str(tmp_path / "from-env"))
    FileCheckpointStore().save("k", 1)
    assert FileCheckpointStore(tmp_path / "from-env").keys() == ["k"]


def test_default_root_without_the_variable_is_dot_snapstore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SNAPSTORE_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    FileCheckpointStore().save("k", 1)
    assert (tmp_path / ".snapstore" / "FORMAT").is_file()
    assert FileCheckpointStore(tmp_path / ".snapstore").keys() == ["k"]


# ----------------------------------------------------------------- corrupt values


@pytest.mark.parametrize(
    "stored",
    [
        42,
        {"offset": 10},
        {"checkpoint": 1, "key": "feed"},
        {"checkpoint": 1, "key": "other", "value": 1, "saved_at": "2024-01-01T00:00:00+00:00"},
        {"checkpoint": 1, "key": "feed", "value": 1, "saved_at": "yesterday"},
        {"checkpoint": 1, "key": "feed", "value": 1, "saved_at": "2024-01-01T00:00:00"},
        {
            "checkpoint": 1,
            "key": "feed",
            "value": 1,
            "saved_at": "2024-01-01T00:00:00+00:00",
            "identity": {"path": "/x", "size": -1},
        },
        {
            "checkpoint": 1,
            "key": "feed",
            "value": 1,
            "saved_at": "2024-01-01T00:00:00+00:00",
            "run": {"source": "lines", "every": 0, "records": 0, "trigger": "interval"},
        },
    ],
)
def test_a_malformed_saved_value_raises_instead_of_reading_as_none(
    tmp_path: Path, stored: object
) -> None:
    snapstore = SnapStore(tmp_path / "root", durable=False)
    snapstore.put_state(CHECKPOINT_SESSION, "feed", stored)
    with pytest.raises(CorruptCheckpointError, match="checkpoint 'feed' is corrupt"):
        FileCheckpointStore(snapstore).load("feed")


def test_a_newer_format_is_named_in_the_error(tmp_path: Path) -> None:
    snapstore = SnapStore(tmp_path / "root", durable=False)
    snapstore.put_state(CHECKPOINT_SESSION, "feed", {"checkpoint": 9, "key": "feed", "value": 1})
    with pytest.raises(CorruptCheckpointError, match="format 9, newer"):
        FileCheckpointStore(snapstore).load("feed")


def _manifest_of(root: Path) -> Path:
    """The one manifest file under ``root``."""
    (manifest,) = (root / "sessions").rglob("*.manifest")
    return manifest


def test_damaged_bytes_on_disk_raise_corrupt_checkpoint(tmp_path: Path) -> None:
    store = FileCheckpointStore(SnapStore(tmp_path / "root", durable=False))
    store.save("feed", {"cursor": "abcdef"})
    manifest = _manifest_of(tmp_path / "root")
    data = bytearray(manifest.read_bytes())
    data[-3] ^= 0xFF
    manifest.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="cannot be read") as raised:
        store.load("feed")
    assert raised.value.key == "feed"


def test_a_truncated_manifest_raises_corrupt_checkpoint(tmp_path: Path) -> None:
    store = FileCheckpointStore(SnapStore(tmp_path / "root", durable=False))
    store.save("feed", {"cursor": "abcdef"})
    manifest = _manifest_of(tmp_path / "root")
    os.truncate(manifest, manifest.stat().st_size // 2)
    with pytest.raises(CorruptCheckpointError):
        store.load("feed")


def test_a_file_snapshot_under_a_checkpoint_key_is_not_read_as_one(tmp_path: Path) -> None:
    snapstore = SnapStore(tmp_path / "root", durable=False)
    (tmp_path / "f.txt").write_text("x")
    snapstore.create(CHECKPOINT_SESSION, "feed", ["f.txt"], base_dir=tmp_path)
    with pytest.raises(CorruptCheckpointError, match="file snapshot"):
        FileCheckpointStore(snapstore).load("feed")


def test_memory_store_raises_on_damaged_bytes() -> None:
    store = MemoryCheckpointStore()
    store.put_raw("feed", b"\xc1 not msgpack")
    with pytest.raises(CorruptCheckpointError):
        store.load("feed")
    store.put_raw("feed", msgpack.packb([1, 2, 3]))
    with pytest.raises(CorruptCheckpointError, match="is a list"):
        store.load("feed")


def test_a_corrupt_checkpoint_stops_the_run_before_any_record(tmp_path: Path) -> None:
    source_path = tmp_path / "in.txt"
    write_lines(source_path, 10)
    snapstore = SnapStore(tmp_path / "root", durable=False)
    snapstore.put_state(CHECKPOINT_SESSION, "feed", {"offset": 30})
    checkpointer = Checkpointer(FileCheckpointStore(snapstore), "feed", every=2)
    handled: list[str] = []
    with pytest.raises(CorruptCheckpointError):
        handled.extend(checkpointer.iterate(LinesSource(source_path)))
    assert handled == []
    assert snapstore.get_state(CHECKPOINT_SESSION, "feed") == {"offset": 30}
