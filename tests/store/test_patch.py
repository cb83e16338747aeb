"""``SnapStore.patch``: unified diffs from a checkpoint to its directory and between two
checkpoints, read the way ``diff`` reads, bounded, binary files named, symlinks never
followed out of the directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore, compare
from snapstore.errors import InvalidValueError
from snapstore.models import FileEntry
from snapstore.patch import Hunk, PatchBuilder, file_patch, is_binary

LINES = "".join(f"line {number}\n" for number in range(1, 21))


@pytest.fixture
def store(tmp_path: Path) -> SnapStore:
    with SnapStore(tmp_path / "store", durable=False) as opened:
        yield opened


@pytest.fixture
def base(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    write_tree(
        project,
        {"src/a.py": LINES, "gone.txt": "bye\n", "blob.bin": b"\x00\x01\x02", "same.txt": "s\n"},
    )
    return project


def test_a_patch_reads_from_the_checkpoint_to_the_directory(store: SnapStore, base: Path):
    store.create("s", "one", ["src", "gone.txt", "blob.bin", "same.txt", "new.txt"], base_dir=base)
    (base / "src/a.py").write_text(LINES.replace("line 7\n", "changed\n"))
    (base / "gone.txt").unlink()
    (base / "new.txt").write_text("hello\n")
    (base / "blob.bin").write_bytes(b"\x00\x01\x03")
    diff = store.diff("s", "one")
    assert (diff.added, diff.modified, diff.removed) == (
        ["new.txt"],
        ["blob.bin", "src/a.py"],
        ["gone.txt"],
    )
    patch = store.patch("s", "one")
    by_path = {file.path: file for file in patch.files}
    assert list(by_path) == ["blob.bin", "gone.txt", "new.txt", "src/a.py"]
    assert by_path["blob.bin"].binary and not by_path["blob.bin"].hunks
    assert by_path["gone.txt"].change == "removed"
    assert by_path["new.txt"].change == "added"
    hunk = by_path["src/a.py"].hunks[0]
    assert (hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines) == (4, 7, 4, 7)
    assert hunk.lines[3:5] == ["-line 7", "+changed"]
    text = patch.text
    assert "--- a/src/a.py\n+++ b/src/a.py\n@@ -4,7 +4,7 @@\n" in text
    assert "Binary files a/blob.bin and b/blob.bin differ" in text
    assert "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n" in text
    assert "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in text
    assert not patch.truncated
    document = patch.to_dict()
    assert document["files"][3]["additions"] == 1 and document["files"][3]["deletions"] == 1


def test_a_patch_of_two_checkpoints_reads_from_the_first_to_the_second(
    store: SnapStore, base: Path
):
    store.create("s", "one", ["src", "gone.txt"], base_dir=base)
    (base / "src/a.py").write_text(LINES + "more\n")
    (base / "gone.txt").unlink()
    store.create("s", "two", ["src", "gone.txt"], base_dir=base)
    patch = store.patch("s", "one", "two")
    assert [(file.path, file.change) for file in patch.files] == [
        ("gone.txt", "removed"),
        ("src/a.py", "modified"),
    ]
    assert patch.files[1].hunks[0].lines[-1] == "+more"
    backwards = store.patch("s", "two", "one")
    assert backwards.files[0].change == "added"
    assert store.patch("s", "one", "two", paths=["src"]).files[0].path == "src/a.py"
    assert len(store.patch("s", "one", "two", paths=["src"]).files) == 1


def test_the_text_is_bounded_with_a_marker(store: SnapStore, tmp_path: Path):
    project = tmp_path / "big"
    write_tree(project, {f"f{index:03}.txt": LINES for index in range(50)})
    store.create("s", "one", ["."], base_dir=project)
    for index in range(50):
        (project / f"f{index:03}.txt").write_text(LINES.replace("line", "LINE"))
    patch = store.patch("s", "one", max_bytes=4096)
    assert patch.truncated
    assert len(patch.text.encode()) < 4096 + 300
    assert patch.text.rstrip().endswith("ask for fewer paths or a larger bound]")
    assert len(patch.files) + len(patch.omitted) == 50
    assert "more changed files not shown" in patch.text
    whole = store.patch("s", "one", max_bytes=None)
    assert not whole.truncated and len(whole.files) == 50


def test_binary_is_a_nul_in_the_first_8_kib_and_large_files_are_named(
    store: SnapStore, tmp_path: Path
):
    assert is_binary(b"text" * 100 + b"\x00")
    assert not is_binary(b"a" * 8192 + b"\x00")
    project = tmp_path / "p"
    write_tree(project, {"late-nul.txt": b"a" * 9000 + b"\x00\n", "big.txt": "x\n" * 100})
    store.create("s", "one", ["."], base_dir=project)
    (project / "late-nul.txt").write_bytes(b"b" * 9000 + b"\x00\n")
    (project / "big.txt").write_text("y\n" * 100)
    patch = store.patch("s", "one", max_file_bytes=100)
    by_path = {file.path: file for file in patch.files}
    assert by_path["big.txt"].too_large and by_path["big.txt"].old_size == 200
    assert "Large files a/big.txt and b/big.txt differ" in patch.text
    patch = store.patch("s", "one")
    assert not {file.path: file for file in patch.files}["late-nul.txt"].binary


def test_a_patch_never_reads_through_a_symlink_out_of_the_directory(
    store: SnapStore, tmp_path: Path
):
    project = tmp_path / "p"
    secret = tmp_path / "outside"
    write_tree(project, {"src/a.txt": "a\n"})
    write_tree(secret, {"a.txt": "SECRET\n", "key.txt": "SECRET\n"})
    store.create("s", "one", ["src"], base_dir=project)
    (project / "src/a.txt").unlink()
    os.rmdir(project / "src")
    (project / "src").symlink_to(secret)
    patch = store.patch("s", "one")
    assert "SECRET" not in patch.text
    (project / "src").unlink()
    (project / "src").mkdir()
    (project / "src/a.txt").symlink_to(secret / "a.txt")
    patch = store.patch("s", "one")
    assert "SECRET" not in patch.text
    assert f"+{secret / 'a.txt'}" in patch.text  # the link's own text, as git shows it


def test_bad_bounds_are_refused(store: SnapStore, base: Path):
    store.create("s", "one", ["src"], base_dir=base)
    with pytest.raises(InvalidValueError):
        store.patch("s", "one", context=-1)
    with pytest.raises(InvalidValueError):
        store.patch("s", "one", max_bytes=-5)


def test_a_missing_newline_at_the_end_is_marked() -> None:
    patch = file_patch("f", b"a\nb", b"a\nc\n")
    assert "\\ No newline at end of file" in patch.text


def _applied(old: list[str], hunks: list[Hunk]) -> list[str]:
    """``old`` with ``hunks`` applied, checking each hunk's context and deletions."""
    result: list[str] = []
    position = 0
    for hunk in hunks:
        start = hunk.old_start - 1 if hunk.old_lines else hunk.old_start
        result += old[position:start]
        position = start
        for line in hunk.lines:
            if line[0] in " -":
                assert old[position] == line[1:]
                position += 1
            if line[0] in " +":
                result.append(line[1:])
    return result + old[position:]


