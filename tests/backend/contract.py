"""The contract every storage backend keeps: one suite, bound once per backend.

``BackendContract`` is a plain test class. A backend binds it by subclassing it in a test
module (the class name must start with ``Test``) and providing its fixtures:

- ``make_backend``: a callable returning a new, unopened backend. Called with no argument it
  makes a fresh store in a fresh place; with ``sharing=<backend>`` it makes another backend on
  the same store, as another process or host would open it (a backend that cannot be opened
  twice, such as memory, returns the one given). Backends are made with
  ``lock_timeout=LOCK_TIMEOUT``.
- ``failing``: ``failing(backend)`` is a context manager inside which every change the
  backend makes to the store fails with an OSError before it is applied (the I/O seam for the
  local backend, refused requests for object storage); or None where a change cannot fail.
- ``plant_stale_temp``: ``plant_stale_temp(backend)`` leaves what a writer killed half-way
  through an object leaves behind (a temp file, an unfinished upload); or None where nothing
  can be left.
- ``plant_unfit``: ``plant_unfit(backend, handle)`` puts something at ``handle``'s place that
  is no object (a FIFO, say); or None where nothing but objects can be there.

A hook set to None is a statement about the backend, and the tests that need it say so in the
report (they skip with the reason); a binding that forgets one fails. What differs between
backends by design is read from ``Properties`` and checked as promised, never skipped.
``docs/backends.md`` describes the seam in prose.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from snapstore import ConcurrentWriteError, InvalidNameError, LockTimeout, SnapStore
from snapstore.backend.layout import FORMAT_TEXT
from snapstore.backend.seam import Backend, Handle, Kind, ObjectInfo, Properties
from snapstore.errors import StoreNotFoundError
from snapstore.format.hashing import new_hasher
from snapstore.fs.reading import UnfitFileError

LOCK_TIMEOUT = 0.3
"""The ``lock_timeout`` a binding makes its backends with."""

SAMPLES = {
    Kind.BLOB: "ab" * 32,
    Kind.PACK: "1f" * 16,
    Kind.INDEX: "1f" * 16,
    Kind.MANIFEST: "s-0123456789abcdef/n-0123456789abcdef",
    Kind.JOURNAL: "0e" * 16,
    Kind.CACHE: "headers",
}
"""A well-formed name of each kind that is listed (the marker is read and written by handle)."""

HOSTILE_NAMES = [
    (Kind.BLOB, ""),
    (Kind.BLOB, "../" + "ab" * 31),
    (Kind.BLOB, "ab/" + "cd" * 31),
    (Kind.PACK, ".."),
    (Kind.PACK, "/etc/passwd"),
    (Kind.INDEX, "a\x00b"),
    (Kind.MANIFEST, "session-only"),
    (Kind.MANIFEST, "s/n/extra"),
    (Kind.MANIFEST, "../n"),
    (Kind.MANIFEST, "s/.."),
    (Kind.MANIFEST, "/s/n"),
    (Kind.JOURNAL, "../../outside"),
    (Kind.JOURNAL, "."),
    (Kind.CACHE, "heads//s"),
    (Kind.CACHE, "heads/../../outside"),
    (Kind.MARKER, "not-empty"),
]
"""Names no object of their kind can have: empty, absolute, with ``.``/``..`` or empty
components, NUL, or the wrong number of components."""


class MakeBackend(Protocol):
    def __call__(self, *, sharing: Backend | None = None) -> Backend: ...


Failing = Callable[[Backend], contextlib.AbstractContextManager[None]]


def digest(data: bytes) -> str:
    """The name of a blob holding ``data``."""
    return str(new_hasher(len(data)).update(data).hexdigest())


def same_object(one: ObjectInfo, other: ObjectInfo) -> bool:
    """Whether two infos describe the same version of an object (``written_ns`` may come from
    different clock readings: a create's own, or the store's)."""
    return (one.size, one.version) == (other.size, other.version)


def payload(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that differ at every offset from those of another seed."""
    return bytes((i * 7 + seed * 13 + (i >> 8)) % 256 for i in range(size))


