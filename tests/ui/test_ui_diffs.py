"""The UI's diffs module: explicit direction, binary detection, bounds, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.ui import diffs
from snapstore.ui.diffs import EntryCache, Side


def versions(store: SnapStore, session: str, name: str) -> dict[str, diffs.Version | None]:
    info = next(i for i in store.list(session) if i.name == name)
    return EntryCache().versions(store, info)


def diff_of(store: SnapStore, path: str, old: str, new: str) -> diffs.TextDiff:
    changes = diffs.checkpoint_changes(versions(store, "s", old), versions(store, "s", new))
    change = next(c for c in changes if c.path == path)
    return diffs.file_diff(store, Side("s", old), Side("s", new), change)


def snap(store: SnapStore, base: Path, name: str, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        (base / path).write_bytes(data)
    store.create("s", name, ["."], base_dir=base)


def test_direction_is_from_old_to_new(store: SnapStore, tmp_path: Path) -> None:
    snap(store, tmp_path, "a", {"f.txt": b"one\n"})
    snap(store, tmp_path, "b", {"f.txt": b"two\n", "new.txt": b"x\n"})
    forward = diff_of(store, "f.txt", "a", "b")
    assert forward.rendering == "text"
    assert "-one" in forward.lines and "+two" in forward.lines
    assert forward.lines[0] == "--- a/f.txt" and forward.lines[1] == "+++ b/f.txt"
    backward = diff_of(store, "f.txt", "b", "a")
    assert "-two" in backward.lines and "+one" in backward.lines
    statuses = {
        c.path: c.status
        for c in diffs.checkpoint_changes(versions(store, "s", "b"), versions(store, "s", "a"))
    }
    assert statuses["new.txt"] == "removed"


def test_a_nul_byte_in_the_first_8_kib_makes_a_file_binary(
    store: SnapStore, tmp_path: Path
) -> None:
    snap(store, tmp_path, "a", {"early.dat": b"x\0y", "late.dat": b"a" * 9000 + b"\0"})
    snap(store, tmp_path, "b", {"early.dat": b"x\0z", "late.dat": b"b" * 9000 + b"\0"})
    assert diff_of(store, "early.dat", "a", "b").rendering == "binary"
    assert diff_of(store, "late.dat", "a", "b").rendering == "text"


def test_sides_beyond_the_bound_are_not_read(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap(store, tmp_path, "a", {"big.txt": b"line\n" * 100})
    snap(store, tmp_path, "b", {"big.txt": b"line\n" * 101})
    monkeypatch.setattr(diffs, "MAX_SIDE_BYTES", 400)
    assert diff_of(store, "big.txt", "a", "b").rendering == "too-large"


def test_a_long_diff_is_cut(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap(store, tmp_path, "a", {"f.txt": b"".join(b"%d\n" % n for n in range(100))})
    snap(store, tmp_path, "b", {"f.txt": b"".join(b"x%d\n" % n for n in range(100))})
    monkeypatch.setattr(diffs, "MAX_DIFF_LINES", 10)
    result = diff_of(store, "f.txt", "a", "b")
    assert result.truncated and len(result.lines) == 10


def test_symlinks_show_their_targets(store: SnapStore, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("one")
    store.create("s", "a", ["."], base_dir=tmp_path)
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to("two")
    store.create("s", "b", ["."], base_dir=tmp_path)
    result = diff_of(store, "link", "a", "b")
    assert "--> one" in result.lines and "+-> two" in result.lines


def test_the_directory_side_reads_what_is_there_now_and_follows_no_symlink(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "f.txt").write_text("kept\n")
    (base / "g.txt").write_text("old\n")
    store.create("s", "a", ["."], base_dir=base)
    (base / "f.txt").write_text("changed\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (base / "g.txt").unlink()
    os.symlink(secret, base / "g.txt")
    checkpoint = versions(store, "s", "a")
    changes = diffs.directory_changes(store, checkpoint, "s", "a", str(base))
    by_path = {change.path: change for change in changes}
    old, new = Side("s", "a"), Side("s", directory=str(base))
    text = diffs.file_diff(store, old, new, by_path["f.txt"])
    assert "-kept" in text.lines and "+changed" in text.lines
    link = diffs.file_diff(store, old, new, by_path["g.txt"])
    assert link.rendering == "not-a-file"
    assert by_path["g.txt"].new is not None and by_path["g.txt"].new.kind == "symlink"


def test_a_removed_line_that_starts_with_dashes_is_a_deletion(
    store: SnapStore, tmp_path: Path
) -> None:
    snap(store, tmp_path, "a", {"q.sql": b"-- comment\nselect 1;\n"})
    snap(store, tmp_path, "b", {"q.sql": b"select 1;\n"})
    rows = diff_of(store, "q.sql", "a", "b").rows
    assert rows[:2] == [("header", "--- a/q.sql"), ("header", "+++ b/q.sql")]
    assert ("delete", "--- comment") in rows


def test_a_change_of_the_last_newline_alone_is_shown_as_git_marks_it(
    store: SnapStore, tmp_path: Path
) -> None:
    snap(store, tmp_path, "a", {"f.txt": b"one\ntwo\n"})
    snap(store, tmp_path, "b", {"f.txt": b"one\ntwo"})
    result = diff_of(store, "f.txt", "a", "b")
    assert result.rendering == "text"
    assert result.rows[2:] == [
        ("hunk", "@@ -1,2 +1,2 @@"),
        ("context", " one"),
        ("delete", "-two"),
        ("add", "+two"),
        ("marker", "\\ No newline at end of file"),
    ]


def test_the_hunks_are_those_of_the_library_patch(store: SnapStore, tmp_path: Path) -> None:
    old = b"".join(b"line %d\n" % (n % 7) for n in range(400))
    new = old.replace(b"line 3\n", b"line three\n", 5) + b"tail"
    snap(store, tmp_path, "a", {"f.txt": old})
    snap(store, tmp_path, "b", {"f.txt": new})
    (library,) = store.patch("s", "a", "b").files
    expected = [("header", "--- a/f.txt"), ("header", "+++ b/f.txt")]
    for hunk in library.hunks:
        expected.append(("hunk", hunk.header))
        for line in hunk.lines:
            first, *marker = line.split("\n")
            expected.append(({"+": "add", "-": "delete"}.get(first[:1], "context"), first))
            expected += [("marker", text) for text in marker]
    assert diff_of(store, "f.txt", "a", "b").rows == expected


def checkpoint_of_sub(store: SnapStore, tmp_path: Path) -> Path:
    """Checkpoint ``a`` of session ``s`` over a directory holding ``sub/f.txt`` (``mine``)."""
    base = tmp_path / "base"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "f.txt").write_text("mine\n")
    store.create("s", "a", ["."], base_dir=base)
    return base


def plant_symlink_to_outside(base: Path, tmp_path: Path) -> None:
    """Put a symlink to a directory outside ``base`` in place of ``base/sub``; the file
    ``f.txt`` there holds ``secret``."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("secret\n")
    (base / "sub" / "f.txt").unlink()
    (base / "sub").rmdir()
    os.symlink(outside, base / "sub")


