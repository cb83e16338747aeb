"""The library's loggers: every one under ``snapstore``, silent unless the application
configures logging.

A module that logs takes its logger from ``get_logger``, which first gives the ``snapstore``
logger a ``NullHandler``: without it, Python's last-resort handler would print the library's
warnings on stderr. Doing this here rather than in ``snapstore/__init__.py`` keeps ``logging``
(about 10 ms of imports) out of ``import snapstore`` and ``snapstore --version``.
"""

from __future__ import annotations

import logging

LIBRARY_LOGGER = "snapstore"


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (a module's ``__name__``), with the library's NullHandler in place."""
    library = logging.getLogger(LIBRARY_LOGGER)
    if not any(isinstance(handler, logging.NullHandler) for handler in library.handlers):
        library.addHandler(logging.NullHandler())
    return logging.getLogger(name)
