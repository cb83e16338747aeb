"""Checkpointer: runs a resumable source, saving its position every N records and at the end."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncGenerator, Generator
from typing import Any, TypeVar

from snapstore.checkpoint.errors import CheckpointSaveError, IdentityMismatchError
from snapstore.checkpoint.persistence import Checkpoint, CheckpointStore, RunInfo, SaveTrigger
from snapstore.checkpoint.sources import (
    AsyncResumableSource,
    GuardedSource,
    ResumableSource,
    source_kind,
)
from snapstore.logs import get_logger

T = TypeVar("T")

logger = get_logger("snapstore.checkpoint")


class FailurePolicy(enum.Enum):
    """What a failed save does: stop the run with the error, or log it and keep going."""

    FAIL_CLOSED = "fail_closed"
    LOG_AND_CONTINUE = "log_and_continue"


class MismatchPolicy(enum.Enum):
    """What a checkpoint saved for another file does: refuse to run, or start from the beginning."""

    REFUSE = "refuse"
    RESTART = "restart"


class Checkpointer:
    """Resumes a source from its saved position and saves as records are done (at-least-once).

    A record counts as done when the loop asks for the next one. The position is saved after
    every ``every`` done records, at the end of the stream, and when the loop stops early
    (``break``, an exception): so a crash re-runs at most ``every - 1`` done records, plus the
    one in flight, and skips none.
    """

    def __init__(
        self,
        store: CheckpointStore,
        key: str,
        *,
        every: int = 100,
        policy: FailurePolicy = FailurePolicy.FAIL_CLOSED,
        initial: Any = None,
        on_mismatch: MismatchPolicy = MismatchPolicy.REFUSE,
    ) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive integer, not {every!r}")
        self.store = store
        self.key = key
        self.every = every
        self.policy = policy
        self.initial = initial
        self.on_mismatch = on_mismatch
        self.loaded: Checkpoint | None = None
        self.resumed_from: Any = None
        self.restarted = False
        self.records = 0
        self.failed_saves = 0
        self.last_saved: Checkpoint | None = None

    def __repr__(self) -> str:
        return f"Checkpointer({self.store!r}, {self.key!r}, every={self.every})"

    def iterate(self, source: ResumableSource[T]) -> Generator[T, None, None]:
        """Yield ``source``'s records from the saved position on, saving as they are done."""
        try:
            self._start(source, self.store.load(self.key))
        except BaseException:
            _close(source)
            raise
        iterator = iter(source)
        done_position = source.position()
        since_save = 0
        try:
            for record in iterator:
                reached = source.position()
                yield record
                self.records += 1
                since_save += 1
                done_position = reached
                if since_save >= self.every:
                    since_save = 0
                    self._save(source, done_position, "interval")
        except GeneratorExit:
            self._save_on_close(source, done_position)
            raise
        except CheckpointSaveError:
            raise
        except BaseException as error:
            self._save_before_raising(source, done_position, error)
            raise
        else:
            self._save(source, source.position(), "end")
        finally:
            _close(source)

    async def aiterate(self, source: AsyncResumableSource[T]) -> AsyncGenerator[T, None]:
        """The async form of :meth:`iterate`; loads and saves run in a worker thread."""
        try:
            self._start(source, await asyncio.to_thread(self.store.load, self.key))
        except BaseException:
            _close(source)
            raise
        done_position = source.position()
        since_save = 0
        try:
            async for record in source:
                reached = source.position()
                yield record
                self.records += 1
                since_save += 1
                done_position = reached
                if since_save >= self.every:
                    since_save = 0
                    await asyncio.to_thread(self._save, source, done_position, "interval")
        except GeneratorExit:
            await asyncio.to_thread(self._save_on_close, source, done_position)
            raise
        except CheckpointSaveError:
            raise
        except BaseException as error:
            await asyncio.to_thread(self._save_before_raising, source, done_position, error)
            raise
        else:
            await asyncio.to_thread(self._save, source, source.position(), "end")
        finally:
            _close(source)

    def _start(
        self, source: ResumableSource[Any] | AsyncResumableSource[Any], loaded: Checkpoint | None
    ) -> None:
        """Check the saved identity, then hand the saved (or initial) position to the source."""
        if not (
            callable(getattr(source, "resume", None))
            and callable(getattr(source, "position", None))
        ):
            raise TypeError(
                f"{type(source).__name__} is not a resumable source (it needs resume() and "
                "position()); wrap a deterministic iterable in CountedSource"
            )
        self.loaded, self.restarted, self.records = loaded, False, 0
        self.last_saved = None
        position = self.initial if loaded is None else loaded.value
        if loaded is not None and loaded.identity is not None and isinstance(source, GuardedSource):
            problem = source.identity_problem(loaded.identity, position)
            if problem is not None:
                path = str(getattr(source, "path", loaded.identity.path))
                if self.on_mismatch is MismatchPolicy.REFUSE:
                    raise IdentityMismatchError(self.key, path, problem)
                logger.warning(
                    "checkpoint %r: %s %s; starting again from the beginning (on_mismatch=RESTART)",
                    self.key,
                    path,
                    problem,
                )
                position, self.restarted = self.initial, True
        if loaded is None or self.restarted:
            logger.info("checkpoint %r: starting from the initial position %r", self.key, position)
        else:
            logger.info(
                "checkpoint %r: resuming from position %r (saved %s)",
                self.key,
                position,
                loaded.saved_at.isoformat(),
            )
        source.resume(position)
        self.resumed_from = position

    def _save(
        self,
        source: ResumableSource[Any] | AsyncResumableSource[Any],
        position: Any,
        trigger: SaveTrigger,
    ) -> None:
        """Save ``position``; on failure raise (FAIL_CLOSED) or log and go on."""
        try:
            identity = source.identity_at(position) if isinstance(source, GuardedSource) else None
            run = RunInfo(source_kind(source), self.every, self.records, trigger)
            self.last_saved = self.store.save(self.key, position, identity=identity, run=run)
            logger.debug(
                "checkpoint %r: saved position %r after %d records (%s)",
                self.key,
                position,
                self.records,
                trigger,
            )
        except Exception as error:
            self.failed_saves += 1
            if self.policy is FailurePolicy.FAIL_CLOSED:
                raise CheckpointSaveError(self.key, position) from error
            logger.warning(
                "checkpoint %r: could not save position %r (%s: %s); continuing "
                "(LOG_AND_CONTINUE): a restart re-runs the records done since the last save",
                self.key,
                position,
                type(error).__name__,
                error,
            )

    def _save_unsaved(
        self, source: ResumableSource[Any] | AsyncResumableSource[Any], position: Any
    ) -> None:
        """On an early stop, save the position of the done records if it is not saved yet."""
        if self._unsaved(position):
            self._save(source, position, "stop")

    def _save_on_close(
        self, source: ResumableSource[Any] | AsyncResumableSource[Any], position: Any
    ) -> None:
        """Save when the loop let go of the iterator (``break``, or an error in the loop body).

        The iterator is usually being finalized then, where a raised error would be printed
        and dropped, so a failed save is logged whatever the policy; the previous save stands.
        """
        try:
            self._save_unsaved(source, position)
        except CheckpointSaveError as error:
            logger.error("%s (%s: %s)", error, type(error.__cause__).__name__, error.__cause__)

    def _save_before_raising(
        self,
        source: ResumableSource[Any] | AsyncResumableSource[Any],
        position: Any,
        error: BaseException,
    ) -> None:
        """Save the done records' position while ``error`` stops the run; never mask ``error``."""
        try:
            self._save_unsaved(source, position)
        except CheckpointSaveError as save_error:
            error.add_note(f"and then: {save_error} ({save_error.__cause__!r})")

    def _unsaved(self, position: Any) -> bool:
        """True when ``position`` differs from what this run last saved (or loaded)."""
        if self.last_saved is not None:
            return bool(self.last_saved.value != position)
        return bool(position != self.resumed_from)


def _close(source: object) -> None:
    """Close a source that holds a resource (an open file)."""
    close = getattr(source, "close", None)
    if callable(close):
        close()