def test_a_large_file_of_repeated_lines_gets_a_patch_that_applies() -> None:
    old = [f"line {number % 50}" for number in range(6000)]
    new = [f"line {number % 51}" for number in range(6000)]
    found = file_patch("f.txt", "\n".join(old).encode() + b"\n", "\n".join(new).encode() + b"\n")
    assert found.hunks and _applied(old, found.hunks) == new


def test_the_bound_counts_utf8_bytes_not_characters() -> None:
    wide = "\N{GRINNING FACE}" * 70
    builder = PatchBuilder(300)
    patch = builder.add_all([file_patch("f.txt", b"", (wide + "\n").encode())])
    assert len(patch.text.removesuffix(patch.truncation_marker() + "\n").encode()) <= 300
    assert patch.truncated and patch.files[0].truncated and not patch.files[0].hunks
    fits = PatchBuilder(400).add_all([file_patch("f.txt", b"", (wide + "\n").encode())])
    assert not fits.truncated and len(fits.text.encode()) <= 400
    assert builder.used <= 300


def test_a_full_patch_reads_no_more_files(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project = tmp_path / "big"
    write_tree(project, {f"f{index:03}.txt": LINES for index in range(40)})
    store.create("s", "one", ["."], base_dir=project)
    for index in range(40):
        (project / f"f{index:03}.txt").write_text(LINES.replace("line", "LINE"))
    store.create("s", "two", ["."], base_dir=project)
    reads: list[str] = []
    real_content, real_open = compare.read_content, compare.open_regular

    def counted_content(blobs: object, entry: FileEntry) -> bytes:
        reads.append(entry.path)
        return real_content(blobs, entry)  # type: ignore[arg-type]

    def counted_open(name: str, **kwargs: object) -> int:
        reads.append(name)
        return real_open(name, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compare, "read_content", counted_content)
    monkeypatch.setattr(compare, "open_regular", counted_open)
    for other in (None, "two"):
        reads.clear()
        patch = store.patch("s", "one", other, max_bytes=600)
        assert patch.truncated and len(patch.files) + len(patch.omitted) == 40
        assert len(patch.omitted) > 30
        assert len(reads) <= 2 * (len(patch.files) + 1), reads
