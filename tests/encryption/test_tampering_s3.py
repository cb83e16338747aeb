"""A changed byte in any object of an encrypted bucket is a typed error through the command
line (exit 13 for damaged data, 16 for a key, 1 for the marker or a config that is no
longer one, 16 for one whose values changed), and a restore writes no
byte it could not authenticate."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import Cli
from helpers.s3server import S3Server

from snapstore.backend.s3.client import make_client

from .conftest import bucket_objects

FILES = {"a.txt": b"alpha " * 100, "dir/b.log": b"a line\n" * 20_000}


def test_a_changed_byte_in_any_bucket_object_is_a_typed_error(
    tmp_path: Path, s3_server: S3Server, s3_url: str
) -> None:
    cli = Cli(tmp_path)
    base = tmp_path / "work"
    for name, data in FILES.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(data)
    env = {"SNAPSTORE_PASSWORD": "pw", **s3_server.env()}

    def run(*args: str, cache: str) -> int:
        result = cli.run(
            "--root",
            s3_url,
            *args,
            root=False,
            env={**env, "SNAPSTORE_CACHE_DIR": str(tmp_path / cache)},
        )
        return result.code

    assert run("init", "--encrypt", cache="writer") == 0
    assert run("create", "s", "--base", str(base), "-n", "n1", ".", cache="writer") == 0
    client = make_client(endpoint_url=s3_server.endpoint)
    objects = {
        key: data
        for key, data in bucket_objects(s3_server, s3_url).items()
        if "/locks/" not in key and "/leases/" not in key
    }
    kinds = {key.split("/")[-1] if "/keys/" in key else key.split("/")[1] for key in objects}
    assert {"sessions", "packs", "FORMAT", "config"} <= kinds
    for number, (key, data) in enumerate(sorted(objects.items())):
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 1
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=bytes(flipped))
        target = tmp_path / f"target{number}"
        code = run(
            "restore", "s", "n1", "--target", str(target), "--no-backup", cache=f"reader{number}"
        )
        assert code in (1, 13, 16), (key, code)
        if key.endswith("FORMAT"):
            assert code == 1
        elif key.endswith("/keys/config"):
            assert code in (1, 16)  # EncryptionError (not a config) or no key opens
        elif "/keys/" in key:
            assert code == 16
        else:
            assert code == 13, key
        for path in target.rglob("*") if target.exists() else []:
            if path.is_file():
                assert path.read_bytes() == FILES[str(path.relative_to(target))], (key, path)
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=data)
    assert run("restore", "s", "n1", "--target", str(tmp_path / "whole"), cache="last") == 0
