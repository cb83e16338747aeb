"""The program's name and what ``snapstore --version`` prints, shared by the fast path in
``snapstore.cli`` (no click) and click's ``--version`` in ``snapstore.cli.app``."""

from __future__ import annotations

PROG_NAME = "snapstore"


def version_line() -> str:
    """What ``snapstore --version`` prints (click's ``version_option`` says the same)."""
    from snapstore import __version__

    return f"{PROG_NAME}, version {__version__}"
