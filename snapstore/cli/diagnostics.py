"""Where warnings and the library's log records go: stderr, as short lines.

The library logs under the ``snapstore`` logger and stays silent by itself (a NullHandler);
the command line is the application, so it is the one that attaches a handler. Without
options only warnings and errors are shown; ``-v`` adds INFO records, ``-vv`` or ``--debug``
DEBUG ones (with the logger's name, so a reader can tell the lock from gc).
"""

from __future__ import annotations

import logging
import warnings
from typing import TextIO

import click

from snapstore.cli.output import one_line
from snapstore.logs import LIBRARY_LOGGER

_DEFAULT_SHOWWARNING = warnings.showwarning


class _StderrHandler(logging.Handler):
    """Writes each record as one line to the current ``sys.stderr`` (through click)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:
            self.handleError(record)


class _LineFormatter(logging.Formatter):
    """``warning: message``, or with ``detailed`` ``info snapstore.backend.filelock: message``."""

    def __init__(self, detailed: bool) -> None:
        super().__init__()
        self.detailed = detailed

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        message = one_line(record.getMessage())
        if record.exc_info and self.detailed:
            message += "\n" + self.formatException(record.exc_info)
        if self.detailed:
            return f"{level} {record.name}: {message}"
        return f"{level}: {message}"


_HANDLER = _StderrHandler()


def log_level(verbosity: int, debug: bool) -> int:
    """WARNING by default, INFO for ``-v``, DEBUG for ``-vv`` or ``--debug``."""
    if debug or verbosity >= 2:
        return logging.DEBUG
    if verbosity == 1:
        return logging.INFO
    return logging.WARNING


def configure(verbosity: int, debug: bool) -> None:
    """Route warnings and ``snapstore`` log records to stderr for this run (idempotent, so it
    can run again when ``-v`` or ``--debug`` follows the command name)."""
    warnings.showwarning = _DEFAULT_SHOWWARNING if debug else _show_warning
    level = log_level(verbosity, debug)
    _HANDLER.setFormatter(_LineFormatter(detailed=level < logging.WARNING))
    logger = logging.getLogger(LIBRARY_LOGGER)
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    logger.setLevel(level)
    logger.propagate = False


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Print a library warning as one ``warning:`` line on stderr."""
    click.echo(f"warning: {one_line(str(message))}", err=True)
