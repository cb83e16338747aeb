"""The local layout of docs/format.md in names: where each object lives under a store's root
(``path``: the one place the layout is spelt out), and which objects the directories hold
(``names``). Nothing here reads or writes an object; ``local.LocalBackend`` does, through
these paths.
"""

from __future__ import annotations

import os

from snapstore.backend.layout import MARKER_FILE
from snapstore.backend.names import check_name
from snapstore.backend.seam import Handle, Kind

MANIFEST_SUFFIX = ".manifest"
"""Format 4: a manifest is the file ``sessions/<session-dir>/<name-dir>.manifest``. No
``<name-dir>`` ends with it (they end in hex digits; an encrypted store's sealed ones in
base32 letters and digits), so a listing tells the two layouts apart by the name alone."""
LEGACY_MANIFEST_FILE = "manifest"
"""Formats 1-3: a manifest is ``sessions/<session-dir>/<name-dir>/manifest``; read, and
removed when its snapshot is replaced or deleted, never written."""
PACK_SUFFIX = ".pack"
INDEX_SUFFIX = ".idx"
_DIRS = {
    Kind.BLOB: "blobs",
    Kind.PACK: "packs",
    Kind.INDEX: "packs",
    Kind.MANIFEST: "sessions",
    Kind.JOURNAL: "journal",
    Kind.CACHE: "cache",
    Kind.KEY: "keys",
}


class LocalPaths:
    """The paths of the objects of the store in the directory ``root``."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.kind_dirs = {kind: os.path.join(root, name) for kind, name in _DIRS.items()}

    def path(self, handle: Handle) -> str:
        """Where an object lives: the one place the layout of docs/format.md is spelt out."""
        check_name(handle)
        kind, name = handle.kind, handle.name
        if kind is Kind.MARKER:
            return os.path.join(self.root, MARKER_FILE)
        directory = self.kind_dirs[kind]
        if kind is Kind.MANIFEST:  # joined by hand: list() asks for 10,000 of these at once
            return f"{directory}/{name}{MANIFEST_SUFFIX}"
        if kind is Kind.BLOB:
            return f"{directory}/{name[:2]}/{name[2:]}"
        if kind is Kind.PACK:
            return f"{directory}/{name}{PACK_SUFFIX}"
        if kind is Kind.INDEX:
            return f"{directory}/{name}{INDEX_SUFFIX}"
        return f"{directory}/{name}"

    def legacy_manifest(self, name: str) -> str:
        """Where a store of format 3 or older keeps the manifest called ``name`` (its name
        checked by ``path`` first)."""
        return f"{self.kind_dirs[Kind.MANIFEST]}/{name}/{LEGACY_MANIFEST_FILE}"

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        """The names of the objects of ``kind`` whose names start with ``prefix``, sorted, as
        a listing of their directories shows them (what a name holds is not looked at)."""
        directory = self.kind_dirs[kind]
        if kind is Kind.BLOB:
            return self._blob_names(directory, prefix)
        if kind is Kind.MANIFEST:
            return self._manifest_names(directory, prefix)
        if kind is Kind.CACHE:
            return self._nested_names(directory, prefix)
        if kind in (Kind.PACK, Kind.INDEX):
            suffix = PACK_SUFFIX if kind is Kind.PACK else INDEX_SUFFIX
            return sorted(
                name[: -len(suffix)]
                for name in listdir(directory)
                if name.endswith(suffix) and name.startswith(prefix)
            )
        return sorted(name for name in listdir(directory) if name.startswith(prefix))

    @staticmethod
    def _blob_names(directory: str, prefix: str) -> list[str]:
        shards = [prefix[:2]] if len(prefix) >= 2 else sorted(listdir(directory))
        found = []
        for shard in shards:
            if len(shard) != 2 or not shard.startswith(prefix[:2]):
                continue
            found += [shard + rest for rest in sorted(listdir(os.path.join(directory, shard)))]
        return [name for name in found if name.startswith(prefix)]

    @staticmethod
    def _nested_names(directory: str, prefix: str) -> list[str]:
        """The files under ``directory`` at any depth, by their paths relative to it (only
        the directories that can hold a name starting with ``prefix`` are walked)."""
        found = []
        for parent, directories, files in os.walk(directory):
            relative = os.path.relpath(parent, directory)
            base = "" if relative == "." else relative + "/"
            directories[:] = [
                name
                for name in directories
                if (base + name + "/").startswith(prefix) or prefix.startswith(base + name + "/")
            ]
            found += [base + name for name in files if (base + name).startswith(prefix)]
        return sorted(found)

    @staticmethod
    def _manifest_names(directory: str, prefix: str) -> list[str]:
        """Each entry of a session directory names one snapshot: ``<name-dir>.manifest``
        (format 4) or ``<name-dir>`` (the directory of format 3 and older; an empty one left
        by an interrupted delete is listed too, and found empty by a stat). A name in both
        layouts at once is listed once."""
        session_prefix, slash, _ = prefix.partition("/")
        sessions = [session_prefix] if slash else listdir(directory)
        found: set[str] = set()
        for session in sessions:
            if not session.startswith(session_prefix) or session in (".", ".."):
                continue
            for entry in listdir(os.path.join(directory, session)):
                name = manifest_entry_name(entry)
                if name and f"{session}/{name}".startswith(prefix):
                    found.add(f"{session}/{name}")
        return sorted(found)


def manifest_entry_name(entry: str) -> str:
    """The snapshot directory name an entry of a session directory stands for ("" for
    none: ``.manifest`` and ``..manifest`` name nothing a manifest can be called)."""
    name = entry[: -len(MANIFEST_SUFFIX)] if entry.endswith(MANIFEST_SUFFIX) else entry
    return "" if name in (".", "..") else name


def listdir(directory: str) -> list[str]:
    """The entries of ``directory``; none if it is missing or is no directory."""
    try:
        return os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
