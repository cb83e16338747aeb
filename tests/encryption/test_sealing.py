"""The encrypting layer keeps the backend contract: every way of reading gives back the bytes
written (whole, by range, the head, in chunks, across segment boundaries), sizes are the
plaintext's, listings give back the names written, and any change below is detected."""

from __future__ import annotations

from pathlib import Path

import pytest

from snapstore.backend.encrypted import EncryptedBackend
from snapstore.backend.local import LocalBackend
from snapstore.backend.memory import MemoryBackend
from snapstore.backend.sealing import HEADER_BYTES, SEGMENT_BYTES, plain_size, sealed_size
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.backend.secret import Secret
from snapstore.errors import CorruptBlobError, CorruptManifestError, CorruptPackError
from snapstore.restore.journal import CorruptJournalError, JournalDir

SIZES = [0, 1, SEGMENT_BYTES - 1, SEGMENT_BYTES, SEGMENT_BYTES + 1, 3 * SEGMENT_BYTES + 5]


@pytest.fixture(params=["memory", "local"])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "memory":
        return MemoryBackend(lock_timeout=0.2)
    return LocalBackend(str(tmp_path / "store"), lock_timeout=0.2)


@pytest.fixture
def sealed(inner: Backend) -> EncryptedBackend:
    backend = EncryptedBackend(inner, Secret(b"pw"))
    backend.open(create=True)
    return backend


def _data(size: int) -> bytes:
    return bytes((index * 7 + index // 251) % 256 for index in range(size))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("how", ["write", "stage"])
def test_every_read_gives_back_what_was_written(
    sealed: EncryptedBackend, size: int, how: str
) -> None:
    data = _data(size)
    handle = Handle(Kind.PACK, "ab" * 16)
    if how == "write":
        sealed.write(handle, data)
    else:
        staged = sealed.stage(Kind.PACK)
        for start in range(0, size, 40_000):
            staged.write(data[start : start + 40_000])
        staged.write(b"")
        assert staged.size == size
        staged.commit(handle.name, name_durable=True)
    assert sealed.stat(handle).size == size
    assert sealed.inner.stat(handle).size == sealed_size(size)
    assert sealed.read(handle, max_bytes=size)[0] == data
    for length in (0, 1, 100, SEGMENT_BYTES, size + 10):
        assert sealed.read_head(handle, length)[0] == data[:length]
    for offset in (0, 1, SEGMENT_BYTES - 3, SEGMENT_BYTES, 2 * SEGMENT_BYTES + 1, size, size + 5):
        for length in (1, 5, SEGMENT_BYTES + 7, 3 * SEGMENT_BYTES):
            assert sealed.read_range(handle, offset, length) == data[offset : offset + length]
    for chunk_bytes in (1000, SEGMENT_BYTES, 1 << 20):
        pieces = list(sealed.chunks(handle, chunk_bytes))
        assert all(len(piece) <= chunk_bytes for piece in pieces)
        assert b"".join(pieces) == data


def test_sizes_map_both_ways() -> None:
    for size in [*SIZES, 10 * SEGMENT_BYTES, 10 * SEGMENT_BYTES - 1]:
        assert plain_size(sealed_size(size)) == size


def test_names_are_sealed_and_listed_back(sealed: EncryptedBackend) -> None:
    digests = ["ab" + "0" * 62, "ab" + "1" * 62, "cd" + "2" * 62]
    for digest in digests:
        sealed.write(Handle(Kind.BLOB, digest), digest.encode())
    manifests = ["sess-1/snap-a", "sess-1/snap-b", "other-2/snap-a"]
    for name in manifests:
        sealed.write(Handle(Kind.MANIFEST, name), name.encode())
    sealed.write(Handle(Kind.CACHE, "heads/sess-1"), b"head", durable=False)
    assert sealed.names(Kind.BLOB) == sorted(digests)
    assert sealed.names(Kind.BLOB, "ab") == sorted(digests[:2])
    assert sealed.names(Kind.BLOB, "ab0") == [digests[0]]
    assert sealed.names(Kind.MANIFEST) == sorted(manifests)
    assert sealed.names(Kind.MANIFEST, "sess-1/") == ["sess-1/snap-a", "sess-1/snap-b"]
    assert sorted(sealed.infos(Kind.MANIFEST, "other-2/")) == ["other-2/snap-a"]
    below = sealed.inner.names(Kind.BLOB) + sealed.inner.names(Kind.MANIFEST)
    assert not any(name in stored for stored in below for name in [*digests, "sess", "snap"])


def test_an_object_moved_to_another_name_does_not_open(sealed: EncryptedBackend) -> None:
    first, second = Handle(Kind.MANIFEST, "s/a"), Handle(Kind.MANIFEST, "s/b")
    sealed.write(first, b"manifest a")
    sealed.write(second, b"manifest b")
    stored_a = sealed.inner.read(sealed._below(first), max_bytes=1000)[0]
    sealed.inner.write(sealed._below(second), stored_a)
    with pytest.raises(CorruptManifestError):
        sealed.read(second, max_bytes=1000)


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (Kind.MANIFEST, CorruptManifestError),
        (Kind.PACK, CorruptPackError),
        (Kind.INDEX, CorruptPackError),
        (Kind.BLOB, CorruptBlobError),
    ],
)
def test_a_segment_cut_or_swapped_is_detected(
    sealed: EncryptedBackend, kind: Kind, error: type[Exception]
) -> None:
    handle = Handle(kind, "ab" * 16 if kind is not Kind.MANIFEST else "s/n")
    data = _data(3 * SEGMENT_BYTES)
    sealed.write(handle, data)
    below = sealed._below(handle)
    stored = sealed.inner.read(below, max_bytes=1 << 30)[0]
    header, body = stored[:HEADER_BYTES], stored[HEADER_BYTES:]
    step = SEGMENT_BYTES + 16
    segments = [body[start : start + step] for start in range(0, len(body), step)]
    variants = [
        header + b"".join(segments[:3]),  # the final (empty) segment cut
        header + b"".join([segments[1], segments[0], *segments[2:]]),  # two swapped
        header + b"".join(segments[:-2] + segments[-1:]),  # one left out
    ]
    for variant in variants:
        sealed.inner.delete(below)
        sealed.inner.write(below, variant)
        sealed._prefixes.clear()
        with pytest.raises(error):
            sealed.read(handle, max_bytes=1 << 30)
        with pytest.raises(error):
            b"".join(sealed.chunks(handle, 1 << 20))
        if variant is not variants[0]:
            with pytest.raises(error):
                sealed.read_range(handle, 0, 3 * SEGMENT_BYTES)


