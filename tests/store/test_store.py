"""The SnapStore API as a user drives it: create, get, list, read, delete, state values."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from helpers.blobs import corrupt_blob, remove_blob
from helpers.trees import write_tree

from snapstore import (
    CorruptBlobError,
    CorruptManifestError,
    FormatError,
    InvalidNameError,
    InvalidValueError,
    LockTimeout,
    MissingBlobError,
    NotAStateSnapshotError,
    PathNotInSnapshotError,
    SnapshotNotFound,
    SnapStore,
    StoreNotFoundError,
    UnsafePathError,
)
from snapstore.backend.layout import FORMAT_MAJOR
from snapstore.format.manifest import EntryRow
from snapstore.internals import repository
from snapstore.repo.catalog import CorruptManifestWarning
from snapstore.worktree.scan import Scanner, UnreadablePathError


def test_create_records_files_dirs_symlinks_and_absent(store: SnapStore, project: Path) -> None:
    info = store.create("s", "one", ["src", "README.md", "missing.txt"], base_dir=project)
    assert (info.session, info.name, info.kind) == ("s", "one", "files")
    assert info.file_count == 3
    assert info.total_bytes == sum(
        (project / p).stat().st_size for p in ["src/app.py", "src/util.py", "README.md"]
    )
    entries = {e.path: e for e in store.get("s", "one").entries}
    assert entries["src"].kind == "dir"
    assert entries["src/link.py"].kind == "symlink" and entries["src/link.py"].target == "app.py"
    assert entries["missing.txt"].kind == "absent"
    assert entries["src/app.py"].digest is not None
    assert info.created_at.tzinfo is not None


def test_overlapping_paths_record_each_path_once(store: SnapStore, project: Path) -> None:
    whole = store.create("s", "whole", ["."], base_dir=project)
    both = store.create("s", "both", ["src/app.py", "src", ".", "README.md"], base_dir=project)
    assert (both.file_count, both.total_bytes) == (whole.file_count, whole.total_bytes)
    assert store.get("s", "both").entries == store.get("s", "whole").entries


def test_read_returns_the_bytes_of_the_snapshot_not_the_current_file(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "one", ["."], base_dir=project)
    (project / "src/app.py").write_text("changed")
    assert store.read("s", "one", "src/app.py") == b"print('hello')\n"
    assert store.read("s", "one", "./src/app.py") == b"print('hello')\n"
    with pytest.raises(PathNotInSnapshotError):
        store.read("s", "one", "nope.txt")
    with pytest.raises(PathNotInSnapshotError):
        store.read("s", "one", "src")


def test_identical_content_is_stored_once(store: SnapStore, tmp_path: Path) -> None:
    write_tree(tmp_path / "p", {"a": "same", "b": "same", "c/d": "same"})
    store.create("s", "one", ["."], base_dir=tmp_path / "p")
    store.create("t", "two", ["."], base_dir=tmp_path / "p")
    # one file blob, and the two directory listings (the base and c/), shared too
    assert len(list(repository(store).blobs.iter_digests())) == 3


def test_absolute_paths_inside_base_are_accepted_and_outside_refused(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    store.create("s", "abs", [project / "README.md"], base_dir=project)
    assert [e.path for e in store.get("s", "abs").entries] == ["README.md"]
    with pytest.raises(UnsafePathError):
        store.create("s", "bad", [tmp_path], base_dir=project)
    with pytest.raises(UnsafePathError):
        store.create("s", "bad", ["../outside"], base_dir=project)


def test_store_root_inside_the_project_is_not_snapshotted(project: Path) -> None:
    store = SnapStore(project / ".snapstore")
    store.create("s", "one", ["."], base_dir=project)
    assert not any(e.path.startswith(".snapstore") for e in store.get("s", "one").entries)


def test_list_is_oldest_first_and_filters_by_session(store: SnapStore, project: Path) -> None:
    store.create("b", "1", ["README.md"], base_dir=project)
    store.create("a", "2", ["README.md"], base_dir=project)
    store.create("b", "3", ["README.md"], base_dir=project)
    assert [i.name for i in store.list()] == ["1", "2", "3"]
    assert [i.name for i in store.list("b")] == ["1", "3"]
    assert store.list("nobody") == []
    assert store.sessions() == ["a", "b"]


def test_overwrite_replaces_the_snapshot(store: SnapStore, project: Path) -> None:
    store.create("s", "n", ["README.md"], base_dir=project)
    (project / "README.md").write_text("v2")
    store.create("s", "n", ["README.md"], base_dir=project)
    assert store.read("s", "n", "README.md") == b"v2"
    assert len(store.list()) == 1


def test_hostile_names_never_collide_or_escape(store: SnapStore, project: Path) -> None:
    names = ["a/b", "a_b", "..", "../../x", "CON", "Foo", "foo", "x" * 500, "é", "e\u0301"]
    for name in names:
        store.create(name, name, ["README.md"], base_dir=project, meta={"n": name})
    infos = store.list()
    assert sorted((i.session, i.name) for i in infos) == sorted((n, n) for n in names)
    for info in infos:
        assert info.meta == {"n": info.name}
    inside = {p.resolve() for p in (Path(store.root) / "sessions").rglob("*")}
    assert all(str(p).startswith(str(Path(store.root).resolve())) for p in inside)
    assert not (project.parent / "x").exists()


def test_names_are_validated(store: SnapStore, project: Path) -> None:
    with pytest.raises(InvalidNameError):
        store.create("", "n", ["README.md"], base_dir=project)
    with pytest.raises(InvalidNameError):
        store.put_state("s", 5, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        store.create("s", "n", ["README.md"], base_dir=project / "README.md")
    with pytest.raises(InvalidValueError):
        store.create("s", "n", ["README.md"], base_dir=project, meta={"x": object()})
    with pytest.raises(InvalidValueError):
        store.create("s", "n", ["README.md"], base_dir=project, ttl=-1)
    assert store.list() == []


def test_delete(store: SnapStore, project: Path) -> None:
    store.create("s", "n", ["README.md"], base_dir=project)
    assert store.delete("s", "n") is True
    assert store.delete("s", "n") is False
    with pytest.raises(SnapshotNotFound):
        store.get("s", "n")
    assert store.list() == []
    assert list((Path(store.root) / "sessions").iterdir()) == []


def test_delete_session(store: SnapStore, project: Path) -> None:
    for name in ["1", "2", "3"]:
        store.create("s", name, ["README.md"], base_dir=project)
    store.create("other", "1", ["README.md"], base_dir=project)
    assert store.delete_session("s") == 3
    assert [(i.session, i.name) for i in store.list()] == [("other", "1")]
    assert store.delete_session("s") == 0


def test_state_values(store: SnapStore) -> None:
    assert store.get_state("conn", "cursor") is None
    assert store.get_state("conn", "cursor", default={"offset": 0}) == {"offset": 0}
    value = {"offset": 42, "etag": "abc", "tags": [1, 2], "raw": b"\x00\x01", "ok": True}
    info = store.put_state("conn", "cursor", value, ttl=timedelta(hours=1))
    assert info.kind == "state" and info.expires_at is not None
    assert store.get_state("conn", "cursor") == value
    store.put_state("conn", "cursor", 7)
    assert store.get_state("conn", "cursor") == 7
    assert SnapStore(store.root).get_state("conn", "cursor") == 7
    with pytest.raises(InvalidValueError):
        store.put_state("conn", "cursor", {1: object()})
    assert store.get_state("conn", "cursor") == 7


def test_state_and_file_snapshots_are_not_confused(store: SnapStore, project: Path) -> None:
    store.create("s", "files", ["README.md"], base_dir=project)
    store.put_state("s", "state", 1)
    with pytest.raises(NotAStateSnapshotError):
        store.get_state("s", "files")
    with pytest.raises(NotAStateSnapshotError):
        store.restore("s", "state")


def test_corrupt_manifest_is_an_error_on_access_and_skipped_on_listing(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "good", ["README.md"], base_dir=project)
    store.create("s", "bad", ["README.md"], base_dir=project)
    path = Path(repository(store).catalog.manifest_path("s", "bad"))
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptManifestError, match="bad"):
        store.get("s", "bad")
    data[-1] ^= 0xFF
    data[60] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.warns(CorruptManifestWarning):
        assert [i.name for i in store.list()] == ["good"]
    path.write_bytes(b"garbage")
    with pytest.warns(CorruptManifestWarning):
        assert [i.name for i in store.list()] == ["good"]
    report = store.verify()
    assert not report.ok and any("bad" in p or "corrupt" in p for p in report.problems)


def test_manifest_moved_to_another_names_directory_is_corrupt(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "a", ["README.md"], base_dir=project)
    store.create("s", "b", ["README.md"], base_dir=project)
    a = Path(repository(store).catalog.manifest_path("s", "a"))
    b = Path(repository(store).catalog.manifest_path("s", "b"))
    os.replace(a, b)
    with pytest.raises(CorruptManifestError):
        store.get("s", "b")


def test_corrupt_blob_is_detected_on_read_and_by_deep_verify(
    store: SnapStore, project: Path
) -> None:
    store.create("s", "n", ["README.md"], base_dir=project)
    digest = store.get("s", "n").entries[0].digest
    assert digest is not None
    corrupt_blob(store, digest)
    with pytest.raises(CorruptBlobError):
        store.read("s", "n", "README.md")
    assert store.verify().ok
    deep = store.verify(deep=True)
    assert not deep.ok and digest.hex() in deep.problems[0]
    remove_blob(store, digest)
    with pytest.raises(MissingBlobError):
        store.read("s", "n", "README.md")
    assert not store.verify().ok


def test_unreadable_file_raises_or_is_skipped(
    store: SnapStore, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = project / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    real_open = os.open

    def deny_secret(path: str, *args: object, **kwargs: object) -> int:
        if str(path).endswith("secret.txt"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny_secret)
    with pytest.raises(PermissionError):
        store.create("s", "n", ["."], base_dir=project)
    assert store.list() == []
    info = store.create("s", "n", ["."], base_dir=project, skip_unreadable=True)
    assert [s.path for s in info.skipped] == ["secret.txt"]
    assert "secret.txt" not in {e.path for e in store.get("s", "n").entries}


def test_special_files_are_refused_or_skipped(store: SnapStore, project: Path) -> None:
    os.mkfifo(project / "pipe")
    with pytest.raises(OSError, match="pipe"):
        store.create("s", "n", ["."], base_dir=project)
    info = store.create("s", "n", ["."], base_dir=project, skip_unreadable=True)
    assert [s.path for s in info.skipped] == ["pipe"]
    assert store.get("s", "n").info.skipped == info.skipped


def test_unknown_format_is_refused(root: Path) -> None:
    SnapStore(root)
    (root / "FORMAT").write_text(f"snapstore format {FORMAT_MAJOR + 1}\n")
    with pytest.raises(FormatError, match=f"format {FORMAT_MAJOR + 1}"):
        SnapStore(root)


def test_a_foreign_directory_is_not_taken_over(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("x")
    with pytest.raises(FormatError):
        SnapStore(tmp_path)


def test_another_instance_sees_changes_immediately(store: SnapStore, project: Path) -> None:
    other = SnapStore(store.root)
    store.create("s", "n", ["README.md"], base_dir=project)
    assert [i.name for i in other.list()] == ["n"]
    other.delete("s", "n")
    assert store.list() == []
    with pytest.raises(SnapshotNotFound):
        store.get("s", "n")


def test_paths_through_a_symlinked_directory_are_refused(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (project / "linked").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symlink"):
        store.create("s", "n", ["linked/secret.txt"], base_dir=project)
    store.create("s", "n", ["linked"], base_dir=project)
    assert [(e.path, e.kind) for e in store.get("s", "n").entries] == [("linked", "symlink")]


def _walk_found(scanner: Scanner, relative: str, absolute: str, info: os.stat_result) -> None:
    """Record a directory as if a parent's listing had found it with ``info``, and walk it."""
    pending: list[tuple[str, str, EntryRow]] = []
    scanner._add_found(relative, absolute, info, pending)
    scanner._walk(pending)


