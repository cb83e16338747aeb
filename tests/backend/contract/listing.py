"""The contract's tests of listings, listing stamps, the pack log and upkeep (part of
``BackendContract``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from snapstore.backend.seam import Backend, Handle, Kind, ObjectInfo

from .shared import (
    SAMPLES,
    MakeBackend,
    payload,
)


class ListingContract:
    """The contract's tests of listings, listing stamps, the pack log and upkeep."""

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

    def test_settled_listing_stamps_name_each_session_and_move_with_it(
        self, backend: Backend, other: Backend
    ) -> None:
        if backend.listing_stamps(Kind.MANIFEST) is None:
            other.write(Handle(Kind.MANIFEST, "s-1/a"), b"a")
            assert backend.listing_stamps(Kind.MANIFEST) is None
            return
        other.write(Handle(Kind.MANIFEST, "s-1/a"), b"a")
        other.write(Handle(Kind.MANIFEST, "s-2/b"), b"b")
        stamps = backend.listing_stamps(Kind.MANIFEST)
        assert stamps is not None and sorted(stamps) == ["s-1", "s-2"]
        assert list(backend.listing_stamps(Kind.MANIFEST, "s-2/") or {}) == ["s-2"]
        assert backend.listing_stamps(Kind.MANIFEST, "s-3/") == {}
        for session, stamp in stamps.items():
            assert stamp is None or stamp == backend.listing_stamp(Kind.MANIFEST, session + "/")
        for change in (
            lambda: other.write(Handle(Kind.MANIFEST, "s-1/c"), b"c"),
            lambda: other.write(Handle(Kind.MANIFEST, "s-1/a"), b"a again"),
            lambda: other.delete(Handle(Kind.MANIFEST, "s-1/c")),
        ):
            before = (backend.listing_stamps(Kind.MANIFEST, "s-1/") or {})["s-1"]
            change()
            after = (backend.listing_stamps(Kind.MANIFEST, "s-1/") or {})["s-1"]
            assert after is None or after != before
        assert backend.listing_stamps(Kind.BLOB) is None

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
        log.add_segment("2e" * 16, 0x1F40)
        entries, _ = others_log.read(position)
        assert entries == [("1f" * 16, None), ("2e" * 16, 0x1F40)]

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
