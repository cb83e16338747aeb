"""Fuzz target: manifest decoding raises only CorruptManifestError, in bounded time.

Inputs are used three ways (chosen by the first byte) so the fuzzer gets past the checksums:
as a whole manifest file; as a header and a body framed with a correct prelude; and as a
msgpack value merged into a valid header or used as the body, then framed.
Run: ``python fuzz/fuzz_manifest.py fuzz/corpus/manifest`` (see fuzz/README.md).
"""

from __future__ import annotations

import contextlib
import struct
import sys
import time
from typing import Any

import blake3
import msgpack

from snapstore.errors import CorruptManifestError
from snapstore.format.manifest import (
    CHECKSUM_BYTES,
    MAGIC,
    PRELUDE,
    decode,
    decode_header,
    header_bytes_needed,
)
from snapstore.format.paths import check_relative_path

TIME_LIMIT = 1.0
VALID_HEADER: dict[str, Any] = {
    "v": 1,
    "kind": "files",
    "session": "s",
    "name": "n",
    "created_ns": 1_700_000_000_000_000_000,
    "expires_ns": None,
    "file_count": 1,
    "total_bytes": 3,
    "meta": {},
    "base_dir": "/base",
    "skipped": [],
    "roots": ["."],
}
VALID_BODY: dict[str, Any] = {
    "entries": [
        ["a.txt", "file", 0o644, 3, 0, bytes(32), None],
        ["d", "dir", 0o755, 0, 0, None, None],
    ]
}


def _checksum(lengths: bytes, part: bytes) -> bytes:
    hasher = blake3.blake3()
    hasher.update(lengths)
    hasher.update(part)
    return hasher.digest(length=CHECKSUM_BYTES)


def frame(header: bytes, body: bytes) -> bytes:
    """A manifest file around raw header and body bytes, with a correct prelude."""
    lengths = struct.pack("<IQ", len(header), len(body))
    prelude = PRELUDE.pack(
        MAGIC, len(header), len(body), _checksum(lengths, header), _checksum(lengths, body)
    )
    return prelude + header + body


def _structured(data: bytes) -> bytes:
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:
        value = None
    header, body = dict(VALID_HEADER), VALID_BODY
    if isinstance(value, dict):
        header.update({str(k): v for k, v in value.items()})
    else:
        body = {"entries": value} if isinstance(value, list) else value
    try:
        return frame(msgpack.packb(header), msgpack.packb(body))
    except (TypeError, ValueError, OverflowError):
        return data


def to_manifest(data: bytes) -> bytes:
    """The manifest bytes an input stands for."""
    if not data:
        return data
    mode, rest = data[0] % 3, data[1:]
    if mode == 0:
        return rest
    if mode == 1:
        split = int.from_bytes(rest[:2], "little") % (len(rest) + 1)
        return frame(rest[2:][:split], rest[2:][split:])
    return _structured(rest)


def test_one_input(data: bytes) -> None:
    """Decode the input every way snapstore does; anything but CorruptManifestError fails."""
    manifest_bytes = to_manifest(data)
    started = time.monotonic()
    try:
        manifest = decode(manifest_bytes)
    except CorruptManifestError:
        pass
    else:
        paths = [entry.path for entry in manifest.entries]
        assert len(set(paths)) == len(paths), "a decoded manifest lists a path twice"
        for path in paths:
            check_relative_path(path)
    with contextlib.suppress(CorruptManifestError):
        decode_header(manifest_bytes, len(manifest_bytes))
    with contextlib.suppress(CorruptManifestError):
        header_bytes_needed(manifest_bytes)
    elapsed = time.monotonic() - started
    assert elapsed < TIME_LIMIT, f"decoding {len(manifest_bytes)} bytes took {elapsed:.2f}s"


def main() -> None:
    """Run under atheris (``pip install -e '.[fuzz]'``)."""
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
