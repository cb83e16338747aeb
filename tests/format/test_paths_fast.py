"""The fast paths of path checking accept exactly what the full rules accept."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from snapstore.errors import UnsafePathError
from snapstore.format.paths import (
    check_relative_path,
    check_relative_path_fully,
    child_path,
    find_collisions,
    fold,
    plain_names,
)

PIECES = st.sampled_from(
    ["a", "B", ".", "..", "", "/", "\\", "\x00", "C:", "é", "ß", " ", "x" * 300]
)
PATHS = st.lists(PIECES, max_size=8).map("".join) | st.text(max_size=40)


def _verdict(check: object, path: object) -> str | None:
    try:
        return check(path)  # type: ignore[operator, no-any-return]
    except UnsafePathError:
        return None


@given(PATHS)
def test_fast_check_agrees_with_the_full_rules(path: str) -> None:
    assert _verdict(check_relative_path, path) == _verdict(check_relative_path_fully, path)


@given(PATHS, PATHS)
def test_child_path_agrees_with_the_full_rules(parent: str, name: str) -> None:
    if _verdict(check_relative_path_fully, parent) is None and parent != ".":
        return
    if not name or "/" in name or name in (".", ".."):
        return
    joined = name if parent == "." else f"{parent}/{name}"
    assert _verdict(lambda n: child_path(parent, n), name) == _verdict(
        check_relative_path_fully, joined
    )


@given(PATHS, st.lists(PATHS, max_size=5))
def test_plain_names_accepts_only_what_the_full_rules_accept(parent: str, names: list[str]) -> None:
    if _verdict(check_relative_path_fully, parent) is None and parent != ".":
        return
    if plain_names(parent, names):
        for name in names:
            assert check_relative_path_fully(f"{parent}/{name}") == f"{parent}/{name}"


def test_plain_names_takes_the_common_case_and_leaves_the_rest() -> None:
    assert plain_names("src/app", ["main.py", "util.py", ".hidden", "a b"])
    assert not plain_names(".", ["main.py"])
    assert not plain_names("src", ["é.py"])
    assert not plain_names("src", ["a\\b"])
    assert not plain_names("src", ["x" * 256])
    assert not plain_names("src", [])


@given(st.text(max_size=20))
def test_fold_of_ascii_is_the_full_fold(path: str) -> None:
    import unicodedata

    assert fold(path) == unicodedata.normalize("NFC", path).casefold()


def test_collisions_are_found_between_parents_too() -> None:
    assert find_collisions(["Dir/a", "dir/b"]) == [("Dir", "dir")]
    assert find_collisions(["a/b/c", "a/b/d", "a/B"]) == [("a/B", "a/b")]


def _collisions_by_the_full_rules(paths: list[str]) -> list[tuple[str, str]]:
    every = set()
    for path in paths:
        parts = path.split("/")
        every.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    seen: dict[str, str] = {}
    found = []
    for path in sorted(every):
        other = seen.setdefault(unicodedata.normalize("NFC", path).casefold(), path)
        if other != path:
            found.append((other, path))
    return found


SEGMENTS = st.sampled_from(["a", "A", "b", "B", "é", "e\u0301", "ß", "ss"])
RELATIVE = st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join)


@given(st.lists(RELATIVE, max_size=6))
def test_collisions_agree_with_the_full_rules(paths: list[str]) -> None:
    assert find_collisions(paths) == _collisions_by_the_full_rules(paths)


def test_letters_whose_folding_decomposes_them_still_collide() -> None:
    """Case folding turns U+0390 into three code points; normalizing again after folding
    finds it equal to its decomposed capital, as macOS does."""
    from snapstore.format.paths import find_collisions

    assert find_collisions(["\u0390", "\u0399\u0308\u0301"]) != []
    assert find_collisions(["d/\u1fd3", "D/\u0399\u0308\u0301"]) != []