def test_a_directory_swapped_for_a_symlink_mid_scan_is_never_followed(tmp_path: Path) -> None:
    base, outside = tmp_path / "p", tmp_path / "outside"
    write_tree(base, {"d/inner.txt": "inner"})
    write_tree(outside, {"secret.txt": "s"})
    found_as_dir = os.lstat(base / "d")  # what the parent's listing saw
    os.rename(base / "d", tmp_path / "d-moved")
    (base / "d").symlink_to(outside)
    scanner = Scanner(str(base))
    with pytest.raises(UnreadablePathError, match="'d'"):
        _walk_found(scanner, "d", str(base / "d"), found_as_dir)
    assert scanner.result.to_read == []


def test_a_directory_gone_before_it_is_walked_is_an_unreadable_path(tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"d/inner.txt": "inner"})
    found_as_dir = os.lstat(base / "d")
    (base / "d" / "inner.txt").unlink()
    (base / "d").rmdir()
    with pytest.raises(UnreadablePathError, match="'d'"):
        _walk_found(Scanner(str(base)), "d", str(base / "d"), found_as_dir)
    tolerant = Scanner(str(base), skip_unreadable=True)
    _walk_found(tolerant, "d", str(base / "d"), found_as_dir)
    assert [skipped.path for skipped in tolerant.result.skipped] == ["d"]


