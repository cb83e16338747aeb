"""Converting an unencrypted store: ``snapstore encrypt --to`` copies it into a new encrypted
store that holds the same snapshots and state values and no marker in the clear; the old
store is only read; a copy stopped part-way is taken up by the next run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.cli import Cli

from snapstore import SnapStore
from snapstore.maintenance import encrypt as encrypt_module

from .conftest import directory_objects
from .test_no_leaks import Markers


def _plain_store(cli: Cli, markers: Markers) -> Path:
    base = cli.cwd / "work"
    markers.write_tree(base, large=True)
    with SnapStore(cli.root) as store:
        store.create(markers.session, markers.snapshot, base_dir=str(base), paths=["."])
        store.put_state(markers.session, markers.state, markers.state)
        (base / markers.directory / f"{markers.file}.txt").write_text("edited")
        store.restore(markers.session, markers.snapshot)  # leaves an undo backup
    return base


def _same_store(plain: Path, encrypted: Path, markers: Markers, tmp_path: Path) -> None:
    with SnapStore(plain) as old, SnapStore(encrypted, password="pw", create=False) as new:
        assert [(i.session, i.name, i.kind) for i in old.list()] == [
            (i.session, i.name, i.kind) for i in new.list()
        ]
        assert new.get_state(markers.session, markers.state) == markers.state
        new.restore(markers.session, markers.snapshot, target=str(tmp_path / "restored"))
        assert new.verify(deep=True).ok
    restored = {
        p.relative_to(tmp_path / "restored"): p.read_bytes()
        for p in (tmp_path / "restored").rglob("*")
        if p.is_file()
    }
    assert sorted(restored.values()) == sorted(markers.contents)


def test_encrypt_copies_a_plain_store_into_an_encrypted_one(tmp_path: Path) -> None:
    cli, markers = Cli(tmp_path), Markers()
    _plain_store(cli, markers)
    before = directory_objects(cli.root)
    result = cli.run("encrypt", "--to", str(tmp_path / "sealed"), env={"SNAPSTORE_PASSWORD": "pw"})
    assert result.code == 0, result.stderr
    after = directory_objects(cli.root)
    assert {k: v for k, v in after.items() if not k.startswith("cache/")} == {
        k: v for k, v in before.items() if not k.startswith("cache/")
    }
    _same_store(cli.root, tmp_path / "sealed", markers, tmp_path)
    markers.check(directory_objects(tmp_path / "sealed"))
    plain_indexes = {p.stem for p in cli.root.glob("packs/*.idx")}
    assert {p.stem for p in cli.root.glob("packs/*.pack")} - plain_indexes  # an appendable one
    sealed_packs = {p.stem for p in (tmp_path / "sealed" / "packs").glob("*.pack")}
    assert sealed_packs and sealed_packs == {
        p.stem for p in (tmp_path / "sealed" / "packs").glob("*.idx")
    }  # copied as packs with index files
    again = cli.run(
        "--json", "encrypt", "--to", str(tmp_path / "sealed"), env={"SNAPSTORE_PASSWORD": "pw"}
    )
    manifests = len(list(cli.root.glob("sessions/*/*.manifest")))
    assert again.code == 0 and again.json()["copied"] == manifests  # blobs and packs not again


def test_a_stopped_copy_is_taken_up_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, markers = Cli(tmp_path), Markers()
    _plain_store(cli, markers)
    real_copy = encrypt_module._copy
    copies = 0

    def dies_after_three(*args: object) -> int:
        nonlocal copies
        copies += 1
        if copies > 3:
            raise OSError(5, "killed")
        return real_copy(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(encrypt_module, "_copy", dies_after_three)
    with (
        SnapStore(cli.root) as source,
        SnapStore(tmp_path / "sealed", password="pw", encrypt=True) as target,
    ):
        with pytest.raises(OSError):
            source.copy_into(target)
        assert target.list() == []  # no manifest before everything it names
    monkeypatch.setattr(encrypt_module, "_copy", real_copy)
    with SnapStore(cli.root) as source, SnapStore(tmp_path / "sealed", password="pw") as target:
        report = source.copy_into(target)
    assert report.present == 3 and report.copied > 0
    _same_store(cli.root, tmp_path / "sealed", markers, tmp_path)


def test_encrypt_refuses_an_encrypted_store_and_needs_a_password(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    assert cli.run("init").code == 0
    assert cli.run("encrypt", "--to", str(tmp_path / "sealed")).code == 2
    env = {"SNAPSTORE_PASSWORD": "pw"}
    assert cli.run("encrypt", "--to", str(tmp_path / "sealed"), env=env).code == 0
    refused = cli.run(
        "--root",
        str(tmp_path / "sealed"),
        "encrypt",
        "--to",
        str(tmp_path / "third"),
        root=False,
        env=env,
    )
    assert refused.code == 2 and "encrypted already" in refused.stderr
    same = cli.run("encrypt", "--to", str(cli.root), env=env)
    assert same.code == 2 and not (cli.root / "keys").exists()
    assert not os.path.exists(tmp_path / "third")


def test_a_second_copy_takes_the_source_as_it_is_now(tmp_path: Path) -> None:
    base = tmp_path / "work"
    base.mkdir()
    (base / "a.txt").write_text("alpha")
    with SnapStore(tmp_path / "plain") as source:
        source.create("s", "gone", base_dir=str(base), paths=["."])
        source.put_state("s", "position", 1)
        with SnapStore(tmp_path / "sealed", password="pw", encrypt=True) as target:
            source.copy_into(target)
        source.put_state("s", "position", 2)
        source.delete("s", "gone")
        with SnapStore(tmp_path / "sealed", password="pw") as target:
            source.copy_into(target)
            assert target.get_state("s", "position") == 2
            assert [info.name for info in target.list("s")] == ["position"]
