"""The local backend: a store as a directory on a POSIX filesystem (docs/format.md).

Every path of the layout comes from ``localpaths`` (``path``), and nowhere else. Durability is
this module's business: an object is written to ``tmp/``, flushed, and renamed into place, and the
directories whose entries changed are flushed before a call reports success (or, for staged
objects, at ``flush``, which batches the directory flushes of a whole snapshot). Every
mutation goes through the I/O seam (``fs``), so the crash, power-loss and fault suites see it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence

from snapstore.backend.filelock import FileLock
from snapstore.backend.layout import MARKER_FILE, open_layout
from snapstore.backend.localmanifests import ManifestFiles, object_info
from snapstore.backend.localpaths import LocalPaths, listdir
from snapstore.backend.localstaged import AppendableFile, StagedFile
from snapstore.backend.lockfds import IdleLockFiles
from snapstore.backend.packlog import PackLog
from snapstore.backend.seam import Handle, Kind, ObjectInfo, Properties, Version
from snapstore.errors import ConcurrentWriteError, StoreNotFoundError
from snapstore.fs.durable import TEMP_PREFIX, ensure_dir, write_atomic
from snapstore.fs.reading import UnfitFileError, open_regular, read_all, read_regular
from snapstore.fs.seam import LOCAL, FileSystem

MAX_OPEN_PACKS = 16
_READ_ONLY_MODE = {Kind.BLOB, Kind.PACK, Kind.INDEX, Kind.MANIFEST, Kind.KEY}
"""Kinds written with mode 0444 (immutable once published)."""


class LocalBackend:
    """A store in the directory ``root``; ``fs`` is the I/O seam, ``durable=False`` skips
    every flush (tests and scratch stores only)."""

    def __init__(
        self,
        root: str,
        *,
        fs: FileSystem = LOCAL,
        durable: bool = True,
        lock_timeout: float = 30.0,
    ) -> None:
        self.root = os.path.abspath(root)
        self.fs = fs
        self.durable = durable
        self.lock_timeout = lock_timeout
        self.tmp_dir = os.path.join(self.root, "tmp")
        self.properties = Properties(durable=durable, local_root=self.root, appends=True)
        self._local = threading.local()
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._fds_lock = threading.Lock()
        # On the descriptors, not on self: a backend dropped without ``close`` (its store
        # dropped) closes its packs when collected, and no cycle through self keeps it alive.
        weakref.finalize(self, _close_all, self._fds, self._fds_lock)
        self._idle_locks = IdleLockFiles()
        self.paths = LocalPaths(self.root)
        self.manifests = ManifestFiles(self.paths, fs, durable=durable, tmp_dir=self.tmp_dir)

    # ------------------------------------------------------------------ layout

    def path(self, handle: Handle) -> str:
        """Where an object lives (``LocalPaths.path``)."""
        return self.paths.path(handle)

    def kind_dir(self, kind: Kind) -> str:
        """The directory holding the objects of ``kind``."""
        return self.paths.kind_dirs[kind]

    def describe(self, handle: Handle) -> str:
        if handle.kind is Kind.MANIFEST:
            return self.manifests.describe(handle.name)
        return self.path(handle)

    def open(self, *, create: bool) -> bool:
        if not create and not os.path.lexists(os.path.join(self.root, MARKER_FILE)):
            raise StoreNotFoundError(f"no store at {self.root}")
        return open_layout(self.root, self.fs, durable=self.durable)

    # ------------------------------------------------------------------ reading

    def stat(self, handle: Handle) -> ObjectInfo:
        if handle.kind is Kind.MANIFEST:
            return object_info(self.manifests.stat(handle.name))
        info = os.stat(self.path(handle))
        if stat.S_ISDIR(info.st_mode):
            raise FileNotFoundError(self.path(handle))
        if not stat.S_ISREG(info.st_mode):
            raise UnfitFileError(f"{self.path(handle)} is not a regular file")
        return object_info(info)

    def read(self, handle: Handle, *, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        if handle.kind is Kind.MANIFEST:
            data, info = self.manifests.read(handle.name, max_bytes)
            return data, object_info(info)
        follow = handle.kind is not Kind.CACHE  # a cache is only ever renamed into place
        data, info = read_regular(self.path(handle), max_bytes=max_bytes, follow=follow)
        return data, object_info(info)

    def read_range(self, handle: Handle, offset: int, length: int) -> bytes:
        path = self.path(handle)
        with self._fds_lock:
            fd = self._fds.get(path)
            if fd is None:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                self._fds[path] = fd
                while len(self._fds) > MAX_OPEN_PACKS:
                    os.close(self._fds.popitem(last=False)[1])
            else:
                self._fds.move_to_end(path)
            return os.pread(fd, length, offset)

    def _open_regular(self, handle: Handle) -> int:
        if handle.kind is Kind.MANIFEST:
            return self.manifests.open(handle.name)
        return open_regular(self.path(handle))

    def read_head(self, handle: Handle, length: int) -> tuple[bytes, ObjectInfo]:
        fd = self._open_regular(handle)
        try:
            info = os.fstat(fd)
            return read_all(fd, length), object_info(info)
        finally:
            os.close(fd)

    def chunks(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        fd = self._open_regular(handle)
        try:
            while chunk := os.read(fd, chunk_bytes):
                yield chunk
        finally:
            os.close(fd)

    def infos(self, kind: Kind, prefix: str = "") -> dict[str, ObjectInfo | None]:
        if kind is Kind.MANIFEST:
            return self.manifests.infos(prefix)
        found: dict[str, ObjectInfo | None] = {}
        for name in self.names(kind, prefix):
            try:
                found[name] = self.stat(Handle(kind, name))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except UnfitFileError:
                found[name] = None
        return found

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        return self.paths.names(kind, prefix)

    # ------------------------------------------------------------------ writing

    def stage(self, kind: Kind, size_hint: int = 0) -> StagedFile:
        return StagedFile(self, kind)

    def stage_appendable(self, kind: Kind) -> AppendableFile:
        return AppendableFile(self, kind)

    def write(self, handle: Handle, data: bytes, *, durable: bool = True) -> None:
        if handle.kind is Kind.MANIFEST:
            self.manifests.commit(handle.name, data)
            return
        durable = durable and self.durable
        path = self.path(handle)
        directory = os.path.dirname(path)
        mode = 0o444 if handle.kind in _READ_ONLY_MODE else 0o644
        if durable and not os.path.isdir(directory):
            ensure_dir(self.fs, directory, stop_at=self.root, durable=durable)
        try:
            write_atomic(self.fs, path, data, tmp_dir=self.tmp_dir, durable=durable, mode=mode)
        except FileNotFoundError:
            # not durable (a session's head at every create): its directory is looked for
            # only when the rename found none, a stat less per write and nothing flushed
            if durable or os.path.isdir(directory):
                raise
            ensure_dir(self.fs, directory, stop_at=self.root, durable=durable)
            write_atomic(self.fs, path, data, tmp_dir=self.tmp_dir, durable=durable, mode=mode)
        if durable:
            self.unflushed.discard(directory)  # write_atomic flushed it

    def delete(
        self, handle: Handle, *, durable: bool = True, version: Version | None = None
    ) -> None:
        path = self.path(handle)
        if version is not None and self.stat(handle).version != version:
            raise ConcurrentWriteError(
                errno.ESTALE, "replaced since it was read; not deleted", self.describe(handle)
            )
        if handle.kind is Kind.MANIFEST:
            self.manifests.delete(handle.name, durable=durable)
            return
        if handle.kind in (Kind.PACK, Kind.INDEX):
            self._forget_fd(path)
        self.fs.unlink(path)
        if durable and self.durable:
            self.fs.fsync_dir(os.path.dirname(path))

    def tidy(self) -> None:
        sessions = self.kind_dir(Kind.MANIFEST)
        for session_dir in listdir(sessions):
            with self.lock(f"sessions/{session_dir}").exclusive_if_free() as free:
                if free:
                    self.manifests.tidy_session(os.path.join(sessions, session_dir))

    def pack_log(self) -> PackLog:
        """``packs/log`` (see ``packlog``)."""
        return PackLog(os.path.join(self.kind_dir(Kind.PACK), "log"), self.fs, self.tmp_dir)

    def listing_stamp(self, kind: Kind, prefix: str) -> Hashable | None:
        """For a session's manifests: its directory's identity, times and size (or () when
        there is none)."""
        if kind is not Kind.MANIFEST or not prefix.endswith("/") or "/" in prefix[:-1]:
            return None
        try:
            info = os.stat(os.path.join(self.kind_dir(kind), prefix[:-1]))
        except (FileNotFoundError, NotADirectoryError):
            return ()
        return (info.st_ino, info.st_dev, info.st_mtime_ns, info.st_ctime_ns, info.st_size)

    def listing_stamps(self, kind: Kind, prefix: str = "") -> dict[str, Hashable | None] | None:
        """For the manifests: each session directory's settled stamp (``ManifestFiles``)."""
        return self.manifests.stamps(prefix) if kind is Kind.MANIFEST else None

    # ------------------------------------------------------------------ durability

    @property
    def unflushed(self) -> set[str]:
        """Directories this thread renamed objects into (or counts on) since its last flush:
        per thread, so one thread's commit never counts on another thread's flush."""
        dirs: set[str] | None = getattr(self._local, "dirs", None)
        if dirs is None:
            dirs = self._local.dirs = set()
        return dirs

    def flush_dir(self, directory: str) -> None:
        """Flush one directory now (and no longer count it as waiting for ``flush``)."""
        if self.durable:
            self.fs.fsync_dir(directory)
        self.unflushed.discard(directory)

    def note_existing(self, handle: Handle) -> None:
        self.unflushed.add(os.path.dirname(self.path(handle)))

    def flush(self) -> None:
        dirs = self.unflushed
        if not self.durable:
            dirs.clear()
            return
        blobs = self.kind_dir(Kind.BLOB)
        if any(os.path.dirname(directory) == blobs for directory in dirs):
            self.fs.fsync_dir(blobs)  # the shard directories' own entries
        while dirs:
            directory = dirs.pop()
            try:
                self.fs.fsync_dir(directory)
            except BaseException:
                dirs.add(directory)
                raise

    def flush_deletions(self, kind: Kind, names: Sequence[str] | None = None) -> None:
        """Flush every directory that holds objects of ``kind`` directly, or those of
        ``names`` (manifests: each session's directory; the old layout's directories are
        flushed by each deletion itself; a removed directory is skipped: a directory is
        removed empty, after its deletions were flushed, or by its session's tidy-up)."""
        if not self.durable:
            return
        top = self.kind_dir(kind)
        directories = [top]
        if names is not None:
            directories = sorted({os.path.dirname(self.path(Handle(kind, n))) for n in names})
        elif kind is Kind.MANIFEST:
            directories += [os.path.join(top, name) for name in listdir(top)]
        for directory in directories:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                self.fs.fsync_dir(directory)

    # ------------------------------------------------------------------ the rest

    def lock(self, name: str, label: str | None = None) -> FileLock:
        guard = self.root if name == "gc" else None
        path = os.path.join(self.root, "locks", name)
        return FileLock(
            path, label or name, self.lock_timeout, guard=guard, fs=self.fs, idle=self._idle_locks
        )

    def stale_temps(self) -> list[str]:
        return [os.path.join(self.tmp_dir, name) for name in sorted(listdir(self.tmp_dir))]

    def remove_stale_temps(self) -> int:
        removed = 0
        for path in self.stale_temps():
            if os.path.basename(path).startswith(TEMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    self.fs.unlink(path)
                removed += 1
        return removed

    def _forget_fd(self, path: str) -> None:
        with self._fds_lock:
            fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def now_ns(self) -> int:
        """This host's clock, which stamps the files' modification times."""
        return time.time_ns()

    def close(self) -> None:
        _close_all(self._fds, self._fds_lock)
        self._idle_locks.close()


def _close_all(fds: OrderedDict[str, int], lock: threading.Lock) -> None:
    """Close the pack descriptors a backend keeps open (by ``close``, or when the backend is
    collected). Under the backend's lock: never while another thread of it reads."""
    with lock:
        while fds:
            with contextlib.suppress(OSError):
                os.close(fds.popitem()[1])
