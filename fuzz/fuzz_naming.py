"""Fuzz target: session/name -> directory name is one safe path component, and two different
names never share a directory (not even on a case-insensitive disk).

The input is text (UTF-8 with invalid bytes kept as lone surrogates, or UTF-16 by the first
byte); invalid names must be refused with InvalidNameError, nothing else.
Run: ``python fuzz/fuzz_naming.py fuzz/corpus/naming`` (see fuzz/README.md).
"""

from __future__ import annotations

import os
import re
import sys

from snapstore.errors import InvalidNameError
from snapstore.format.names import dir_name

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {
    f"{kind}{i}" for kind in ("COM", "LPT") for i in range(1, 10)
}
MAX_SEEN = 500_000
SEEN: dict[str, str] = {}
"""Directory name (case-folded) -> the raw name that produced it, across inputs."""


def to_text(data: bytes) -> str:
    """The name an input stands for."""
    if data[:1] == b"\xff":
        return data[1:].decode("utf-16-le", errors="surrogatepass" if len(data) % 2 else "replace")
    return data.decode("utf-8", errors="surrogateescape")


def check_component(name: str) -> None:
    """One portable path component that stays where it is put."""
    assert SAFE.match(name), f"unsafe characters in {name!r}"
    assert name not in (".", ".."), name
    assert not name.endswith((".", " ")), name
    assert name.split(".")[0].upper() not in WINDOWS_RESERVED, name
    assert len(name.encode()) <= 255, name
    root = os.path.join(os.sep, "root")
    assert os.path.dirname(os.path.normpath(os.path.join(root, name))) == root, name


def test_one_input(data: bytes) -> None:
    """Map the input; check the result; remember it to catch collisions."""
    try:
        text = to_text(data)
    except UnicodeDecodeError:
        return
    try:
        name = dir_name(text)
    except InvalidNameError:
        return
    check_component(name)
    folded = name.casefold()
    other = SEEN.get(folded)
    assert other is None or other == text, f"{other!r} and {text!r} share directory {name!r}"
    if len(SEEN) < MAX_SEEN:
        SEEN[folded] = text


def main() -> None:
    """Run under atheris (``pip install -e '.[fuzz]'``)."""
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