def test_missing_layout_directories_are_recreated(store: SnapStore, project: Path) -> None:
    (Path(store.root) / "tmp").rmdir()
    SnapStore(store.root).create("s", "n", ["README.md"], base_dir=project)
    assert store.read("s", "n", "README.md") == b"# sample\n"


def test_values_that_would_not_read_back_are_refused_before_commit(store: SnapStore) -> None:
    store.put_state("a", "b", {"ok": 1})
    with pytest.raises(InvalidValueError):
        store.put_state("a", "b", {1: "x"})
    with pytest.raises(InvalidValueError):
        store.put_state("a", "b", {"nested": {2: "x"}})
    assert store.get_state("a", "b") == {"ok": 1}


def test_delete_session_checks_the_name_and_waits_for_the_session_lock(
    store: SnapStore, project: Path
) -> None:
    with pytest.raises(InvalidNameError):
        store.delete_session("")
    store.create("s", "one", ["."], base_dir=project)
    store.create("s", "two", ["."], base_dir=project)
    with repository(store).sessions.lock("s").exclusive(), pytest.raises(LockTimeout):
        SnapStore(store.root, lock_timeout=0.2).delete_session("s")
    assert len(store.list("s")) == 2
    assert store.delete_session("s") == 2
    assert store.list("s") == []