def test_a_symlink_planted_in_place_of_a_directory_shows_nothing_outside_it(
    store: SnapStore, tmp_path: Path
) -> None:
    base = checkpoint_of_sub(store, tmp_path)
    plant_symlink_to_outside(base, tmp_path)
    changes = diffs.directory_changes(store, versions(store, "s", "a"), "s", "a", str(base))
    by_path = {change.path: change for change in changes}
    assert by_path["sub/f.txt"].status == "removed" and by_path["sub/f.txt"].new is None
    shown = diffs.file_diff(
        store, Side("s", "a"), Side("s", directory=str(base)), by_path["sub/f.txt"]
    )
    assert shown.lines[2:] == ("@@ -1 +0,0 @@", "-mine")
    assert not any("secret" in line for line in shown.lines)


def test_a_file_swapped_for_one_outside_after_the_listing_is_not_read(
    store: SnapStore, tmp_path: Path
) -> None:
    base = checkpoint_of_sub(store, tmp_path)
    (base / "sub" / "f.txt").write_text("changed\n")
    changes = diffs.directory_changes(store, versions(store, "s", "a"), "s", "a", str(base))
    (change,) = changes
    plant_symlink_to_outside(base, tmp_path)
    shown = diffs.file_diff(store, Side("s", "a"), Side("s", directory=str(base)), change)
    assert not any("secret" in line for line in shown.lines)
