"""Converting a format 1 store to format 2, in steps each of which leaves a store every
reader of format 2 reads whole.

Runs inside gc (``gc.collect``), holding the gc lock as a create does (so none of the trees
it writes is deleted before its manifest names them). The order, and why it is safe to stop
anywhere (a kill or a power cut):

1. The FORMAT marker says 2 (an atomic, durable replace): a version that reads format 1 only
   refuses the store from then on, instead of mistaking format 2 packs for garbage.
2. The tree objects of every format 1 manifest are written into a pack, published and
   flushed like any pack, before any manifest names them.
3. Under its session's lock, each format 1 manifest that has not changed since it was read is
   replaced, atomically and durably, by a format 2 manifest holding the same header (creation
   and expiry times included) and naming its root tree. A manifest replaced or deleted
   meanwhile is left alone; the trees written for it are garbage for the next gc.
4. gc itself then rewrites every format 1 pack into format 2 packs, and packs small loose
   blobs (``packgc``): new packs are flushed before old ones go.

Until every step has run, the store holds both formats; gc (or ``upgrade``) run again goes
on where the last run stopped.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from snapstore.backend.seam import Handle, Kind, Version
from snapstore.errors import CorruptManifestError
from snapstore.format.manifest import MAX_MANIFEST_BYTES, decode, decode_header, encode
from snapstore.format.packfile import KIND_TREE
from snapstore.format.rows import entry_rows
from snapstore.format.treebuild import build_trees
from snapstore.fs.reading import UnfitFileError
from snapstore.logs import get_logger
from snapstore.repo.batch import BlobBatch
from snapstore.repo.repository import Repository
from snapstore.repo.sessions import session_dir_of

logger = get_logger(__name__)


@dataclass
class _Converted:
    """A format 2 manifest ready to replace the format 1 manifest ``name`` if that object is
    still at ``version``."""

    name: str
    version: Version
    data: bytes


@dataclass
class ConversionResult:
    """What a conversion of manifests did, and the manifests it could not convert."""

    converted: int = 0
    problems: list[str] = field(default_factory=list)


def _format_1_names(repo: Repository) -> list[str]:
    """The object names of the manifests still in format 1 (their magic's last byte)."""
    found = []
    for name in repo.catalog.names():
        try:
            head, _ = repo.backend.read_head(Handle(Kind.MANIFEST, name), 8)
        except (FileNotFoundError, NotADirectoryError, UnfitFileError):
            continue
        if head[:7] == b"SNAPMAN" and head[7:8] == b"\x01":
            found.append(name)
    return found


def _prepare(repo: Repository, name: str, batch: BlobBatch) -> _Converted | None:
    """The format 2 manifest replacing ``name``, its trees stored through ``batch``; None if
    it is gone. CorruptManifestError if it does not decode (it is left as it is)."""
    handle = Handle(Kind.MANIFEST, name)
    try:
        data, info = repo.backend.read(handle, max_bytes=MAX_MANIFEST_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnfitFileError as error:
        raise CorruptManifestError(str(error)) from None
    manifest = decode(data)
    header = decode_header(data, len(data))
    if manifest.version != 1:
        return None
    tree = None
    if manifest.info.kind == "files":
        rows = entry_rows(manifest.entries)
        built = build_trees(rows)
        for digest, tree_data in built.objects.items():
            batch.add(digest, tree_data, KIND_TREE)
        tree = built.root
    new = encode(
        manifest.info,
        created_ns=header.created_ns,
        expires_ns=header.expires_ns,
        tree=tree,
        value=manifest.value,
    )
    return _Converted(name, info.version, new)


def convert_manifests(repo: Repository) -> ConversionResult:
    """Replace every format 1 manifest by its format 2 form (steps 2 and 3 of the module
    docstring). The exclusive gc lock must be held."""
    result = ConversionResult()
    names = _format_1_names(repo)
    if not names:
        return result
    batch = BlobBatch(repo.blobs)
    ready: list[_Converted] = []
    try:
        for name in names:
            try:
                converted = _prepare(repo, name, batch)
            except (CorruptManifestError, ValueError) as error:
                result.problems.append(f"manifest {name} was not converted: {error}")
                continue
            if converted is not None:
                ready.append(converted)
        batch.finish()
    except BaseException:
        batch.abort()
        raise
    by_session: dict[str, list[_Converted]] = defaultdict(list)
    for converted in ready:
        by_session[session_dir_of(converted.name)].append(converted)
    for session_dir, conversions in sorted(by_session.items()):
        with repo.sessions.changing_dir(session_dir) as change:
            for converted in conversions:
                handle = Handle(Kind.MANIFEST, converted.name)
                try:
                    if repo.backend.stat(handle).version != converted.version:
                        continue  # replaced since it was read: its new form is already current
                except (FileNotFoundError, NotADirectoryError):
                    continue
                change.rewrite(converted.name, converted.data)
                result.converted += 1
    logger.info("converted %d format 1 manifests to format 2", result.converted)
    return result
