"""The contract's tests of locks, failures, and a whole store's life (part of
``BackendContract``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from snapstore import LockTimeout, SnapStore
from snapstore.backend.seam import Backend, Handle, Kind

from .shared import (
    LOCK_TIMEOUT,
    SAMPLES,
    Failing,
)


class LocksAndFailuresContract:
    """The contract's tests of locks, failures, and a whole store's life."""

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
