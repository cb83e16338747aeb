"""Turn a store into a format 1 store, as an older snapstore would have left it: a FORMAT
marker saying 1, every snapshot's manifest a flat list of its entries, and every blob a
record of a format 1 pack (no tree objects). Written from the format 1 layout in
docs/format.md, independently of the library's writers."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import blake3

from helpers.formatv3 import to_old_layout
from snapstore import SnapStore
from snapstore.format import packfile
from snapstore.format.manifest import encode
from snapstore.format.times import time_to_ns
from snapstore.internals import repository


def _v1_pack(blobs: dict[bytes, bytes]) -> tuple[bytes, bytes]:
    """A format 1 pack holding ``blobs``, and its index."""
    parts = [packfile.PACK_MAGIC_V1]
    entries = {}
    offset = len(packfile.PACK_MAGIC_V1)
    for digest, data in blobs.items():
        parts.append(packfile.RECORD_HEAD_V1.pack(digest, len(data)))
        entries[digest] = (offset + packfile.RECORD_HEAD_V1.size, len(data))
        parts.append(data)
        offset += packfile.RECORD_HEAD_V1.size + len(data)
    index = [packfile.INDEX_HEAD_V1.pack(packfile.INDEX_MAGIC_V1, len(entries), offset)]
    index += [packfile.INDEX_ENTRY_V1.pack(d, *e) for d, e in sorted(entries.items())]
    body = b"".join(index)
    return b"".join(parts), body + blake3.blake3(body).digest(length=16)


def downgrade_to_format_1(root: Path) -> None:
    """Rewrite the store at ``root`` (made by this version, with nothing loose) in format 1."""
    store = SnapStore(root, durable=False)
    manifests: dict[str, bytes] = {}
    blobs: dict[bytes, bytes] = {}
    for object_name in repository(store).catalog.names():
        manifest = repository(store).catalog.read_named(object_name)
        info = manifest.info
        created_ns = time_to_ns(info.created_at)
        expires_ns = None if info.expires_at is None else time_to_ns(info.expires_at)
        if info.kind == "state":
            manifests[object_name] = encode(
                info, created_ns=created_ns, expires_ns=expires_ns, value=manifest.value, rows=[]
            )
            continue
        entries = store.get(info.session, info.name).entries
        for entry in entries:
            if entry.digest is not None:
                blobs[entry.digest] = store.read(info.session, info.name, entry.path)
        manifests[object_name] = encode(
            info, created_ns=created_ns, expires_ns=expires_ns, rows=list(entries)
        )
    store.close()
    packs = root / "packs"
    for path in packs.iterdir():
        path.chmod(0o644)
        path.unlink()
    pack, index = _v1_pack(blobs)
    pack_id = os.urandom(16).hex()
    (packs / f"{pack_id}.pack").write_bytes(pack)
    (packs / f"{pack_id}.idx").write_bytes(index)
    to_old_layout(root)
    for object_name, data in manifests.items():
        path = Path(repository(store).catalog.manifest_path(*_names(store, object_name)))
        path.chmod(0o644)
        path.write_bytes(data)
    (root / "FORMAT").write_text("snapstore format 1\n")
    shutil.rmtree(root / "cache", ignore_errors=True)
    time.sleep(0.01)


def _names(store: SnapStore, object_name: str) -> tuple[str, str]:
    info = repository(store).catalog.read_header(object_name).info
    return info.session, info.name
