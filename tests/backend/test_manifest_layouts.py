"""Format 4 keeps a manifest as the file ``<name-dir>.manifest`` in its session directory;
stores written by format 3 keep ``<name-dir>/manifest``. Both layouts in one session: read,
listed, replaced, deleted, swept, collected and verified; a name in both (a writer killed
between its commit and the removal of the old manifest) is the new file; hostile entries where
either belongs are refused, never followed."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.formatv3 import (
    manifest_files,
    mark_format,
    new_layout_path,
    old_layout_path,
    to_old_layout,
)
from helpers.seam import CountingFileSystem, RecordingFileSystem

from snapstore import SnapStore
from snapstore.backend.seam import Kind
from snapstore.errors import CorruptManifestError, SnapshotNotFound
from snapstore.internals import repository
from snapstore.repo.catalog import CorruptManifestWarning


def _format_3_session(store: SnapStore, project: Path) -> None:
    """Session ``s``: ``old-1`` and ``old-2`` as a format 3 writer left them, ``new`` in the
    new layout (written after the store was marked 4)."""
    for name in ("old-1", "old-2"):
        (project / "README.md").write_text(f"{name}\n")
        store.create("s", name, ["README.md"], base_dir=project)
    store.close()
    root = Path(store.root)
    to_old_layout(root)
    mark_format(root, 3)


def _seqs(store: SnapStore) -> dict[str, int]:
    return {item.header.info.name: item.header.seq for item in repository(store).catalog.headers()}


def _fresh(root: Path) -> SnapStore:
    return SnapStore(root, lock_timeout=5.0)


def test_both_layouts_side_by_side_in_one_session(root: Path, project: Path) -> None:
    _format_3_session(_fresh(root), project)
    store = _fresh(root)
    assert [info.name for info in store.list("s")] == ["old-1", "old-2"]
    (project / "README.md").write_text("new\n")
    store.create("s", "new", ["README.md"], base_dir=project)
    assert (root / "FORMAT").read_text() == "snapstore format 4\n"
    assert new_layout_path(root, "s", "new").is_file()
    assert not old_layout_path(root, "s", "new").parent.exists()
    assert old_layout_path(root, "s", "old-1").is_file()
    for reader in (store, _fresh(root)):
        assert [info.name for info in reader.list("s")] == ["old-1", "old-2", "new"]
        assert _seqs(reader) == {"old-1": 1, "old-2": 2, "new": 3}
        assert reader.read("s", "old-1", "README.md") == b"old-1\n"
        assert reader.read("s", "new", "README.md") == b"new\n"
        assert reader.latest("s").name == "new"
        assert reader.resolve("s", "latest~2") == "old-1"
        assert reader.verify(deep=True).ok
    assert _fresh(root).stats().manifests == 3


def test_replacing_an_old_layout_snapshot_commits_the_file_then_removes_the_old(
    root: Path, project: Path
) -> None:
    _format_3_session(_fresh(root), project)
    fs = RecordingFileSystem()
    store = SnapStore(root, fs=fs)
    (project / "README.md").write_text("replaced\n")
    store.create("s", "old-1", ["README.md"], base_dir=project)
    old = old_layout_path(root, "s", "old-1")
    new = new_layout_path(root, "s", "old-1")
    assert not old.parent.exists() and new.is_file()
    events = [
        (e[0], e[2] if e[0] == "rename" else e[1])
        for e in fs.recording.events
        if e[0] in ("rename", "unlink", "fsync_dir")
    ]
    renamed = events.index(("rename", str(new)))
    assert events[renamed + 1] == ("fsync_dir", str(new.parent))  # the commit is durable
    removed = events.index(("unlink", str(old)))
    assert removed > renamed + 1  # only then is the old manifest removed
    assert events[removed + 1] == ("fsync_dir", str(old.parent))
    assert _fresh(root).read("s", "old-1", "README.md") == b"replaced\n"
    assert [info.name for info in _fresh(root).list("s")] == ["old-2", "old-1"]


def _both_layouts(root: Path, project: Path) -> SnapStore:
    """``s/n`` committed twice: the newer in the file, the older left in the old layout (what
    a writer killed between its commit and the removal leaves)."""
    store = _fresh(root)
    (project / "README.md").write_text("older\n")
    store.create("s", "n", ["README.md"], base_dir=project)
    older = new_layout_path(root, "s", "n").read_bytes()
    (project / "README.md").write_text("newer\n")
    store.create("s", "n", ["README.md"], base_dir=project)
    store.close()
    old = old_layout_path(root, "s", "n")
    old.parent.mkdir()
    old.write_bytes(older)
    return _fresh(root)


def test_a_name_in_both_layouts_is_the_new_file(root: Path, project: Path) -> None:
    store = _both_layouts(root, project)
    assert [i.name for i in store.list()] == ["n"] and _seqs(store) == {"n": 2}
    assert store.read("s", "n", "README.md") == b"newer\n"
    assert store.latest("s").name == "n"
    assert store.verify(deep=True).ok
    store.gc()
    assert store.read("s", "n", "README.md") == b"newer\n"
    assert _fresh(root).verify(deep=True).ok


def test_deleting_a_name_in_both_layouts_never_uncovers_the_older(
    root: Path, project: Path
) -> None:
    store = _both_layouts(root, project)
    fs = RecordingFileSystem()
    deleting = SnapStore(root, fs=fs)
    deleting.delete("s", "n")
    old, new = old_layout_path(root, "s", "n"), new_layout_path(root, "s", "n")
    events = [
        (e[0], e[1])
        for e in fs.recording.events
        if e[0] in ("unlink", "fsync_dir") and e[1].startswith(str(root / "sessions"))
    ]
    # The old manifest goes first, flushed, then the file: removing the file never uncovers it.
    assert events[:4] == [
        ("unlink", str(old)),
        ("fsync_dir", str(old.parent)),
        ("unlink", str(new)),
        ("fsync_dir", str(new.parent)),
    ]
    assert store.list() == [] and manifest_files(root) == []
    with pytest.raises(SnapshotNotFound):
        _fresh(root).get("s", "n")


def test_delete_sweep_and_gc_remove_old_layout_snapshots(root: Path, project: Path) -> None:
    _format_3_session(_fresh(root), project)
    store = _fresh(root)
    store.delete("s", "old-1")
    assert not old_layout_path(root, "s", "old-1").parent.exists()
    (project / "README.md").write_text("new\n")
    store.create("s", "new", ["README.md"], base_dir=project)
    store.sweep(keep_last=1)
    assert [info.name for info in _fresh(root).list()] == ["new"]
    assert not old_layout_path(root, "s", "old-2").parent.exists()
    report = store.gc()
    assert not report.skipped
    assert sorted(os.listdir(new_layout_path(root, "s", "new").parent)) == [
        new_layout_path(root, "s", "new").name
    ]
    assert _fresh(root).verify(deep=True).ok
    store.delete("s", "new")
    assert not (root / "sessions" / new_layout_path(root, "s", "new").parent.name).exists()


def test_gc_tidies_the_empty_directories_interrupted_deletes_leave(
    root: Path, project: Path
) -> None:
    _format_3_session(_fresh(root), project)
    old = old_layout_path(root, "s", "old-1")
    old.chmod(0o644)
    old.unlink()  # a delete of format 3 killed before it removed the directory
    store = _fresh(root)
    assert [info.name for info in store.list()] == ["old-2"]
    store.gc()
    assert not old.parent.exists()
    assert [info.name for info in _fresh(root).list()] == ["old-2"]


def test_a_directory_planted_as_a_manifest_file_is_refused(root: Path, project: Path) -> None:
    store = _fresh(root)
    store.create("s", "good", ["README.md"], base_dir=project)
    planted = new_layout_path(root, "s", "planted")
    planted.mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [info.name for info in _fresh(root).list()] == ["good"]
    assert any(issubclass(w.category, CorruptManifestWarning) for w in caught)
    with pytest.raises(CorruptManifestError, match="not a regular file"):
        _fresh(root).get("s", "planted")
    with pytest.raises(OSError):
        _fresh(root).create("s", "planted", ["README.md"], base_dir=project)
    assert planted.is_dir() and list(planted.iterdir()) == []
    assert [info.name for info in _fresh(root).list()] == ["good"]
    assert _fresh(root).read("s", "good", "README.md") == b"# sample\n"


def test_a_symlink_planted_as_a_manifest_file_is_not_followed(
    root: Path, project: Path, tmp_path: Path
) -> None:
    store = _fresh(root)
    store.create("s", "good", ["README.md"], base_dir=project)
    elsewhere = tmp_path / "elsewhere.manifest"
    elsewhere.write_bytes(new_layout_path(root, "s", "good").read_bytes())
    planted = new_layout_path(root, "s", "planted")
    planted.symlink_to(elsewhere)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [info.name for info in _fresh(root).list()] == ["good"]
    assert any("not a regular file" in str(w.message) for w in caught)
    with pytest.raises(CorruptManifestError):
        _fresh(root).get("s", "planted")
    _fresh(root).create("s", "planted", ["README.md"], base_dir=project)  # replaces the link
    assert planted.is_file() and not planted.is_symlink()
    assert elsewhere.read_bytes() == new_layout_path(root, "s", "good").read_bytes()
    assert [info.name for info in _fresh(root).list()] == ["good", "planted"]


def test_a_file_where_a_session_directory_belongs_fails_only_that_session(
    root: Path, project: Path
) -> None:
    store = _fresh(root)
    store.create("other", "kept", ["README.md"], base_dir=project)
    session_dir = new_layout_path(root, "s", "x").parent
    session_dir.write_bytes(b"not a directory")
    with pytest.raises(OSError):
        _fresh(root).create("s", "x", ["README.md"], base_dir=project)
    assert session_dir.read_bytes() == b"not a directory"
    assert [info.name for info in _fresh(root).list()] == ["kept"]
    with pytest.raises(SnapshotNotFound):
        _fresh(root).get("s", "x")
    _fresh(root).create("other", "more", ["README.md"], base_dir=project)
    assert [info.name for info in _fresh(root).list()] == ["kept", "more"]


def _syncs(fs: CountingFileSystem, action: object) -> list[str]:
    before = len(fs.trace)
    assert callable(action)
    action()
    return [call for call in fs.trace[before:] if call in ("fsync", "fsync_dir")]


def test_a_manifest_commit_makes_two_flushes_and_sessions_is_flushed_once(
    root: Path,
) -> None:
    """A commit flushes the manifest and its session directory; ``sessions/`` only for a
    session directory this process has not flushed yet (made now, or found there)."""
    fs = CountingFileSystem()
    store = SnapStore(root, fs=fs)
    catalog = repository(store).catalog
    # A new session directory: its entry in sessions/ flushed as it is made.
    assert _syncs(fs, lambda: catalog.commit("s", "a", b"one")) == [
        "fsync_dir",
        "fsync",
        "fsync_dir",
    ]
    assert _syncs(fs, lambda: catalog.commit("s", "b", b"two")) == ["fsync", "fsync_dir"]
    assert _syncs(fs, lambda: catalog.commit("s", "b", b"again")) == ["fsync", "fsync_dir"]
    other = repository(SnapStore(root, fs=fs)).catalog
    # A session directory another process made: its entry flushed once, after the commit.
    assert _syncs(fs, lambda: other.commit("s", "c", b"three")) == [
        "fsync",
        "fsync_dir",
        "fsync_dir",
    ]
    assert _syncs(fs, lambda: other.commit("s", "d", b"four")) == ["fsync", "fsync_dir"]
    names = sorted(path.name for path in manifest_files(root))
    assert len(names) == 4 and all(name.endswith(".manifest") for name in names)


def test_latest_of_a_mixed_session_lists_nothing_in_a_new_process(
    root: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``latest`` and ``latest~N`` read the session's head, whichever layout holds the
    manifests it names: no listing of the session, even from a new ``SnapStore``."""
    _format_3_session(_fresh(root), project)
    _fresh(root).create("s", "new", ["README.md"], base_dir=project)
    store = _fresh(root)
    backend = repository(store).backend

    names, infos = backend.names, backend.infos

    def refusing(listing: Callable[..., object]) -> Callable[..., object]:
        def refuse(kind: Kind, prefix: str = "") -> object:
            if kind is Kind.MANIFEST:
                raise AssertionError(f"listed the manifests {prefix!r}")
            return listing(kind, prefix)

        return refuse

    monkeypatch.setattr(backend, "names", refusing(names))
    monkeypatch.setattr(backend, "infos", refusing(infos))
    assert store.latest("s").name == "new"
    assert store.resolve("s", "latest~1") == "old-2"
    assert store.resolve("s", "latest~2") == "old-1"
    assert store.get("s", "latest~2").info.name == "old-1"


def test_a_symlink_planted_as_an_old_layout_directory_is_never_written_through(
    root: Path, project: Path, tmp_path: Path
) -> None:
    """Replacing or deleting a snapshot removes an old layout manifest, but never through a
    symlink planted where its directory would be: nothing outside the store is unlinked."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "manifest").write_bytes(b"not the store's")
    store = _fresh(root)
    store.create("s", "n", ["README.md"], base_dir=project)
    old_layout_path(root, "s", "n").parent.symlink_to(outside, target_is_directory=True)
    store.create("s", "n", ["README.md"], base_dir=project)
    assert (outside / "manifest").read_bytes() == b"not the store's"
    store.delete("s", "n")
    assert (outside / "manifest").read_bytes() == b"not the store's"
    with pytest.raises(CorruptManifestError, match="symbolic link"):
        _fresh(root).get("s", "n")  # reported, never read through
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _fresh(root).list() == []
    assert any(issubclass(w.category, CorruptManifestWarning) for w in caught)
