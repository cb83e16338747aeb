"""The paths a create is asked for: the quick way a plain relative path takes gives exactly
what the full way (``relative_to_base``) gives, refusals included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snapstore.errors import UnsafePathError
from snapstore.worktree.basepaths import relative_to_base
from snapstore.worktree.create import requested_path

BASE = "/work/project"
PARTS = st.sampled_from(["a", "b", ".", "..", "", "project", "work", "x y", "é", "a\\b", "c\x00"])


def _outcome(function: object, path: str) -> tuple[str, str]:
    try:
        return "ok", function(BASE, path)  # type: ignore[operator]
    except UnsafePathError:
        return "refused", ""


@given(st.lists(PARTS, max_size=6), st.booleans(), st.booleans())
@settings(max_examples=600, deadline=None)
def test_the_quick_way_gives_what_the_full_way_gives(
    parts: list[str], absolute: bool, trailing: bool
) -> None:
    path = "/".join(parts) + ("/" if trailing else "")
    if absolute:
        path = os.path.join(BASE, path)
    assert _outcome(requested_path, path) == _outcome(relative_to_base, path)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("d0/f0.py", "d0/f0.py"),
        ("./d0//f0.py/", "d0/f0.py"),
        ("d0/../d1/f1.py", "d1/f1.py"),
        (".", "."),
        ("d0/..", "."),
        ("../project/d0/f0.py", "d0/f0.py"),
        (f"{BASE}/d0/f0.py", "d0/f0.py"),
    ],
)
def test_paths_inside_the_base(path: str, expected: str) -> None:
    assert requested_path(BASE, path) == expected


@pytest.mark.parametrize("path", ["", "..", "../other/f", "d0/../../other", "/etc/passwd", "a\\b"])
def test_paths_a_create_refuses(path: str) -> None:
    with pytest.raises(UnsafePathError):
        requested_path(BASE, path)


def test_a_base_given_as_bytes_is_a_typed_error(tmp_path: Path) -> None:
    """``base_dir`` is a str or a path; bytes (which ``os.fspath`` passes through) are refused
    with the same typed error as any other base that cannot be one, not a TypeError."""
    from snapstore import InvalidValueError, SnapStore

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("a")
    store = SnapStore(tmp_path / "store")
    with pytest.raises(InvalidValueError, match="base_dir"):
        store.create("s", "n", ["a.txt"], base_dir=os.fsencode(tmp_path / "project"))  # type: ignore[arg-type]
    assert store.list() == []
