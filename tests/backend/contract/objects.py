"""The contract's tests of opening, properties, objects, versions and staged objects (part
of ``BackendContract``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snapstore import ConcurrentWriteError, InvalidNameError
from snapstore.backend.layout import FORMAT_TEXT
from snapstore.backend.seam import Backend, Handle, Kind, Properties
from snapstore.errors import StoreNotFoundError
from snapstore.fs.reading import UnfitFileError

from .shared import (
    HOSTILE_NAMES,
    SAMPLES,
    MakeBackend,
    digest,
    payload,
    same_object,
)


class ObjectsContract:
    """The contract's tests of opening, properties, objects, versions and staged objects."""

    # ------------------------------------------------------------------ opening, properties

    def test_opening_a_place_without_a_store_needs_create(self, make_backend: MakeBackend) -> None:
        fresh = make_backend()
        try:
            with pytest.raises(StoreNotFoundError):
                fresh.open(create=False)
            assert fresh.open(create=True) is True
            assert fresh.open(create=False) is True
            assert fresh.open(create=True) is True
        finally:
            fresh.close()

    def test_properties_say_what_the_backend_guarantees(self, backend: Backend) -> None:
        props = backend.properties
        assert isinstance(props, Properties)
        assert isinstance(props.durable, bool)
        assert props.parallel_reads >= 1
        assert isinstance(props.write_once, frozenset)
        assert props.write_once <= {Kind.BLOB, Kind.PACK, Kind.INDEX}
        assert isinstance(props.fresh_listings, bool)
        if props.local_root is not None:
            assert Path(props.local_root).is_absolute() and Path(props.local_root).is_dir()
            for kind, name in SAMPLES.items():
                assert backend.describe(Handle(kind, name)).startswith(props.local_root)

    def test_describe_names_each_object_apart_without_touching_it(self, backend: Backend) -> None:
        shown = {backend.describe(Handle(kind, name)) for kind, name in SAMPLES.items()}
        shown.add(backend.describe(Handle(Kind.BLOB, "cd" * 32)))
        assert len(shown) == len(SAMPLES) + 1
        assert all(isinstance(text, str) and text for text in shown)
        assert backend.names(Kind.BLOB) == []
        assert backend.describe(Handle(Kind.MARKER, ""))

    def test_now_is_the_clock_that_stamps_writes(self, backend: Backend) -> None:
        before = backend.now_ns()
        backend.write(Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST]), b"m")
        written = backend.stat(Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST])).written_ns
        after = backend.now_ns()
        # One-second resolution (HTTP dates) truncates both the clock and the stamps.
        assert before - 1_000_000_000 <= written <= after + 1_000_000_000

    # ------------------------------------------------------------------ writing and reading

    @pytest.mark.parametrize("kind", list(SAMPLES))
    def test_each_kind_round_trips(self, backend: Backend, kind: Kind) -> None:
        handle = Handle(kind, SAMPLES[kind])
        data = payload(3000, seed=list(SAMPLES).index(kind))
        backend.write(handle, data, durable=kind is not Kind.CACHE)
        got, info = backend.read(handle, max_bytes=len(data))
        assert got == data
        assert same_object(info, backend.stat(handle))
        assert info.size == len(data) and info.written_ns > 0
        assert backend.names(kind) == [handle.name]
        listed = backend.infos(kind)
        assert list(listed) == [handle.name]
        assert same_object(info, listed[handle.name])
        for other_kind in SAMPLES.keys() - {kind, Kind.CACHE}:  # a backend may cache in CACHE
            if {kind, other_kind} != {Kind.PACK, Kind.INDEX}:
                assert backend.names(other_kind) == []
        backend.delete(handle)
        assert backend.names(kind) == []
        with pytest.raises(FileNotFoundError):
            backend.stat(handle)

    def test_kinds_are_separate_namespaces(self, backend: Backend) -> None:
        name = "1f" * 16
        backend.write(Handle(Kind.PACK, name), b"pack bytes")
        backend.write(Handle(Kind.INDEX, name), b"index")
        backend.write(Handle(Kind.JOURNAL, name), b"journal")
        assert backend.read(Handle(Kind.PACK, name), max_bytes=100)[0] == b"pack bytes"
        assert backend.read(Handle(Kind.INDEX, name), max_bytes=100)[0] == b"index"
        backend.delete(Handle(Kind.PACK, name))
        assert backend.names(Kind.INDEX) == [name] and backend.names(Kind.PACK) == []
        assert backend.names(Kind.JOURNAL) == [name]

    def test_the_marker_is_written_and_read_by_handle(self, backend: Backend) -> None:
        marker = Handle(Kind.MARKER, "")
        backend.write(marker, FORMAT_TEXT.encode())
        assert backend.read(marker, max_bytes=256)[0] == FORMAT_TEXT.encode()
        assert backend.stat(marker).size == len(FORMAT_TEXT)

    def test_an_empty_object_is_an_object(self, backend: Backend) -> None:
        handle = Handle(Kind.JOURNAL, SAMPLES[Kind.JOURNAL])
        backend.write(handle, b"")
        data, info = backend.read(handle, max_bytes=0)
        assert data == b"" and same_object(info, backend.stat(handle))
        assert backend.stat(handle).size == 0
        assert backend.read_head(handle, 10)[0] == b""
        assert backend.read_range(handle, 0, 10) == b""
        assert b"".join(backend.chunks(handle, 4)) == b""
        assert backend.names(Kind.JOURNAL) == [handle.name]

    def test_reads_are_bounded_ranged_and_chunked(self, backend: Backend) -> None:
        handle = Handle(Kind.PACK, SAMPLES[Kind.PACK])
        data = payload(10_240)
        backend.write(handle, data)
        with pytest.raises(UnfitFileError):
            backend.read(handle, max_bytes=len(data) - 1)
        assert backend.read(handle, max_bytes=len(data))[0] == data
        assert backend.read_range(handle, 100, 50) == data[100:150]
        assert backend.read_range(handle, 0, len(data)) == data
        assert backend.read_range(handle, len(data) - 10, 50) == data[-10:]
        assert backend.read_range(handle, len(data) + 5, 10) == b""
        assert backend.read_range(handle, 3, 0) == b""
        head, info = backend.read_head(handle, 16)
        assert head == data[:16] and same_object(info, backend.stat(handle))
        assert backend.read_head(handle, len(data) * 2)[0] == data
        pieces = list(backend.chunks(handle, 1000))
        assert b"".join(pieces) == data
        assert all(0 < len(piece) <= 1000 for piece in pieces)

    def test_a_missing_object_is_file_not_found_everywhere(self, backend: Backend) -> None:
        for kind, name in SAMPLES.items():
            missing = Handle(kind, name)
            with pytest.raises(FileNotFoundError):
                backend.stat(missing)
            with pytest.raises(FileNotFoundError):
                backend.read(missing, max_bytes=10)
            with pytest.raises(FileNotFoundError):
                backend.read_head(missing, 10)
            with pytest.raises(FileNotFoundError):
                backend.read_range(missing, 0, 10)
            with pytest.raises(FileNotFoundError):
                list(backend.chunks(missing, 10))
            with pytest.raises(FileNotFoundError):
                backend.delete(missing)
            with pytest.raises(FileNotFoundError):
                backend.delete(missing, version="no such version")

    @pytest.mark.parametrize(("kind", "name"), HOSTILE_NAMES)
    def test_a_name_no_object_can_have_is_refused(
        self, backend: Backend, kind: Kind, name: str
    ) -> None:
        handle = Handle(kind, name)
        calls: list[Callable[[], Any]] = [
            lambda: backend.write(handle, b"x"),
            lambda: backend.stat(handle),
            lambda: backend.read(handle, max_bytes=10),
            lambda: backend.read_head(handle, 10),
            lambda: backend.read_range(handle, 0, 10),
            lambda: list(backend.chunks(handle, 10)),
            lambda: backend.delete(handle),
            lambda: backend.describe(handle),
        ]
        if kind is not Kind.MARKER:
            staged = backend.stage(kind)
            staged.write(b"x")
            calls.append(lambda: staged.commit(name))
        for call in calls:
            with pytest.raises(InvalidNameError):
                call()
        for listed in SAMPLES:
            assert backend.names(listed) == []

    def test_unusual_but_valid_names_round_trip(self, backend: Backend) -> None:
        names = ["with space", "ünïcödé", "dots.in.name", "-dash", "a%2Fb", "x" * 200]
        for name in names:
            backend.write(Handle(Kind.JOURNAL, name), name.encode())
        backend.write(Handle(Kind.CACHE, "heads/ünï code"), b"cached")
        backend.write(Handle(Kind.MANIFEST, "s p/n.ü"), b"manifest")
        assert backend.names(Kind.JOURNAL) == sorted(names)
        for name in names:
            assert backend.read(Handle(Kind.JOURNAL, name), max_bytes=300)[0] == name.encode()
        assert backend.names(Kind.CACHE, "heads/") == ["heads/ünï code"]
        assert backend.names(Kind.MANIFEST, "s p/") == ["s p/n.ü"]

    def test_something_that_is_no_object_is_unfit(
        self, backend: Backend, plant_unfit: Callable[[Backend, Handle], None] | None
    ) -> None:
        if plant_unfit is None:
            pytest.skip("this backend holds nothing but objects")
        handle = Handle(Kind.BLOB, SAMPLES[Kind.BLOB])
        plant_unfit(backend, handle)
        with pytest.raises(UnfitFileError):
            backend.stat(handle)
        with pytest.raises(UnfitFileError):
            backend.read(handle, max_bytes=100)
        assert backend.infos(Kind.BLOB) == {handle.name: None}

    # ------------------------------------------------------------------ versions

    def test_a_rewrite_replaces_the_whole_object_and_moves_its_version(
        self, backend: Backend
    ) -> None:
        handle = Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST])
        backend.write(handle, b"first, the longer one")
        first = backend.stat(handle).version
        assert backend.stat(handle).version == first
        assert backend.read(handle, max_bytes=100)[1].version == first
        backend.write(handle, b"second")
        assert backend.read(handle, max_bytes=100)[0] == b"second"
        assert backend.stat(handle).version != first
        assert backend.stat(handle).size == len(b"second")

    def test_a_delete_of_the_version_read_never_removes_a_newer_one(
        self, backend: Backend, other: Backend
    ) -> None:
        handle = Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST])
        backend.write(handle, b"first")
        judged = backend.stat(handle).version
        other.write(handle, b"second, by another writer")
        with pytest.raises(ConcurrentWriteError):
            backend.delete(handle, version=judged)
        assert backend.read(handle, max_bytes=100)[0] == b"second, by another writer"
        backend.delete(handle, version=backend.stat(handle).version)
        assert backend.names(Kind.MANIFEST) == [] and other.names(Kind.MANIFEST) == []

    @pytest.mark.parametrize("kind", [Kind.BLOB, Kind.PACK, Kind.INDEX])
    def test_write_once_kinds_refuse_other_bytes(
        self, backend: Backend, other: Backend, kind: Kind
    ) -> None:
        """Where ``write_once`` holds a kind, a write of an object that is there loses
        (ConcurrentWriteError) unless it is the same object: a blob whose bytes match its
        name, an index with the same bytes (a pack's name is random: a second write of one is
        always another writer's); elsewhere a write replaces."""
        first, second = b"the first writer's bytes", b"another writer's bytes"
        handle = Handle(kind, digest(first) if kind is Kind.BLOB else SAMPLES[kind])
        backend.write(handle, first)
        if kind is not Kind.PACK or kind not in backend.properties.write_once:
            other.write(handle, first)
        if kind in backend.properties.write_once:
            with pytest.raises(ConcurrentWriteError):
                other.write(handle, second)
            expected = first
        else:
            other.write(handle, second)
            expected = second
        assert backend.read(handle, max_bytes=100)[0] == expected
        assert other.read(handle, max_bytes=100)[0] == expected

    def test_readers_see_a_whole_version_while_a_writer_replaces_it(
        self, backend: Backend, other: Backend
    ) -> None:
        handle = Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST])
        versions = [payload(5000 + 997 * i, seed=i) for i in range(4)]
        backend.write(handle, versions[0])
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                for i in range(24):
                    backend.write(handle, versions[i % len(versions)])
            except BaseException as error:
                errors.append(error)
            finally:
                stop.set()

        thread = threading.Thread(target=writer)
        thread.start()
        seen = 0
        while not stop.is_set() or seen == 0:
            data, info = other.read(handle, max_bytes=1 << 20)
            assert data in versions and info.size == len(data)
            seen += 1
        thread.join()
        assert not errors

    # ------------------------------------------------------------------ staged objects

    def test_staged_objects_are_invisible_until_committed(self, backend: Backend) -> None:
        staged = backend.stage(Kind.BLOB, size_hint=11)
        staged.write(b"half")
        staged.restart()
        assert staged.size == 0
        staged.write(b"whole ")
        staged.write(memoryview(b"bytes"))
        assert staged.size == len(b"whole bytes")
        assert backend.names(Kind.BLOB) == []
        with pytest.raises(FileNotFoundError):
            backend.stat(Handle(Kind.BLOB, "cd" * 32))
        staged.commit("cd" * 32)
        backend.flush()
        assert backend.read(Handle(Kind.BLOB, "cd" * 32), max_bytes=100)[0] == b"whole bytes"
        dropped = backend.stage(Kind.PACK)
        dropped.write(b"never published")
        dropped.abort()
        assert backend.names(Kind.PACK) == []
        assert backend.stale_temps() == []

    def test_a_large_staged_object_is_committed_whole(
        self, backend: Backend, other: Backend
    ) -> None:
        data = payload(3 << 20)
        staged = backend.stage(Kind.PACK, size_hint=len(data))
        for start in range(0, len(data), 1 << 18):
            staged.write(data[start : start + (1 << 18)])
        staged.commit(SAMPLES[Kind.PACK], name_durable=True)
        handle = Handle(Kind.PACK, SAMPLES[Kind.PACK])
        assert other.stat(handle).size == len(data)
        assert b"".join(other.chunks(handle, 1 << 20)) == data
        assert other.read_range(handle, len(data) - 100, 100) == data[-100:]

    def test_committing_an_object_another_writer_made_the_same(
        self, backend: Backend, other: Backend
    ) -> None:
        """Two writers storing the same blob (named by its bytes) both succeed."""
        handle = Handle(Kind.BLOB, digest(b"same bytes"))
        other.write(handle, b"same bytes")
        staged = backend.stage(Kind.BLOB)
        staged.write(b"same bytes")
        staged.commit(handle.name)
        backend.note_existing(handle)
        backend.flush()
        assert backend.read(handle, max_bytes=100)[0] == b"same bytes"

    def test_flush_and_note_existing_make_names_durable_and_change_nothing_else(
        self, backend: Backend, other: Backend
    ) -> None:
        names = [f"{i:02x}" * 32 for i in range(5)]
        for name in names:
            staged = backend.stage(Kind.BLOB)
            staged.write(name.encode())
            staged.commit(name)
        other.write(Handle(Kind.BLOB, "ff" * 32), b"by another writer")
        backend.note_existing(Handle(Kind.BLOB, "ff" * 32))
        backend.flush()
        backend.flush()
        with backend.lock("gc").shared():
            assert backend.names(Kind.BLOB) == sorted([*names, "ff" * 32])
        assert other.read(Handle(Kind.BLOB, names[3]), max_bytes=100)[0] == names[3].encode()
