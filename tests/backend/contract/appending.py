"""The contract's tests of appendable objects (part of ``BackendContract``): offered exactly
where ``Properties.appends`` says, durable names at commit, bytes that grow in place and that
another opening of the store reads, and a writer that can tell its object was deleted."""

from __future__ import annotations

import pytest

from snapstore.backend.seam import Backend, Handle, Kind

from .shared import Failing, MakeBackend

NAME = "2e" * 16


class AppendingContract:
    """Appendable objects (the appendable packs of docs/format.md)."""

    def test_appendable_objects_are_offered_where_the_properties_say(
        self, backend: Backend
    ) -> None:
        staged = backend.stage_appendable(Kind.PACK)
        try:
            assert (staged is not None) is backend.properties.appends
        finally:
            if staged is not None:
                staged.abort()
        assert backend.names(Kind.PACK) == []

    def test_an_appendable_object_grows_in_place(
        self, backend: Backend, make_backend: MakeBackend
    ) -> None:
        staged = backend.stage_appendable(Kind.PACK)
        if staged is None:
            pytest.skip("this backend writes every object whole (properties.appends is False)")
        handle = Handle(Kind.PACK, NAME)
        try:
            staged.write(b"first segment;")
            assert backend.names(Kind.PACK) == []
            staged.commit(NAME, name_durable=True)
            assert staged.current()
            staged.append(b"second;")
            staged.sync()
            other = make_backend(sharing=backend)
            other.open(create=False)
            try:
                assert other.read(handle, max_bytes=1 << 20)[0] == b"first segment;second;"
                assert other.read_range(handle, 14, 7) == b"second;"
            finally:
                other.close()
            assert staged.size == len(b"first segment;second;")
            staged.append(b"failed")
            staged.truncate(len(b"first segment;second;"))
            assert backend.read(handle, max_bytes=1 << 20)[0] == b"first segment;second;"
            backend.delete(handle)
            assert not staged.current(), "a writer must tell its object is gone"
        finally:
            staged.close()

    def test_a_failed_append_leaves_the_bytes_committed(
        self, backend: Backend, failing: Failing | None
    ) -> None:
        if failing is None:
            pytest.skip("changes of this backend cannot be made to fail")
        staged = backend.stage_appendable(Kind.PACK)
        if staged is None:
            pytest.skip("this backend writes every object whole (properties.appends is False)")
        try:
            staged.write(b"whole")
            staged.commit(NAME, name_durable=True)
            with failing(backend), pytest.raises(OSError):
                staged.append(b"never")
            data, _ = backend.read(Handle(Kind.PACK, NAME), max_bytes=1 << 20)
            assert data == b"whole"
        finally:
            staged.close()
