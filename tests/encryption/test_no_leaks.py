"""No object of an encrypted store (a directory, a bucket, the host cache) holds any file's
content, name, directory name, session name, snapshot name or state value, nor the unkeyed
hash of any file: checked on stores made through the command line, with the password in
SNAPSTORE_PASSWORD."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import blake3
import pytest
from helpers.cli import Cli
from helpers.s3server import S3Server

from .conftest import bucket_objects, directory_objects

PASSWORD = {"SNAPSTORE_PASSWORD": "correct horse battery staple"}


class Markers:
    """Marker strings a leak would show, and the files holding them."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:10]
        self.content = f"MARKERCONTENT{tag}"
        self.file = f"MARKERFILE{tag}"
        self.directory = f"MARKERDIR{tag}"
        self.session = f"MARKERSESSION{tag}"
        self.snapshot = f"MARKERSNAP{tag}"
        self.state = f"MARKERSTATE{tag}"
        self.contents: list[bytes] = []

    def write_tree(self, base: Path, *, large: bool) -> None:
        (base / self.directory).mkdir(parents=True)
        small = (self.content * 3).encode()
        (base / self.directory / f"{self.file}.txt").write_bytes(small)
        repeated = (self.content + "\n").encode() * 20_000
        (base / f"{self.file}-repeated.log").write_bytes(repeated)
        self.contents += [small, repeated]
        if large:
            big = self.content.encode() + os.urandom(17 << 20)
            (base / f"{self.file}-large.bin").write_bytes(big)
            self.contents.append(big)

    def needles(self) -> list[bytes]:
        words = [self.content, self.file, self.directory, self.session, self.snapshot, self.state]
        found = [word.encode() for word in words]
        for data in self.contents:
            digest = blake3.blake3(data).digest()
            found += [digest, digest.hex().encode(), digest[:10], digest.hex()[:20].encode()]
        return found

    def check(self, objects: dict[str, bytes]) -> None:
        assert objects
        needles = self.needles()
        for name, data in objects.items():
            for needle in needles:
                assert needle not in name.encode(), f"{name!r} names {needle!r}"
                assert needle not in data, f"{name!r} holds {needle!r}"


def _fill(cli: Cli, root: str, markers: Markers, env: dict[str, str], *, large: bool) -> None:
    """Make the encrypted store at ``root`` and put everything a user leaves in it."""
    base = cli.cwd / "work"
    markers.write_tree(base, large=large)
    run = lambda *args: cli.run("--root", root, *args, root=False, env=env)  # noqa: E731
    assert run("init", "--encrypt").code == 0
    created = run("create", markers.session, "--base", str(base), "-n", markers.snapshot, ".")
    assert created.code == 0, created.stderr
    assert run("create", markers.session, "--base", str(base), ".").code == 0
    state = run("state", "set", markers.session, markers.state, f'"{markers.state}"')
    assert state.code == 0, state.stderr
    (base / markers.directory / f"{markers.file}.txt").write_text("changed")
    restored = run("restore", markers.session, markers.snapshot)
    assert restored.code == 0, restored.stderr
    assert (base / markers.directory / f"{markers.file}.txt").read_bytes() == markers.contents[0]
    listed = run("--json", "list")
    assert listed.code == 0 and markers.snapshot in listed.stdout
    assert run("gc").code == 0


def test_a_local_encrypted_store_holds_no_marker(tmp_path: Path) -> None:
    cli, markers = Cli(tmp_path), Markers()
    _fill(cli, str(cli.root), markers, PASSWORD, large=True)
    objects = directory_objects(cli.root)
    assert sum(name.endswith(".pack") for name in objects) >= 2
    markers.check(objects)


def test_an_encrypted_bucket_and_its_host_cache_hold_no_marker(
    tmp_path: Path, s3_server: S3Server, s3_url: str
) -> None:
    cli, markers = Cli(tmp_path), Markers()
    cache = tmp_path / "host-cache"
    env = {**PASSWORD, **s3_server.env(), "SNAPSTORE_CACHE_DIR": str(cache)}
    _fill(cli, s3_url, markers, env, large=False)
    objects = bucket_objects(s3_server, s3_url)
    assert any("/sessions/" in key for key in objects)
    markers.check(objects)
    markers.check(directory_objects(cache))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_the_same_file_has_other_names_in_two_stores(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """Content addresses are keyed: the same files stored in two stores give objects of
    unrelated names (but the few fixed ones), so nobody without a key can test a store for a
    known file by the names of its objects."""
    from snapstore import SnapStore

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "same.txt").write_bytes(b"x" * (3 << 20))
    (tmp_path / "work" / "small.txt").write_bytes(b"the same small file")
    names = []
    for number in range(2):
        if where == "s3":
            server = request.getfixturevalue("s3_server")
            root: str = server.url(f"same-{uuid.uuid4().hex}")
        else:
            root = str(tmp_path / f"store{number}")
        with SnapStore(root, password="pw", encrypt=True) as store:
            store.create("s", "n", base_dir=str(tmp_path / "work"), paths=["."])
        objects = bucket_objects(server, root) if where == "s3" else directory_objects(Path(root))
        fixed = ("FORMAT", "keys/config", "packs/log", "locks/gc", "locks/gc-intent")
        names.append({
            name.split("/", 1)[1] if where == "s3" else name
            for name in objects
            if not name.endswith(fixed)
        })  # fmt: skip
    assert names[0] and names[1]
    assert not names[0] & names[1]
