"""The per-process memo of decoded objects: a value is reused only while its object keeps its
version, so a file replaced or rewritten in place is always read again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from snapstore.backend.local import LocalBackend
from snapstore.backend.seam import Handle, Kind
from snapstore.repo.filememo import FileMemo


def _object(tmp_path: Path, name: str) -> tuple[LocalBackend, Handle, Path]:
    """A cache object of a local backend in ``tmp_path``, and the path of its file."""
    backend = LocalBackend(str(tmp_path))
    handle = Handle(Kind.CACHE, name)
    path = Path(backend.path(handle))
    path.parent.mkdir(parents=True, exist_ok=True)
    return backend, handle, path


def _decoder(calls: list[bytes]):  # type: ignore[no-untyped-def]
    def decode(data: bytes) -> str:
        calls.append(data)
        return data.decode()

    return decode


def test_an_unchanged_file_is_decoded_once(tmp_path: Path) -> None:
    backend, handle, path = _object(tmp_path, "f")
    path.write_bytes(b"one")
    calls: list[bytes] = []
    memo: FileMemo[str] = FileMemo()
    assert memo.read(backend, handle, _decoder(calls), max_bytes=1 << 20) == "one"
    assert memo.read(backend, handle, _decoder(calls), max_bytes=1 << 20) == "one"
    assert calls == [b"one"]


def test_a_replaced_or_rewritten_file_is_read_again(tmp_path: Path) -> None:
    backend, handle, path = _object(tmp_path, "f")
    path.write_bytes(b"one")
    calls: list[bytes] = []
    memo: FileMemo[str] = FileMemo()
    memo.read(backend, handle, _decoder(calls), max_bytes=1 << 20)
    (tmp_path / "g").write_bytes(b"two")
    os.replace(tmp_path / "g", path)
    assert memo.read(backend, handle, _decoder(calls), max_bytes=1 << 20) == "two"
    before = os.stat(path)
    time.sleep(0.05)  # past the kernel's coarse timestamp tick
    with open(path, "r+b") as file:  # same size, mtime put back: the ctime still moves
        file.write(b"TWO")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert memo.read(backend, handle, _decoder(calls), max_bytes=1 << 20) == "TWO"
    assert calls == [b"one", b"two", b"TWO"]


def test_a_missing_file_raises_and_a_written_one_is_remembered(tmp_path: Path) -> None:
    memo: FileMemo[str] = FileMemo()
    backend, handle, path = _object(tmp_path, "f")
    with pytest.raises(FileNotFoundError):
        memo.read(backend, Handle(Kind.CACHE, "nothing"), _decoder([]), max_bytes=1 << 20)
    path.write_bytes(b"written")
    memo.remember(backend, handle, "as written")
    assert memo.read(backend, handle, _decoder([]), max_bytes=1 << 20) == "as written"


def test_the_limit_drops_the_oldest_and_forget_drops_what_is_asked(tmp_path: Path) -> None:
    memo: FileMemo[str] = FileMemo(limit=2)
    calls: list[bytes] = []
    handles = []
    for name in "abc":
        backend, handle, path = _object(tmp_path, name)
        path.write_bytes(name.encode())
        handles.append(handle)
        memo.read(backend, handle, _decoder(calls), max_bytes=1 << 20)
    memo.read(backend, handles[0], _decoder(calls), max_bytes=1 << 20)
    assert calls == [b"a", b"b", b"c", b"a"]
    memo.forget(lambda key: key[1] != handles[2])
    memo.read(backend, handles[2], _decoder(calls), max_bytes=1 << 20)
    assert calls[-1] == b"c" and len(calls) == 5


def test_remembering_a_file_that_is_gone_forgets_it(tmp_path: Path) -> None:
    backend, handle, path = _object(tmp_path, "f")
    path.write_bytes(b"one")
    memo: FileMemo[str] = FileMemo()
    memo.read(backend, handle, _decoder([]), max_bytes=1 << 20)
    path.unlink()
    memo.remember(backend, handle, "never written")
    path.write_bytes(b"two")
    assert memo.read(backend, handle, _decoder([]), max_bytes=1 << 20) == "two"
