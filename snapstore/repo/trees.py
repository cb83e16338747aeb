"""A snapshot's file listing, read from its tree objects (format 2) or its flat list (format 1).

Trees are read only as far as an operation needs: ``lookup`` of one path decodes the
directories on its way, ``select`` the subtrees asked for, ``entries`` all of them. Each tree
object is verified against its digest, validated, and remembered by digest (its bytes can
never change), so subtrees shared between snapshots are decoded once per process object.
Call under the shared gc lock (``Repository.blobs_in_use``): no tree vanishes meanwhile.
"""

from __future__ import annotations

import os
import posixpath
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from operator import itemgetter

from snapstore.errors import PathNotInSnapshotError, UnsafePathError
from snapstore.format.manifest import MAX_ENTRIES, Manifest
from snapstore.format.paths import MAX_PATH_BYTES, check_relative_path, select_entries
from snapstore.format.tree import SUBTREE_KINDS, CorruptTreeError, TreeRef, TreeRow, decode_tree
from snapstore.models import FileEntry
from snapstore.repo.blobs import Blobs

MAX_REMEMBERED_TREES = 8192

Tree = dict[str, TreeRow]
"""A decoded tree: its rows by name, in name order."""


class Trees:
    """The tree objects of one store, read through its blobs."""

    def __init__(self, blobs: Blobs) -> None:
        self.blobs = blobs
        self._decoded: OrderedDict[bytes, Tree] = OrderedDict()

    def read(self, ref: TreeRef) -> Tree:
        """A tree object's rows by name; MissingBlobError or CorruptBlobError if its bytes
        cannot be had, CorruptTreeError if they are not a valid tree."""
        found = self._decoded.get(ref.digest)
        if found is not None:
            return found
        rows = decode_tree(self.blobs.read(ref.digest, ref.size))
        tree = {row[0]: row for row in rows}
        self._decoded[ref.digest] = tree
        while len(self._decoded) > MAX_REMEMBERED_TREES:
            self._decoded.popitem(last=False)
        return tree

    def walk(self, prefix: str, ref: TreeRef, budget: list[int]) -> Iterator[FileEntry]:
        """Every entry below the directory ``prefix`` ("" for the base, else ending in
        "/") whose tree is ``ref``, depth first; ``budget`` holds how many more entries may
        come (a tree shared many times over must not multiply a snapshot beyond
        ``MAX_ENTRIES``)."""
        pending = [(prefix, ref)]
        while pending:
            prefix, ref = pending.pop()
            tree = self.read(ref)
            budget[0] -= len(tree)
            if budget[0] < 0:
                raise CorruptTreeError(f"the snapshot's trees hold over {MAX_ENTRIES} entries")
            _check_names(prefix, tree)
            for name, kind, mode, size, mtime_ns, digest, target in tree.values():
                path = prefix + name
                if kind in SUBTREE_KINDS:
                    if digest is not None:
                        pending.append((path + "/", TreeRef(digest, size)))
                    if kind == "parent":
                        continue
                    size = 0
                    digest = None
                yield FileEntry(path, kind, mode, size, mtime_ns, digest, target)  # type: ignore[arg-type]

    def entries(self, manifest: Manifest) -> tuple[FileEntry, ...]:
        """Every entry of a file snapshot, in path order, checked against its header."""
        if manifest.tree is None:
            return manifest.entries
        found = sorted(self.walk("", manifest.tree, [MAX_ENTRIES]), key=itemgetter(0))
        files = [entry for entry in found if entry.kind == "file"]
        info = manifest.info
        if info.file_count != len(files) or info.total_bytes != sum(e.size for e in files):
            raise CorruptTreeError("the snapshot's trees do not hold the files its header counts")
        return tuple(found)

    def _node(self, root: TreeRef, path: str) -> TreeRow | None:
        """The row recording ``path`` (a checked relative path), or None."""
        parts = path.split("/")
        ref = root
        for depth, name in enumerate(parts):
            row = self.read(ref).get(name)
            if row is None or depth == len(parts) - 1:
                return row
            if row[1] not in SUBTREE_KINDS or row[5] is None:
                return None
            ref = TreeRef(row[5], row[3])
        return None

    def select(self, manifest: Manifest, paths: Iterable[str] | None) -> list[FileEntry]:
        """The entries at or below each of ``paths`` (None: all), in path order;
        PathNotInSnapshotError for a path with nothing recorded at or below it."""
        if manifest.tree is None:
            return select_entries(manifest.entries, paths)
        if paths is None:
            return list(self.entries(manifest))
        found: dict[str, FileEntry] = {}
        budget = [MAX_ENTRIES]
        for raw in paths:
            path = check_relative_path(posixpath.normpath(str(raw).replace(os.sep, "/")))
            row = self._node(manifest.tree, path)
            if row is None:
                raise PathNotInSnapshotError(f"path {path!r} is not in the snapshot")
            _, kind, mode, size, mtime_ns, digest, target = row
            if kind != "parent":
                entry_size, entry_digest = (0, None) if kind == "dir" else (size, digest)
                entry = FileEntry(path, kind, mode, entry_size, mtime_ns, entry_digest, target)  # type: ignore[arg-type]
                found[path] = entry
            if kind in SUBTREE_KINDS and digest is not None:
                for entry in self.walk(path + "/", TreeRef(digest, size), budget):
                    found[entry.path] = entry
        return sorted(found.values(), key=itemgetter(0))

    def find(self, manifest: Manifest, path: str) -> FileEntry | None:
        """The entry recorded for exactly ``path`` (a checked relative path), or None."""
        if manifest.tree is None:
            return next((entry for entry in manifest.entries if entry.path == path), None)
        row = self._node(manifest.tree, path)
        if row is None or row[1] == "parent":
            return None
        _, kind, mode, size, mtime_ns, digest, target = row
        if kind == "dir":
            size, digest = 0, None
        return FileEntry(path, kind, mode, size, mtime_ns, digest, target)  # type: ignore[arg-type]

    def lookup(self, manifest: Manifest, path: str) -> FileEntry:
        """The entry of one recorded path (the first below it, for a directory the snapshot
        holds only the contents of); PathNotInSnapshotError if there is none."""
        return self.select(manifest, [path])[0]


