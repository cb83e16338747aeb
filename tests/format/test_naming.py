"""Directory names built from raw names: safe, portable, collision-free."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snapstore.errors import InvalidNameError
from snapstore.format.names import dir_name

HOSTILE = [
    "a/b",
    "a_b",
    "..",
    ".",
    "../../etc",
    "/abs",
    "CON",
    "con",
    "nul.txt",
    "LPT9",
    "Foo",
    "foo",
    "a\\b",
    "x" * 4000,
    " ",
    "trailing.",
    "trailing ",
    "\x00",
    "é",
    "e\u0301",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_dir_name_is_a_single_safe_component(value: str) -> None:
    name = dir_name(value)
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert name not in (".", "..")
    assert not name.endswith((".", " "))
    assert len(name.encode()) < 255
    assert name.split(".")[0].split("-")[0].upper() not in {"CON", "PRN", "AUX", "NUL", "LPT9"}


def test_similar_names_never_share_a_directory() -> None:
    names = [dir_name(v) for v in HOSTILE]
    assert len(set(names)) == len(names)
    assert len({n.lower() for n in names}) == len(names)


@given(st.text(min_size=1, max_size=50), st.text(min_size=1, max_size=50))
def test_distinct_names_map_to_distinct_directories(a: str, b: str) -> None:
    try:
        left, right = dir_name(a), dir_name(b)
    except InvalidNameError:
        return
    assert (left == right) == (a == b)
    assert left.lower() != right.lower() or a == b


@pytest.mark.parametrize("bad", ["", 3, None, b"bytes", "\ud800"])
def test_bad_names_are_refused(bad: object) -> None:
    with pytest.raises(InvalidNameError):
        dir_name(bad)  # type: ignore[arg-type]
