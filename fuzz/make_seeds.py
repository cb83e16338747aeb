"""Write the seed corpus of the fuzz targets (``python fuzz/make_seeds.py``); the files are
committed, so this only needs re-running when the manifest format changes."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import msgpack

from snapstore.format.manifest import encode
from snapstore.models import FileEntry, SnapshotInfo

CORPUS = Path(__file__).parent / "corpus"


def _info(kind: str, entries: tuple[FileEntry, ...] = ()) -> SnapshotInfo:
    files = [e for e in entries if e.kind == "file"]
    return SnapshotInfo(
        session="session/ü",
        name="name 1",
        kind=kind,  # type: ignore[arg-type]
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        expires_at=None,
        file_count=len(files),
        total_bytes=sum(e.size for e in files),
        meta={"who": "seed", "n": [1, 2]},
        base_dir="/base",
        roots=(".",),
    )


def manifest_seeds() -> list[bytes]:
    entries = (
        FileEntry("a.txt", "file", 0o644, 5, 1, bytes(range(32))),
        FileEntry("d", "dir", 0o755, 0, 1),
        FileEntry("d/link", "symlink", 0o777, 0, 1, target="../a.txt"),
        FileEntry("gone", "absent"),
    )
    files = encode(_info("files", entries), created_ns=1, expires_ns=None, entries=entries)
    state = encode(_info("state"), created_ns=1, expires_ns=5, value={"cursor": 41})
    header_patch = msgpack.packb({"file_count": 7, "roots": ["../x"]})
    body_entries = msgpack.packb([["../../etc/passwd", "file", 0o644, 3, 0, bytes(32), None]])
    return [
        b"\x00" + files,
        b"\x00" + state,
        b"\x00" + files[:40],
        b"\x01\x10\x00" + files[56:],
        b"\x02" + header_patch,
        b"\x02" + body_entries,
        b"\x02" + msgpack.packb([["a", "symlink", 0, 0, 0, None, "x"], ["a/b", "file"]]),
    ]


NAMING = [
    "a/b",
    "a_b",
    "Foo",
    "foo",
    "CON",
    "con.txt",
    "..",
    ".",
    "é",
    "e\u0301",
    "x" * 300,
    "tab\tname",
    "trailing. ",
    "LPT9",
    "日本語",
    "-",
    "_",
]
RESTORE = [
    "fa.txt\ndd\nfd/b.txt",
    "f../escape",
    "f/etc/passwd",
    "fC:/windows\nf\\\\server\\share\nfa\\b",
    "fa\x00b",
    "flink_out/x.txt",
    "dlink_out\nflink_out/x.txt",
    "ffile_link",
    "fdir/link_up/x",
    "lnew\t../../outside\nfnew/x",
    "fA.txt\nfa.txt",
    "f\u00e9\nfe\u0301",
    "aCON\nfNUL.txt\nfcom1",
    "f./a\nfa//b\nfa/./b\nfa/",
]


def main() -> None:
    for target, seeds in (
        ("manifest", manifest_seeds()),
        ("naming", [n.encode() for n in NAMING]),
        ("restore_paths", [r.encode() for r in RESTORE]),
    ):
        directory = CORPUS / target
        directory.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


if __name__ == "__main__":
    main()
