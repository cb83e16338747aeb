"""``to_dict()`` of every result type gives the documented JSON-ready shape: the fields in
declaration order, datetimes as ISO 8601, bytes as hex, tuples as lists, nested results as
their own documents. Checked against a plain reading of the dataclasses, so the speed-ups of
``_jsonable`` (field names remembered per class, plain values returned at once) change
nothing."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from snapstore.models import (
    DiffReport,
    FileEntry,
    GcReport,
    PathVersion,
    RestoreReport,
    SkippedPath,
    Snapshot,
    SnapshotInfo,
    SweepReport,
    VerifyReport,
)


def _reference(value: Any) -> Any:
    """The JSON-ready form, derived from the dataclasses' own field lists every time."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(key): _reference(item) for key, item in value.items()}
    if isinstance(value, FileEntry):
        return {key: _reference(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_reference(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _reference(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


CREATED = datetime(2025, 6, 1, 10, 42, 53, 491286, tzinfo=UTC)
INFO = SnapshotInfo(
    session="editor",
    name="before-edit",
    kind="files",
    created_at=CREATED,
    expires_at=CREATED + timedelta(hours=2),
    file_count=2,
    total_bytes=15,
    meta={"tool": "vim", "nested": {"depth": [1, 2.5, None, True]}, 3: "key made text"},
    base_dir="/home/me/proj",
    skipped=(SkippedPath("secret", "Permission denied"),),
    roots=("README.md", "src"),
    excludes=(".git", "*.log"),
)
ENTRY = FileEntry("README.md", "file", 0o644, 6, 1796035373155834695, b"\x22" * 32, None)
LINKED = FileEntry("b", "file", 0o600, 6, 1, b"\x01" * 32, None, extents=True, link="a")

RESULTS: list[Any] = [
    INFO,
    dataclasses.replace(INFO, kind="state", expires_at=None, replaced=True, backup_of="x"),
    ENTRY,
    LINKED,
    Snapshot(INFO, (ENTRY, LINKED, FileEntry("link", "symlink", target="README.md"))),
    PathVersion(INFO, ENTRY),
    PathVersion(INFO, None),
    RestoreReport(written=["a"], removed=["b"], backup="undo-1", kept=["c"], target="/t"),
    DiffReport(added=["a"], modified=[], removed=["z"]),
    SweepReport(deleted=[("s", "n")], future_stamped=[("s", "m")]),
    GcReport(blobs_deleted=3, problems=["damaged"], reason="damaged"),
    VerifyReport(ok=False, problems=["p"], garbage=["g"], snapshots_checked=4),
    SkippedPath("p", "e"),
]


@pytest.mark.parametrize("result", RESULTS, ids=lambda result: type(result).__name__)
def test_to_dict_is_the_plain_reading_of_the_fields(result: Any) -> None:
    for _ in range(2):  # the second time from the remembered field names
        document = result.to_dict()
        assert document == _reference(result)
        assert list(document) == list(_reference(result))
        assert json.loads(json.dumps(document)) == document


def test_a_header_document_has_the_documented_keys_in_order() -> None:
    assert list(INFO.to_dict()) == [
        "session",
        "name",
        "kind",
        "created_at",
        "expires_at",
        "file_count",
        "total_bytes",
        "meta",
        "base_dir",
        "skipped",
        "roots",
        "backup_of",
        "excludes",
        "stored_bytes",
        "replaced",
    ]
    assert INFO.to_dict()["created_at"] == "2025-06-01T10:42:53.491286+00:00"
    assert INFO.to_dict()["skipped"] == [{"path": "secret", "error": "Permission denied"}]
    assert INFO.to_dict()["meta"]["3"] == "key made text"