def test_a_damaged_journal_is_a_corrupt_journal_and_a_damaged_cache_reads_empty(
    sealed: EncryptedBackend,
) -> None:
    key = "ab" * 16
    sealed.write(Handle(Kind.JOURNAL, key), b"journal bytes")
    sealed.write(Handle(Kind.CACHE, "headers"), b"cache bytes", durable=False)
    for kind, name in ((Kind.JOURNAL, key), (Kind.CACHE, "headers")):
        below = sealed._below(Handle(kind, name))
        stored = bytearray(sealed.inner.read(below, max_bytes=1000)[0])
        stored[-1] ^= 1
        sealed.inner.write(below, bytes(stored))
    with pytest.raises(CorruptJournalError):
        JournalDir(sealed).read(key)
    assert sealed.read(Handle(Kind.CACHE, "headers"), max_bytes=1000)[0] == b""


def test_lock_names_carry_no_session_name(sealed: EncryptedBackend, inner: Backend) -> None:
    if not isinstance(inner, LocalBackend):
        pytest.skip("lock files are visible on a local store only")
    with sealed.lock("sessions/secret-session-0123").exclusive():
        pass
    names = [path.name for path in Path(inner.root, "locks").rglob("*")]
    assert names and not any("secret" in name for name in names)


def test_a_segment_of_another_object_does_not_open(sealed: EncryptedBackend) -> None:
    """Each object is sealed under its own key (a fresh salt): the same bytes written twice
    are stored differently, and a segment spliced in from another object fails."""
    data = _data(3 * SEGMENT_BYTES)
    first, second = Handle(Kind.PACK, "ab" * 16), Handle(Kind.PACK, "cd" * 16)
    sealed.write(first, data)
    sealed.write(second, data)
    stored = [sealed.inner.read(handle, max_bytes=1 << 30)[0] for handle in (first, second)]
    assert stored[0] != stored[1]
    step = SEGMENT_BYTES + 16
    start = HEADER_BYTES + step
    spliced = stored[0][:start] + stored[1][start : start + step] + stored[0][start + step :]
    sealed.inner.delete(first)
    sealed.inner.write(first, spliced)
    sealed._prefixes.clear()
    assert sealed.read_range(first, 0, 100) == data[:100]
    with pytest.raises(CorruptPackError):
        sealed.read_range(first, SEGMENT_BYTES, 100)
    with pytest.raises(CorruptPackError):
        sealed.read(first, max_bytes=1 << 30)


class _RefusingStage:
    """A staged object whose commit finds the name taken (another host stored it first)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self.size += len(data)

    def restart(self) -> None:
        self.size = 0

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        from snapstore.errors import ConcurrentWriteError

        raise ConcurrentWriteError(17, f"{name} exists and holds other bytes")

    def abort(self) -> None:
        pass


@pytest.mark.parametrize("same", [True, False])
def test_a_blob_another_host_stored_first_counts_if_it_holds_the_same_bytes(
    sealed: EncryptedBackend, monkeypatch: pytest.MonkeyPatch, same: bool
) -> None:
    """Two hosts storing one file seal it under different salts: the loser of the race finds
    other bytes there, opens them, and counts on them only if they hash to the name."""
    import blake3

    from snapstore.errors import ConcurrentWriteError

    data = b"the same file" * 1000
    name = blake3.blake3(data).hexdigest()
    sealed.write(Handle(Kind.BLOB, name), data if same else b"other bytes")
    monkeypatch.setattr(sealed.inner, "stage", lambda kind, size_hint=0: _RefusingStage(None))
    staged = sealed.stage(Kind.BLOB)
    staged.write(data)
    if same:
        staged.commit(name)
    else:
        with pytest.raises(ConcurrentWriteError):
            staged.commit(name)
