"""File sources: byte-offset resume (seek, not re-read) and the file identity guard."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.checkpoints import write_lines

from snapstore.checkpoint import (
    Checkpointer,
    CountedSource,
    CsvSource,
    IdentityMismatchError,
    InvalidPositionError,
    JsonLinesSource,
    LinesSource,
    MemoryCheckpointStore,
    MismatchPolicy,
    RecordDecodeError,
)
from snapstore.checkpoint.identity import FINGERPRINT_BYTES


def test_lines_source_positions_are_byte_offsets(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"alpha\r\nbeta\n\ngamma")
    source = LinesSource(path)
    seen = []
    for line in source:
        seen.append((line, source.position()))
    assert seen == [
        ("alpha", {"offset": 7, "records": 1}),
        ("beta", {"offset": 12, "records": 2}),
        ("", {"offset": 13, "records": 3}),
        ("gamma", {"offset": 18, "records": 4}),
    ]
    source.close()


def test_resume_seeks_instead_of_re_reading(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    first = b"\xff\xfe not utf-8 at all\n"
    path.write_bytes(first + b"second\nthird\n")
    with pytest.raises(RecordDecodeError, match="byte 0"), LinesSource(path) as source:
        list(source)
    with LinesSource(path) as source:
        source.resume({"offset": len(first), "records": 1})
        assert list(source) == ["second", "third"]
        assert source.position() == {"offset": path.stat().st_size, "records": 3}


def test_complete_lines_only_leaves_a_partial_last_line_for_later(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\ntwo\nthr")
    with LinesSource(path, complete_lines_only=True) as source:
        assert list(source) == ["one", "two"]
        position = source.position()
    assert position == {"offset": 8, "records": 2}
    with path.open("ab") as handle:
        handle.write(b"ee\n")
    with LinesSource(path, complete_lines_only=True) as source:
        source.resume(position)
        assert list(source) == ["three"]


def test_jsonl_source_skips_blank_lines_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"a": 1}\n\n  \n[2, 3]\n{bad json\n"after"\n', encoding="utf-8")
    with JsonLinesSource(path) as source:
        records = iter(source)
        assert next(records) == {"a": 1}
        assert next(records) == [2, 3]
        assert source.position() == {"offset": 20, "records": 2}
        with pytest.raises(RecordDecodeError, match=r"byte 20.*invalid JSON") as raised:
            next(records)
    assert raised.value.offset == 20 and raised.value.path == str(path)


def test_csv_source_reads_the_header_again_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    head = 'id,note\r\n1,plain\r\n2,"two\r\nlines, with comma"\r\n'
    path.write_text(head + '\r\n3,"say ""hi"""\r\n', encoding="utf-8", newline="")
    with CsvSource(path) as source:
        first = iter(source)
        assert next(first) == {"id": "1", "note": "plain"}
        assert next(first) == {"id": "2", "note": "two\r\nlines, with comma"}
        position = source.position()
    assert position == {"offset": len(head), "records": 2}
    with CsvSource(path) as source:
        source.resume(position)
        assert list(source) == [{"id": "3", "note": 'say "hi"'}]
        assert source.fieldnames == ["id", "note"]


def test_csv_source_with_given_fieldnames_and_a_dialect(tmp_path: Path) -> None:
    path = tmp_path / "in.tsv"
    path.write_text("a\t1\nb\t2\n", encoding="utf-8")
    with CsvSource(path, fieldnames=["name", "n"], delimiter="\t") as source:
        assert list(source) == [{"name": "a", "n": "1"}, {"name": "b", "n": "2"}]


def test_csv_row_with_the_wrong_field_count_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("a,b\n1,2\n3\n", encoding="utf-8")
    with CsvSource(path) as source, pytest.raises(RecordDecodeError, match=r"byte 8.*1 fields"):
        list(source)


def test_csv_complete_lines_only_leaves_an_unfinished_quoted_row(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text('a,b\n1,2\n3,"still\nbeing written', encoding="utf-8")
    with CsvSource(path, complete_lines_only=True) as source:
        assert list(source) == [{"a": "1", "b": "2"}]
        assert source.position() == {"offset": 8, "records": 1}


def test_resume_position_checks(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 3)
    with LinesSource(path) as source:
        with pytest.raises(InvalidPositionError, match="beyond its end"):
            source.resume({"offset": 10_000, "records": 3})
        with pytest.raises(InvalidPositionError, match="another kind of source"):
            source.resume(17)
    (tmp_path / "h.csv").write_text("a,b\n1,2\n")
    with (
        CsvSource(tmp_path / "h.csv") as table,
        pytest.raises(InvalidPositionError, match="header"),
    ):
        table.resume({"offset": 2, "records": 0})
    with pytest.raises(InvalidPositionError):
        CountedSource([1]).resume({"offset": 1})
    counted = CountedSource([1, 2])
    counted.resume(5)
    with pytest.raises(InvalidPositionError, match="fewer than the saved count"):
        list(counted)


def test_an_encoding_without_a_newline_byte_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="utf-16"):
        LinesSource(tmp_path / "x", encoding="utf-16")


# ----------------------------------------------------------------- identity guard


