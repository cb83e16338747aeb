"""An encrypted store never turns into an unencrypted one: with its config deleted, or its
marker put back to a plain one as well, it is refused, never written in the clear; key
objects planted or damaged cannot make opening exhaust memory or time; two key changes at
once never leave a store without a key."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.backend.local import LocalBackend
from snapstore.errors import (
    EncryptionError,
    FormatError,
    PasswordRequiredError,
    WrongPasswordError,
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha")
    with SnapStore(tmp_path / "store", password="pw", encrypt=True) as made:
        made.create("s", "n", base_dir=str(tmp_path / "work"), paths=["."])
    return tmp_path / "store"


def _writes(root: Path, tmp_path: Path, **options: object) -> None:
    with SnapStore(root, create=False, **options) as opened:  # type: ignore[arg-type]
        opened.create("NewSessionVisible", "NewSnapVisible", base_dir=str(tmp_path / "work"))


def test_a_store_without_its_config_is_refused_with_or_without_the_password(
    store: Path, tmp_path: Path
) -> None:
    (store / "keys" / "config").unlink()
    with pytest.raises(EncryptionError):
        _writes(store, tmp_path, password="pw")
    with pytest.raises(PasswordRequiredError):
        _writes(store, tmp_path)
    with pytest.raises(FormatError):  # a backend given as it is, without the layer
        SnapStore(LocalBackend(str(store)))
    assert not any(b"NewSessionVisible" in path.name.encode() for path in store.rglob("*"))


def test_a_store_without_config_and_with_a_plain_marker_is_refused_a_password(
    store: Path, tmp_path: Path
) -> None:
    (store / "keys" / "config").unlink()
    (store / "FORMAT").chmod(0o644)
    (store / "FORMAT").write_bytes(b"snapstore format 3\n")
    with pytest.raises(EncryptionError):
        _writes(store, tmp_path, password="pw")
    assert not any("NewSessionVisible" in path.name for path in store.rglob("*"))


@pytest.mark.parametrize(
    ("field", "value"),
    [("memory_kib", 2**30), ("memory_kib", 2**40), ("iterations", 2**31), ("lanes", 10**6)],
)
def test_a_key_naming_a_cost_out_of_bounds_is_skipped(store: Path, field: str, value: int) -> None:
    key = next(path for path in (store / "keys").iterdir() if path.name != "config")
    document = json.loads(key.read_text())
    document[field] = value
    planted = store / "keys" / "00000000000000ff"
    planted.write_text(json.dumps(document))
    started = time.monotonic()
    with SnapStore(store, password="pw") as opened:
        assert [info.name for info in opened.list("s")] == ["n"]
    key.chmod(0o644)
    key.unlink()
    with pytest.raises(WrongPasswordError):
        SnapStore(store, password="pw")
    assert time.monotonic() - started < 60  # never the hours or the memory the key asked for


def test_two_key_removals_at_once_leave_a_key(store: Path) -> None:
    with SnapStore(store, password="pw") as first:
        first.add_password("other")
    with SnapStore(store, password="pw") as one, SnapStore(store, password="other") as two:
        two.remove_key(one.current_key)
        with pytest.raises(EncryptionError):
            one.remove_key(two.current_key)
        with pytest.raises(EncryptionError):
            one.add_password("third")
        with pytest.raises(EncryptionError):
            one.change_password("fourth")
        assert [key.id for key in two.list_keys()] == [two.current_key]
    with SnapStore(store, password="other") as reopened:
        assert [info.name for info in reopened.list("s")] == ["n"]