def test_create_false_opens_only_an_existing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        SnapStore(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreNotFoundError):
        SnapStore(tmp_path / "empty", create=False)
    assert list((tmp_path / "empty").iterdir()) == []
    SnapStore(tmp_path / "store").put_state("s", "n", 1)
    assert SnapStore(tmp_path / "store", create=False).get_state("s", "n") == 1


def test_values_nested_deeper_than_every_reader_can_walk_are_refused(tmp_path: Path) -> None:
    """Metadata and state values nest at most MAX_VALUE_DEPTH deep: deeper ones would crash
    the readers that render them (JSON, repr) with a RecursionError."""
    from snapstore.format.manifest import MAX_VALUE_DEPTH

    store = SnapStore(tmp_path / "store")
    deep: object = 1
    for _ in range(MAX_VALUE_DEPTH):
        deep = [deep]
    store.put_state("s", "ok", deep)
    assert store.get_state("s", "ok") == deep
    with pytest.raises(InvalidValueError):
        store.put_state("s", "deep", [deep])
    with pytest.raises(InvalidValueError):
        store.create("s", "n", [], base_dir=tmp_path, meta={"m": [deep]})


def test_metadata_is_checked_to_its_depth_and_its_keys(tmp_path: Path) -> None:
    """A create's metadata may nest MAX_VALUE_DEPTH deep, the map itself counted, and is read
    back as given; one level more, or a map key that is not a string (it would not decode
    back), is refused before anything is committed."""
    from snapstore.format.manifest import MAX_VALUE_DEPTH

    store = SnapStore(tmp_path / "store")
    (tmp_path / "f").write_text("x")
    deep: object = 1
    for _ in range(MAX_VALUE_DEPTH - 1):
        deep = [deep]
    info = store.create("s", "ok", ["f"], base_dir=tmp_path, meta={"m": deep})
    assert info.meta == {"m": deep}
    assert store.get("s", "ok").info.meta == {"m": deep}
    for refused in ({"m": [deep]}, {"m": {1: "x"}}, {"m": object()}):
        with pytest.raises(InvalidValueError, match="snapshot metadata cannot be stored"):
            store.create("s", "no", ["f"], base_dir=tmp_path, meta=refused)
    assert [i.name for i in store.list("s")] == ["ok"]