def _run(
    path: Path,
    store: MemoryCheckpointStore,
    *,
    limit: int | None = None,
    on_mismatch: MismatchPolicy = MismatchPolicy.REFUSE,
) -> tuple[list[str], Checkpointer]:
    """Read ``path`` under key ``feed`` (stopping after ``limit`` lines); lines and checkpointer."""
    checkpointer = Checkpointer(store, "feed", every=2, on_mismatch=on_mismatch)
    lines: list[str] = []
    for line in checkpointer.iterate(LinesSource(path)):
        lines.append(line)
        if len(lines) == limit:
            break
    return lines, checkpointer


def test_a_checkpoint_records_the_file_identity(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 5)
    store = MemoryCheckpointStore()
    _run(path, store, limit=3)
    saved = store.load("feed")
    assert saved is not None and saved.identity is not None
    status = path.stat()
    assert (saved.identity.path, saved.identity.size, saved.identity.mtime_ns) == (
        str(path),
        status.st_size,
        status.st_mtime_ns,
    )
    assert (saved.identity.device, saved.identity.inode) == (status.st_dev, status.st_ino)
    assert saved.identity.fingerprint is not None


def test_a_file_that_grew_by_appends_resumes(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    lines = write_lines(path, 6)
    store = MemoryCheckpointStore()
    assert _run(path, store)[0] == lines
    with path.open("a", encoding="utf-8") as handle:
        handle.write("record-00006\nrecord-00007\n")
    assert _run(path, store)[0] == ["record-00006", "record-00007"]
    assert _run(path, store)[0] == []


def test_a_touched_file_still_resumes(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 6)
    store = MemoryCheckpointStore()
    _run(path, store, limit=3)
    os.utime(path, ns=(1, 1))
    assert _run(path, store)[0] == ["record-00002", "record-00003", "record-00004", "record-00005"]


def _replace(path: Path) -> None:
    """Put a new file (new inode) with longer content at ``path``."""
    write_lines(path.with_name("new.txt"), 20, prefix="other")
    os.replace(path.with_name("new.txt"), path)


def _truncate(path: Path) -> None:
    """Cut ``path`` to its first line, keeping the inode."""
    os.truncate(path, 13)


def _rewrite_in_place(path: Path) -> None:
    """Rewrite ``path`` with different, longer content, keeping the inode."""
    with path.open("r+", encoding="utf-8") as handle:
        handle.write("".join(f"rewrt-{index:05d}\n" for index in range(20)))


@pytest.mark.parametrize(
    ("change", "reason"),
    [(_replace, "replaced"), (_truncate, "truncated"), (_rewrite_in_place, "rewritten")],
)
def test_a_changed_file_is_refused_by_default(tmp_path: Path, change: object, reason: str) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 6)
    store = MemoryCheckpointStore()
    _run(path, store, limit=4)
    before = store.load("feed")
    change(path)  # type: ignore[operator]
    with pytest.raises(IdentityMismatchError, match=reason) as raised:
        _run(path, store)
    assert raised.value.key == "feed" and raised.value.path == str(path)
    assert store.load("feed") == before


@pytest.mark.parametrize("change", [_replace, _truncate, _rewrite_in_place])
def test_a_changed_file_restarts_from_the_beginning_by_policy(
    tmp_path: Path, change: object
) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 6)
    store = MemoryCheckpointStore()
    _run(path, store, limit=4)
    change(path)  # type: ignore[operator]
    expected = path.read_text(encoding="utf-8").splitlines()
    lines, checkpointer = _run(path, store, on_mismatch=MismatchPolicy.RESTART)
    assert lines == expected and checkpointer.restarted
    saved = store.load("feed")
    assert saved is not None and saved.identity is not None
    assert saved.identity.inode == path.stat().st_ino
    assert saved.value == {"offset": path.stat().st_size, "records": len(expected)}


def test_a_recycled_inode_with_other_content_is_caught_by_the_fingerprint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 30)
    store = MemoryCheckpointStore()
    _run(path, store, limit=10)
    saved = store.load("feed")
    assert saved is not None
    offset = saved.value["offset"]
    assert offset > FINGERPRINT_BYTES
    data = bytearray(path.read_bytes())
    data[offset - 5] = ord("X")
    with path.open("r+b") as handle:
        handle.write(bytes(data))
    with pytest.raises(IdentityMismatchError, match="bytes before offset"):
        _run(path, store)


def test_a_deleted_file_fails_with_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 4)
    store = MemoryCheckpointStore()
    _run(path, store, limit=2)
    path.unlink()
    with pytest.raises(FileNotFoundError):
        _run(path, store)


def test_jsonl_and_csv_sources_are_guarded_too(tmp_path: Path) -> None:
    jsonl, table = tmp_path / "in.jsonl", tmp_path / "in.csv"
    jsonl.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(5)), encoding="utf-8")
    table.write_text("n\n" + "".join(f"{n}\n" for n in range(5)), encoding="utf-8")
    store = MemoryCheckpointStore()
    for key, path, source in (
        ("j", jsonl, JsonLinesSource(jsonl)),
        ("c", table, CsvSource(table)),
    ):
        records = Checkpointer(store, key, every=2).iterate(source)
        next(records)
        next(records)
        records.close()
        _replace(path)
        with pytest.raises(IdentityMismatchError):
            list(Checkpointer(store, key).iterate(type(source)(path)))
