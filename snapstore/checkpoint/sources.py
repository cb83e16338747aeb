"""Resumable sources: iterables that report their position and start again from a saved one.

What a source must offer (``ResumableSource``, ``AsyncResumableSource``, and
``GuardedSource`` for one that can tell its file was replaced), and the source of any
iterable, resumed by counting (``CountedSource``). The file sources, resumed by byte offset,
are ``filesources``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import (
    Any,
    ClassVar,
    Generic,
    Protocol,
    TypeGuard,
    TypeVar,
    runtime_checkable,
)

from snapstore.checkpoint.errors import InvalidPositionError
from snapstore.checkpoint.identity import (
    FileIdentity,
)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class ResumableSource(Protocol[T_co]):
    """An iterable that says where it is and can start again from a saved position.

    ``position()`` is the position just after the last record yielded: update it before
    yielding a record, and return a fresh (or immutable) msgpack-able value each time.
    """

    def resume(self, position: Any) -> None:
        """Prepare to continue after ``position``; None means from the beginning."""
        ...

    def position(self) -> Any:
        """Where the next run should continue from, given every record yielded so far was done."""
        ...

    def __iter__(self) -> Iterator[T_co]: ...


@runtime_checkable
class AsyncResumableSource(Protocol[T_co]):
    """The async form of :class:`ResumableSource`, for connectors that await their records."""

    def resume(self, position: Any) -> None:
        """Prepare to continue after ``position``; None means from the beginning."""
        ...

    def position(self) -> Any:
        """Where the next run should continue from, given every record yielded so far was done."""
        ...

    def __aiter__(self) -> AsyncIterator[T_co]: ...


@runtime_checkable
class GuardedSource(Protocol):
    """A source whose positions point into one file, so a checkpoint records that file."""

    def identity_at(self, position: Any) -> FileIdentity:
        """The identity of the file being read, as of ``position``."""
        ...

    def identity_problem(self, saved: FileIdentity, position: Any) -> str | None:
        """Why the file to be read is not the one ``saved`` describes, or None if it is."""
        ...


def source_kind(source: object) -> str:
    """The short name a checkpoint records for ``source``: its ``kind``, else its class name."""
    kind = getattr(source, "kind", None)
    return kind if isinstance(kind, str) else type(source).__name__


class CountedSource(Generic[T]):
    """Any deterministic iterable (sync or async), resumed by re-reading and skipping records.

    The position is the number of records handled. Use it only where the iterable yields the
    same records in the same order on every run; nothing guards against a changed input.
    """

    kind: ClassVar[str] = "count"

    def __init__(self, records: Iterable[T] | AsyncIterable[T]) -> None:
        self.records = records
        self._count = 0
        self._skip = 0

    def __repr__(self) -> str:
        return f"CountedSource({self.records!r}, position={self._count})"

    def position(self) -> int:
        """How many records have been yielded, counting those skipped on resume."""
        return self._count

    def resume(self, position: Any) -> None:
        """Skip the first ``position`` records on the next iteration (None: skip none)."""
        if position is None:
            position = 0
        if not is_natural(position):
            raise InvalidPositionError(
                f"a count source resumes from a record count, not {position!r}: was this "
                "checkpoint saved by another kind of source?"
            )
        self._count = self._skip = position

    def __iter__(self) -> Iterator[T]:
        if not isinstance(self.records, Iterable):
            raise TypeError("this CountedSource wraps an async iterable: use `async for`")
        iterator = iter(self.records)
        for skipped in range(self._skip):
            if next(iterator, _END) is _END:
                raise self._too_short(skipped)
        self._skip = 0
        for record in iterator:
            self._count += 1
            yield record

    async def __aiter__(self) -> AsyncIterator[T]:
        if not isinstance(self.records, AsyncIterable):
            for record in self:
                yield record
            return
        iterator = aiter(self.records)
        for skipped in range(self._skip):
            if await anext(iterator, _END) is _END:
                raise self._too_short(skipped)
        self._skip = 0
        async for record in iterator:
            self._count += 1
            yield record

    def _too_short(self, available: int) -> InvalidPositionError:
        """The error for a saved count beyond the end of the records."""
        return InvalidPositionError(
            f"the source has {available} records, fewer than the saved count {self._skip}: "
            "its input changed since the checkpoint was saved"
        )


_END: Any = object()


def is_natural(value: object) -> TypeGuard[int]:
    """True for a non-negative int (bools excluded)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
