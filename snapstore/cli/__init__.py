"""The ``snapstore`` command line, a thin layer over :class:`snapstore.SnapStore`.

Kept out of ``snapstore/__init__.py`` so that ``import snapstore`` never pays for click. This
package's own import is light too: ``snapstore.cli.app`` lists the commands, and each command's
module is imported only when that command runs.
"""

from __future__ import annotations

import contextlib
import os
import sys

from snapstore.cli.startup import pause_collector
from snapstore.cli.version import version_line

TYPE_CHECKING = False
"""``typing.TYPE_CHECKING`` without importing ``typing``, which ``--version`` does not need."""

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn


def _print_version() -> NoReturn:
    """Answer ``snapstore --version`` without importing click: importing it alone takes about
    twice as long as starting Python, and this is the one question that needs nothing else."""
    try:
        sys.stdout.write(version_line() + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``snapstore`` console script (``python -m snapstore``)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        _print_version()
    pause_collector()  # resumed by the top-level group, before the command runs
    from snapstore.cli.app import main as run

    run(args)


__all__ = ["main", "version_line"]
