"""Per-run settings from the global options, and the store they open."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import click

from snapstore.cli.output import print_json, print_lines, stderr_is_terminal
from snapstore.errors import ReadOnlyStoreError
from snapstore.frontend.exitcodes import ExitCode

if TYPE_CHECKING:
    from snapstore.store import SnapStore

ProgressCallback = Callable[[int, int], None]


def shown_root(root: str) -> str:
    """A root as messages name it: an ``s3://`` URL as given, a directory in its normal form
    (``.`` for an empty one, no trailing ``/``)."""
    return root if root.startswith("s3://") else os.path.normpath(root)


class StoreNotFound(click.ClickException):
    """The storage root does not exist, and this command would not create one."""

    exit_code = ExitCode.NO_STORE

    def __init__(self, root: str) -> None:
        super().__init__(
            f"no store at '{shown_root(root)}' (pass --root DIR or set SNAPSTORE_ROOT; "
            "'snapstore create' makes a new one)"
        )


class Settings:
    """The global options of one run, and the store opened from them (lazily: the library is
    imported only by a command that opens the store).

    ``root_given`` is true when ``--root`` was on the command line (not from the environment
    or the default); ``verbose`` counts ``-v``. A plain class: every run of the command line
    makes one, and a dataclass would be built at import, for nothing a run uses.
    """

    def __init__(
        self,
        root: str = ".snapstore",
        *,
        json: bool = False,
        lock_timeout: float = 30.0,
        quiet: bool = False,
        debug: bool = False,
        verbose: int = 0,
        root_given: bool = False,
        password_file: str | None = None,
        password_command: str | None = None,
    ) -> None:
        self.root = root
        self.json = json
        self.lock_timeout = lock_timeout
        self.quiet = quiet
        self.debug = debug
        self.verbose = verbose
        self.root_given = root_given
        self.password_file = password_file
        self.password_command = password_command
        self._password: bytes | None = None
        self._store: SnapStore | None = None

    def password(self) -> bytes | None:
        """The password of an encrypted store, from where ``cli.passwords`` looks (asked
        once per run: a password command runs once)."""
        if self._password is None:
            from snapstore.cli.passwords import find_password

            self._password = find_password(self.password_file, self.password_command) or b""
        return self._password or None

    def store(self, *, create: bool = False, encrypt: bool = False) -> SnapStore:
        """The store at ``root``; only commands that write new data may ``create`` it (a
        command that only reads never makes a store, locally or in object storage)."""
        if self._store is None:
            from snapstore.errors import StoreNotFoundError
            from snapstore.store import SnapStore

            try:
                self._store = SnapStore(
                    self.root,
                    lock_timeout=self.lock_timeout,
                    create=create,
                    password=self.password(),
                    encrypt=encrypt,
                )
            except StoreNotFoundError:
                raise StoreNotFound(self.root) from None
        return self._store

    def writable_store(self, why: str, *, create: bool = False, encrypt: bool = False) -> SnapStore:
        """The store, for a command that writes into it before any exclusive lock would tell
        (``why``): a read-only store fails now, not half-way through."""
        store = self.store(create=create, encrypt=encrypt)
        if store.read_only:
            raise ReadOnlyStoreError(
                f"the store at {shown_root(self.root)} is read-only for you: {why}"
            )
        return store

    def snapshot_name(self, session: str, selector: str) -> str:
        """The name of the snapshot ``selector`` means on the command line: a snapshot's name,
        ``latest``, ``latest~N``, or the start of exactly one file checkpoint's name.

        The library takes no prefixes, so that a name kept by a program cannot come to mean
        another snapshot; a person typing a command sees the full name in what it prints.
        A prefix that fits several snapshots is an InvalidNameError (exit code 2)."""
        return self.store().resolve(session, selector, prefix=True)

    def emit(self, document: Any, lines: list[str], *, info: bool = False) -> None:
        """Print the JSON ``document`` or the human ``lines``; ``info`` lines obey --quiet."""
        if self.json:
            print_json(document)
        elif not (info and self.quiet):
            print_lines(lines)

    def emit_listing(self, document: Callable[[], Any], lines: Callable[[], list[str]]) -> None:
        """As ``emit``, for output that grows with the store (a listing of every snapshot,
        every entry of one): only the form asked for is built."""
        if self.json:
            print_json(document())
        else:
            print_lines(lines())

    @contextlib.contextmanager
    def progress(self, label: str) -> Iterator[ProgressCallback | None]:
        """A ``progress(done, total)`` callback drawing a bar on a terminal, else None."""
        if self.json or self.quiet or not stderr_is_terminal():
            yield None
            return
        bar = _LazyProgressBar(label)
        try:
            yield bar.update
        finally:
            bar.close()


class _LazyProgressBar:
    """A click progress bar on stderr, opened at the first report (when the total is known)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: Any = None
        self.done = 0

    def update(self, done: int, total: int) -> None:
        """Move the bar to ``done`` of ``total``."""
        if self.bar is None:
            self.bar = click.progressbar(length=max(total, 1), label=self.label, file=sys.stderr)
            self.bar.__enter__()
        self.bar.length = max(total, 1)
        if done > self.done:
            self.bar.update(done - self.done)
            self.done = done

    def close(self) -> None:
        """Finish the bar's line, if one was drawn."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


pass_settings = click.make_pass_decorator(Settings)


def finish(code: ExitCode) -> NoReturn:
    """End the command with ``code``, after its output (which says why, if it is not OK)."""
    click.get_current_context().exit(int(code))
