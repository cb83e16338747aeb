"""A changed byte in any object of an encrypted store is detected, never followed: opening,
listing, reading and restoring either give the right answer (a damaged cache is only
rebuilt) or raise a typed error, and a restore never writes a byte it could not
authenticate."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.backend.layout import FORMAT_MAJOR, FORMAT_TEXT
from snapstore.errors import (
    CorruptBlobError,
    CorruptManifestError,
    CorruptPackError,
    EncryptionError,
    FormatError,
    MissingBlobError,
    RestoreError,
    SnapstoreError,
)
from snapstore.restore.journal import CorruptJournalError

PASSWORD = "pw"
FILES = {
    "small.txt": b"small file\n" * 10,
    "dir/repeated.log": b"a line of text\n" * 30_000,
    "dir/sub/other.bin": bytes(range(256)) * 600,
}
LARGE = "large.bin"


def _original(base: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(base)): path.read_bytes() for path in base.rglob("*") if path.is_file()
    }


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """An encrypted store with two snapshots (one with a loose blob), a state value, and its
    caches; and the files it recorded."""
    os.environ["SNAPSTORE_KDF"] = "m=64,t=1,p=1"
    top = tmp_path_factory.mktemp("template")
    base = top / "work"
    for name, data in FILES.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(data)
    with SnapStore(top / "store", password=PASSWORD, encrypt=True) as store:
        store.create("s", "one", base_dir=str(base), paths=["."])
        (base / LARGE).write_bytes(os.urandom(17 << 20))
        store.create("s", "two", base_dir=str(base), paths=["."])
        store.put_state("s", "position", {"offset": 42})
    return top / "store", _original(base)


def _exercise(root: Path, target: Path, expected: dict[str, bytes]) -> None:
    """Everything a user does with the store; raises the first (typed) error met. Restored
    files are checked: none may hold other bytes than the snapshot recorded."""
    with SnapStore(root, password=PASSWORD, create=False) as store:
        infos = store.list()
        assert {info.name for info in infos} <= {"one", "two", "position"}
        assert store.get_state("s", "position") in ({"offset": 42}, None)
        for name in ("one", "two"):
            where = target / name
            where.mkdir(parents=True)
            try:
                store.restore("s", name, target=str(where), backup=False)
            finally:
                restored = _original(where)
                for path, data in restored.items():
                    assert data == expected[path], f"{path} restored with other bytes"
            assert restored.keys() == {path for path in expected if name == "two" or path != LARGE}
        assert store.read("s", "two", "small.txt") == FILES["small.txt"]


def _cause(error: BaseException) -> BaseException:
    """The damage a failed restore reports (RestoreError carries it as its cause)."""
    if isinstance(error, RestoreError) and error.__cause__ is not None:
        return error.__cause__
    return error


def _tamperable(root: Path) -> list[str]:
    names = []
    for directory, _, files in os.walk(root):
        for name in files:
            relative = str(Path(directory, name).relative_to(root))
            if relative.startswith(("locks/", "tmp/")) or relative == "packs/log":
                continue
            names.append(relative)
    return sorted(names)


def _kind(relative: str) -> str:
    if relative.startswith("keys/"):
        return "key"
    if relative.endswith(".pack"):
        return "pack"
    if relative.endswith(".idx"):
        return "index"
    return relative.split("/")[0]


EXPECTED_ERRORS: dict[str, tuple[type[BaseException], ...]] = {
    "sessions": (CorruptManifestError,),
    "pack": (CorruptPackError, CorruptBlobError),
    "index": (CorruptPackError, CorruptBlobError, MissingBlobError),
    "blobs": (CorruptBlobError,),
    "key": (EncryptionError,),
    "FORMAT": (FormatError,),
}
"""What a changed byte in an object of each kind must raise (caches and journals may also be
rebuilt or ignored: never followed). A pack whose index fails to open is set aside as broken,
as in any store: its blobs are then missing (exit code 13 too)."""


def test_every_kind_of_object_is_in_the_store(template: tuple[Path, dict[str, bytes]]) -> None:
    kinds = {_kind(name) for name in _tamperable(template[0])}
    assert {"sessions", "pack", "index", "key", "cache", "FORMAT"} <= kinds


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_changed_byte_anywhere_is_a_typed_error_never_wrong_data(
    template: tuple[Path, dict[str, bytes]], tmp_path: Path, where: str
) -> None:
    source, expected = template
    for relative in _tamperable(source):
        root = tmp_path / "store"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(source, root)
        path = root / relative
        data = bytearray(path.read_bytes())
        position = {"first": 0, "middle": len(data) // 2, "last": len(data) - 1}[where]
        data[position] ^= 0x01
        path.chmod(0o644)
        path.write_bytes(bytes(data))
        target = tmp_path / "target"
        shutil.rmtree(target, ignore_errors=True)
        kind = _kind(relative)
        try:
            _exercise(root, target, expected)
        except (SnapstoreError, CorruptJournalError) as raised:
            error = _cause(raised)
            assert kind in EXPECTED_ERRORS or kind in ("cache", "journal"), (relative, error)
            if kind in EXPECTED_ERRORS:
                assert isinstance(error, EXPECTED_ERRORS[kind]), (relative, error)
            continue
        assert kind not in EXPECTED_ERRORS, (
            f"{relative} changed at byte {position}, and nothing noticed"
        )


def test_a_truncated_pack_or_manifest_is_detected(
    template: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    source, expected = template
    for relative in _tamperable(source):
        kind = _kind(relative)
        if kind not in ("sessions", "pack", "index", "blobs"):
            continue
        root = tmp_path / "store"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(source, root)
        path = root / relative
        data = path.read_bytes()
        path.chmod(0o644)
        path.write_bytes(data[: len(data) - 20])
        shutil.rmtree(tmp_path / "target", ignore_errors=True)
        with pytest.raises(SnapstoreError) as raised:
            _exercise(root, tmp_path / "target", expected)
        assert isinstance(_cause(raised.value), EXPECTED_ERRORS[kind]), relative


def test_a_store_whose_maker_died_before_marking_it_is_marked_at_the_next_open(
    template: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    """Config and key written, the marker still the one every new store starts with: the
    next process that opens it marks it, so that versions without encryption refuse it."""
    root = tmp_path / "store"
    shutil.copytree(template[0], root)
    (root / "FORMAT").chmod(0o644)
    (root / "FORMAT").write_bytes(FORMAT_TEXT.encode())
    with SnapStore(root, password=PASSWORD) as store:
        assert [info.name for info in store.list("s")] == ["one", "two", "position"]
    assert (root / "FORMAT").read_bytes() == f"snapstore format {FORMAT_MAJOR}-encrypted\n".encode()


def test_a_store_encrypted_in_format_3_is_read_and_marked_current_by_a_write(
    template: tuple[Path, Path], tmp_path: Path
) -> None:
    root = tmp_path / "store"
    shutil.copytree(template[0], root)
    (root / "FORMAT").chmod(0o644)
    (root / "FORMAT").write_bytes(b"snapstore format 3-encrypted\n")
    with SnapStore(root, password=PASSWORD) as store:
        assert store.format_version == 3
        assert [info.name for info in store.list("s")] == ["one", "two", "position"]
        assert (root / "FORMAT").read_bytes() == b"snapstore format 3-encrypted\n"
        store.delete("s", "one")
        assert store.format_version == FORMAT_MAJOR
    assert (root / "FORMAT").read_bytes() == f"snapstore format {FORMAT_MAJOR}-encrypted\n".encode()