def _check_names(prefix: str, tree: Tree) -> None:
    """Full paths must follow the rules a format 1 manifest's paths follow: a name at the top
    that looks like a drive, or a path over ``MAX_PATH_BYTES``, is refused."""
    longest = max(map(len, tree), default=0)
    if prefix and (len(prefix) + longest) * 4 <= MAX_PATH_BYTES:
        return
    for name in tree:
        try:
            check_relative_path(prefix + name)
        except UnsafePathError as error:
            raise CorruptTreeError(f"a tree records an unsafe path: {error}") from None


class Marks:
    """What committed snapshots reference: each blob's size (tree objects too), which are
    trees, and a path where each file blob was first seen (gc packs the versions of a path
    side by side, so they compress against each other)."""

    def __init__(self) -> None:
        self.sizes: dict[bytes, int] = {}
        self.trees: set[bytes] = set()
        self.paths: dict[bytes, str] = {}

    def add_manifest(self, trees: Trees, manifest: Manifest) -> None:
        """Mark what ``manifest`` references; a subtree marked before is not read again."""
        if manifest.tree is None:
            for entry in manifest.entries:
                if entry.digest is not None:
                    self.sizes[entry.digest] = entry.size
                    self.paths.setdefault(entry.digest, entry.path)
            return
        pending = [("", manifest.tree)]
        while pending:
            prefix, ref = pending.pop()
            if ref.digest in self.trees:
                continue
            tree = trees.read(ref)
            self.trees.add(ref.digest)
            self.sizes[ref.digest] = ref.size
            for name, kind, _, size, _, digest, _ in tree.values():
                if digest is None:
                    continue
                if kind in SUBTREE_KINDS:
                    pending.append((f"{prefix}{name}/", TreeRef(digest, size)))
                else:
                    self.sizes[digest] = size
                    self.paths.setdefault(digest, prefix + name)