def test_a_store_made_by_another_process_while_this_one_opens_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes open a new root at once: the one that finds no FORMAT marker, then the
    other's store (with a cache already) when it lists the root, opens that store instead of
    calling it a stranger's directory."""
    from snapstore.backend import layout

    root = tmp_path / "root"
    real_ensure = layout.ensure_dir

    def other_process_gets_there_first(fs: object, path: str, **options: object) -> None:
        real_ensure(fs, path, **options)  # type: ignore[arg-type]
        if path == str(root) and not (root / "FORMAT").exists():
            monkeypatch.setattr(layout, "ensure_dir", real_ensure)
            SnapStore(root).put_state("s", "other", 1)
            (root / "cache").mkdir(exist_ok=True)

    monkeypatch.setattr(layout, "ensure_dir", other_process_gets_there_first)
    store = SnapStore(root)
    assert store.get_state("s", "other") == 1


@pytest.mark.parametrize("bad", [["s"], {"n": 1}, 7])
def test_a_session_or_name_that_is_no_string_is_an_invalid_name_wherever_it_is_given(
    tmp_path: Path, bad: object
) -> None:
    """Every call that names a session or a snapshot refuses a value that is no string with
    InvalidNameError (a SnapstoreError), never a bare TypeError, also where a name's
    directory name is remembered."""
    store = SnapStore(tmp_path / "store")
    (tmp_path / "f").write_text("x")
    store.create("s", "n", ["f"], base_dir=tmp_path)
    calls = {
        "get": lambda s, n: store.get(s, n),
        "resolve": lambda s, n: store.resolve(s, "latest" if n == "n" else n),
        "read": lambda s, n: store.read(s, n, "f"),
        "get_state": lambda s, n: store.get_state(s, n),
        "restore": lambda s, n: store.restore(s, n, tmp_path / "target"),
        "diff": lambda s, n: store.diff(s, n, "n"),
        "latest": lambda s, n: store.latest(s),
        "delete": lambda s, n: store.delete(s, n),
        "put_state": lambda s, n: store.put_state(s, n, 1),
        "create": lambda s, n: store.create(s, n, ["f"], base_dir=tmp_path),
    }
    for what, call in calls.items():
        with pytest.raises(InvalidNameError):
            call(bad, "n")
        if what != "latest":
            with pytest.raises(InvalidNameError):
                call("s", bad)
    assert [info.name for info in store.list("s")] == ["n"]
