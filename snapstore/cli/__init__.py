"""The ``snapstore`` command line, a thin layer over :class:`snapstore.SnapStore`.

Kept out of ``snapstore/__init__.py`` so that ``import snapstore`` never pays for click. This
package's own import is light too, so command modules elsewhere (``snapstore.checkpoint.cli``)
can use ``snapstore.cli.context`` while ``snapstore.cli.app`` registers them, without a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``snapstore`` console script (``python -m snapstore``)."""
    from snapstore.cli.app import main as run

    run(argv)


__all__ = ["main"]
