"""The ``snapstore`` command line, a thin layer over :class:`snapstore.SnapStore`.

Kept out of ``snapstore/__init__.py`` so that ``import snapstore`` never pays for click.
"""

from __future__ import annotations

from snapstore.cli.app import cli, main

__all__ = ["cli", "main"]