class BackendContract:
    """The suite; see the module docstring for how to bind it."""

    # ------------------------------------------------------------------ what a binding gives

    @pytest.fixture
    def make_backend(self) -> MakeBackend:
        pytest.fail("the binding must provide the make_backend fixture")

    @pytest.fixture
    def failing(self) -> Failing | None:
        pytest.fail("the binding must provide the failing fixture (None: changes cannot fail)")

    @pytest.fixture
    def plant_stale_temp(self) -> Callable[[Backend], None] | None:
        pytest.fail("the binding must provide plant_stale_temp (None: nothing is left)")

    @pytest.fixture
    def plant_unfit(self) -> Callable[[Backend, Handle], None] | None:
        pytest.fail("the binding must provide plant_unfit (None: only objects can be there)")

    # ------------------------------------------------------------------ the suite's own

    @pytest.fixture
    def backend(self, make_backend: MakeBackend) -> Iterator[Backend]:
        made = make_backend()
        assert made.open(create=True) is True
        yield made
        made.close()

    @pytest.fixture
    def other(self, make_backend: MakeBackend, backend: Backend) -> Iterator[Backend]:
        """Another process's (or host's) backend on the same store."""
        made = make_backend(sharing=backend)
        assert made.open(create=False) is True
        yield made
        if made is not backend:
            made.close()

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

    # ------------------------------------------------------------------ listing

    def test_names_are_sorted_and_filtered_by_any_prefix(self, backend: Backend) -> None:
        blobs = sorted(f"{a}{b}" + "0" * 62 for a in "0af" for b in "19c")
        blobs += ["a9" + "1" * 62, "a9" + "f" * 62]
        for name in blobs:
            backend.write(Handle(Kind.BLOB, name), b"x")
        assert backend.names(Kind.BLOB) == sorted(blobs)
        for prefix in ("", "a", "a9", "a91", "a9f", "b", "a9" + "1" * 62, "zz"):
            expected = sorted(name for name in blobs if name.startswith(prefix))
            assert backend.names(Kind.BLOB, prefix) == expected, prefix
            assert list(backend.infos(Kind.BLOB, prefix)) == expected, prefix

    def test_manifest_names_are_sorted_and_filtered_by_any_prefix(self, backend: Backend) -> None:
        manifests = ["a/b", "a/c", "a-x/c", "ab/a", "b/a", "b/ab", "b/b"]
        for name in manifests:
            backend.write(Handle(Kind.MANIFEST, name), name.encode())
        assert backend.names(Kind.MANIFEST) == sorted(manifests)
        for prefix in ("", "a", "a/", "a-", "ab", "b/", "b/a", "b/ab", "c", "a/b"):
            expected = sorted(name for name in manifests if name.startswith(prefix))
            assert backend.names(Kind.MANIFEST, prefix) == expected, prefix
            assert list(backend.infos(Kind.MANIFEST, prefix)) == expected, prefix

    def test_a_listing_longer_than_a_page_is_whole(self, backend: Backend) -> None:
        """Bindings of paged listings make the page small, so this spans several."""
        sessions = [f"s{i:02d}/n{j}" for i in range(9) for j in range(3)]
        for name in sessions:
            backend.write(Handle(Kind.MANIFEST, name), b"m")
        packs = [f"{i:032x}" for i in range(13)]
        for name in packs:
            backend.write(Handle(Kind.PACK, name), b"p")
            backend.write(Handle(Kind.INDEX, name), b"i")
        assert backend.names(Kind.MANIFEST) == sessions
        assert backend.names(Kind.PACK) == packs == backend.names(Kind.INDEX)
        assert len(backend.infos(Kind.MANIFEST)) == len(sessions)

    def test_infos_are_the_names_with_their_stat(self, backend: Backend) -> None:
        for kind, name in SAMPLES.items():
            backend.write(Handle(kind, name), payload(100 + len(name)))
            backend.write(Handle(kind, name[:-1] + "z"), b"short")
        for kind in SAMPLES:
            infos = backend.infos(kind)
            assert list(infos) == backend.names(kind)
            for name, info in infos.items():
                assert isinstance(info, ObjectInfo)
                stat = backend.stat(Handle(kind, name))
                assert (info.size, info.version) == (stat.size, stat.version)
            prefix = SAMPLES[kind][:3]
            assert backend.infos(kind, prefix) == {
                name: info for name, info in infos.items() if name.startswith(prefix)
            }

    def test_listings_see_other_writers_as_properties_promise(
        self, backend: Backend, other: Backend
    ) -> None:
        """With ``fresh_listings``, a listing sees what another writer added or removed at
        once; without, no later than after this backend next takes the gc lock (blobs,
        packs and indexes are added by anyone, removed only under it exclusively)."""
        assert backend.names(Kind.BLOB) == [] and backend.names(Kind.PACK) == []
        added = Handle(Kind.BLOB, SAMPLES[Kind.BLOB])
        other.write(added, b"added by another writer")
        other.write(Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST]), b"m")
        assert backend.names(Kind.MANIFEST) == [SAMPLES[Kind.MANIFEST]]
        if backend.properties.fresh_listings:
            assert backend.names(Kind.BLOB) == [added.name]
        with backend.lock("gc").shared():
            assert backend.names(Kind.BLOB) == [added.name]
            assert backend.stat(added).size == len(b"added by another writer")
        with other.lock("gc").exclusive():
            other.delete(added)
        if backend.properties.fresh_listings:
            assert backend.names(Kind.BLOB) == []
        with backend.lock("gc").exclusive():
            assert backend.names(Kind.BLOB) == []
            with pytest.raises(FileNotFoundError):
                backend.stat(added)

    def test_a_listing_stamp_moves_with_its_sessions_manifests(
        self, backend: Backend, other: Backend
    ) -> None:
        session, elsewhere = "s-1/", "s-2/"
        stamp = backend.listing_stamp(Kind.MANIFEST, session)
        if stamp is None:
            backend.write(Handle(Kind.MANIFEST, "s-1/a"), b"a")
            assert backend.listing_stamp(Kind.MANIFEST, session) is None
            return
        seen = [stamp]

        def moved() -> bool:
            now = backend.listing_stamp(Kind.MANIFEST, session)
            changed = now != seen[-1]
            seen.append(now)
            return changed

        backend.write(Handle(Kind.MANIFEST, "s-1/a"), b"a")
        assert moved()
        other.write(Handle(Kind.MANIFEST, "s-1/b"), b"b")
        assert moved()
        assert not moved()
        other.write(Handle(Kind.MANIFEST, elsewhere + "a"), b"a")
        assert not moved()
        other.delete(Handle(Kind.MANIFEST, "s-1/b"))
        assert moved()
        assert backend.listing_stamp(Kind.BLOB, "") is None

    def test_a_pack_log_tells_other_writers_of_new_packs(
        self, backend: Backend, other: Backend
    ) -> None:
        log, others_log = backend.pack_log(), other.pack_log()
        if log is None:
            assert others_log is None
            return
        assert others_log is not None
        log.restart()
        _, position = others_log.read(None)
        assert position is not None
        log.add("1f" * 16)
        ids, _ = others_log.read(position)
        assert ids == ["1f" * 16]

    # ------------------------------------------------------------------ upkeep

    def test_tidy_leaves_every_object_and_skips_sessions_in_use(
        self, backend: Backend, other: Backend
    ) -> None:
        kept, gone = Handle(Kind.MANIFEST, "s-1/kept"), Handle(Kind.MANIFEST, "s-2/gone")
        backend.write(kept, b"kept")
        backend.write(gone, b"gone")
        backend.delete(gone)
        with other.lock("sessions/s-1").exclusive():
            backend.tidy()
        backend.tidy()
        assert backend.names(Kind.MANIFEST) == ["s-1/kept"]
        backend.write(gone, b"again")
        assert backend.read(gone, max_bytes=10)[0] == b"again"
        backend.delete(Handle(Kind.MANIFEST, "s-1/kept"))
        backend.tidy()
        assert backend.names(Kind.MANIFEST) == ["s-2/gone"]

    def test_stale_temps_are_found_and_removed(
        self, backend: Backend, plant_stale_temp: Callable[[Backend], None] | None
    ) -> None:
        backend.write(Handle(Kind.BLOB, SAMPLES[Kind.BLOB]), b"kept")
        assert backend.stale_temps() == []
        assert backend.remove_stale_temps() == 0
        if plant_stale_temp is None:
            pytest.skip("this backend leaves nothing half-written")
        plant_stale_temp(backend)
        plant_stale_temp(backend)
        assert len(backend.stale_temps()) == 2
        assert backend.remove_stale_temps() == 2
        assert backend.stale_temps() == []
        assert backend.remove_stale_temps() == 0
        assert backend.read(Handle(Kind.BLOB, SAMPLES[Kind.BLOB]), max_bytes=10)[0] == b"kept"

    def test_closing_loses_nothing(self, make_backend: MakeBackend, backend: Backend) -> None:
        handle = Handle(Kind.PACK, SAMPLES[Kind.PACK])
        backend.write(handle, b"pack")
        assert backend.read_range(handle, 0, 2) == b"pa"
        backend.close()
        again = make_backend(sharing=backend)
        assert again.open(create=False) is True
        assert again.read_range(handle, 2, 2) == b"ck"
        if again is not backend:
            again.close()

    # ------------------------------------------------------------------ locks

    @pytest.mark.parametrize("name", ["gc", "sessions/s-0123456789abcdef", "targets/" + "f" * 32])
    def test_locks_share_and_exclude_across_processes(
        self, backend: Backend, other: Backend, name: str
    ) -> None:
        lock, elsewhere = backend.lock(name), other.lock(name, "the label")
        assert lock.timeout == LOCK_TIMEOUT and elsewhere.name == "the label"
        with lock.shared():
            with elsewhere.shared():
                pass
            with pytest.raises(LockTimeout, match="the label"), elsewhere.exclusive():
                pass
            with elsewhere.exclusive_if_free() as free:
                assert free is False
        with lock.exclusive():
            with pytest.raises(LockTimeout) as caught, elsewhere.shared(timeout=0.1):
                pass
            assert caught.value.lock_name == "the label" and caught.value.timeout == 0.1
            with elsewhere.exclusive_if_free() as free:
                assert free is False
        with elsewhere.exclusive_if_free() as free:
            assert free is True
            with pytest.raises(LockTimeout), lock.shared(timeout=0.1):
                pass
        with lock.exclusive(timeout=0.1), pytest.raises(LockTimeout), elsewhere.exclusive(0.1):
            pass

    def test_locks_exclude_threads_of_one_process(self, backend: Backend) -> None:
        lock = backend.lock("targets/" + "e" * 32, "target /somewhere")
        held, release = threading.Event(), threading.Event()

        def holder() -> None:
            with lock.exclusive():
                held.set()
                release.wait(10)

        thread = threading.Thread(target=holder)
        thread.start()
        try:
            assert held.wait(10)
            with pytest.raises(LockTimeout, match="target /somewhere"), lock.shared():
                pass
        finally:
            release.set()
            thread.join()
        with lock.exclusive(timeout=5):
            pass

    def test_locks_of_different_names_are_independent(
        self, backend: Backend, other: Backend
    ) -> None:
        one, two = backend.lock("sessions/s-1"), other.lock("sessions/s-2")
        gc, intent = other.lock("gc"), other.lock("gc-intent")
        with one.exclusive(), two.exclusive(), gc.shared(), intent.shared():
            pass
        with backend.lock("gc-intent").exclusive():
            pass

    # ------------------------------------------------------------------ failures

    def test_a_failed_write_keeps_the_last_committed_object(
        self, backend: Backend, failing: Failing | None
    ) -> None:
        if failing is None:
            pytest.skip("this backend's changes cannot fail")
        manifest = Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST])
        backend.write(manifest, b"committed")
        blob = Handle(Kind.BLOB, SAMPLES[Kind.BLOB])
        with failing(backend):
            with pytest.raises(OSError):
                backend.write(manifest, b"never")
            with pytest.raises(OSError):
                backend.write(blob, b"never")
            with pytest.raises(OSError):
                backend.write(Handle(Kind.MANIFEST, "s-new/n"), b"never")
        assert backend.read(manifest, max_bytes=100)[0] == b"committed"
        assert backend.names(Kind.BLOB) == []
        assert backend.names(Kind.MANIFEST) == [manifest.name]
        backend.remove_stale_temps()
        assert backend.stale_temps() == []

    def test_a_failed_delete_raises_and_keeps_the_object(
        self, backend: Backend, failing: Failing | None
    ) -> None:
        if failing is None:
            pytest.skip("this backend's changes cannot fail")
        handle = Handle(Kind.MANIFEST, SAMPLES[Kind.MANIFEST])
        backend.write(handle, b"kept")
        version = backend.stat(handle).version
        with failing(backend):
            with pytest.raises(OSError):
                backend.delete(handle)
            with pytest.raises(OSError):
                backend.delete(handle, version=version)
        assert backend.read(handle, max_bytes=100)[0] == b"kept"
        backend.delete(handle, version=version)
        assert backend.names(Kind.MANIFEST) == []

    def test_a_failed_commit_publishes_nothing(
        self, backend: Backend, failing: Failing | None
    ) -> None:
        if failing is None:
            pytest.skip("this backend's changes cannot fail")
        staged = backend.stage(Kind.BLOB)
        staged.write(b"staged bytes")
        with failing(backend), pytest.raises(OSError):
            staged.commit(SAMPLES[Kind.BLOB])
        staged.abort()
        assert backend.names(Kind.BLOB) == []
        with pytest.raises(FileNotFoundError):
            backend.stat(Handle(Kind.BLOB, SAMPLES[Kind.BLOB]))
        backend.remove_stale_temps()
        assert backend.stale_temps() == []
        again = backend.stage(Kind.BLOB)
        again.write(b"staged bytes")
        again.commit(SAMPLES[Kind.BLOB])
        assert backend.read(Handle(Kind.BLOB, SAMPLES[Kind.BLOB]), max_bytes=100)[0] == (
            b"staged bytes"
        )

    # ------------------------------------------------------------------ a whole store

    def test_a_whole_store_works_on_the_backend(self, backend: Backend, tmp_path: Path) -> None:
        """The seam carries everything a store does: the same API, whatever holds the bytes."""
        project = tmp_path / "project"
        project.mkdir()
        for i in range(40):
            (project / f"f{i}.txt").write_text(f"file {i}\n")
        (project / "big.bin").write_bytes(bytes(range(256)) * 70_000)
        store = SnapStore(backend, lock_timeout=5)
        store.create("s", "one", ["."], base_dir=project)
        (project / "f1.txt").write_text("edited")
        store.create("s", "two", ["."], base_dir=project)
        assert [info.name for info in store.list("s")] == ["one", "two"]
        assert store.read("s", "one", "f1.txt") == b"file 1\n"
        assert store.diff("s", "one", "two").modified == ["f1.txt"]
        report = store.restore("s", "one")
        assert report.written == ["f1.txt"] and (project / "f1.txt").read_text() == "file 1\n"
        store.undo("s")
        assert (project / "f1.txt").read_text() == "edited"
        store.put_state("c", "cursor", {"row": 3})
        assert store.get_state("c", "cursor") == {"row": 3}
        assert store.verify(deep=True).ok
        store.delete("s", "one")
        assert not store.gc().skipped
        assert store.verify(deep=True).ok and store.verify().garbage == []
        big = (project / "big.bin").read_bytes()
        assert SnapStore(backend).read("s", "two", "big.bin") == big
