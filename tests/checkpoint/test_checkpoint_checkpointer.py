"""Checkpointer: when it saves, what it resumes from, and what a failed save does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.checkpoints import write_lines

from snapstore.checkpoint import (
    Checkpoint,
    Checkpointer,
    CheckpointSaveError,
    CountedSource,
    FailurePolicy,
    FileCheckpointStore,
    FileIdentity,
    LinesSource,
    MemoryCheckpointStore,
    RunInfo,
)
from snapstore.errors import LockTimeout


class RecordingStore(MemoryCheckpointStore):
    """A memory store that remembers every save, and fails the ones a test asks it to."""

    def __init__(self, fail_saves: set[int] | None = None, error: Exception | None = None) -> None:
        super().__init__()
        self.saves: list[Checkpoint] = []
        self.attempts = 0
        self.fail_saves = fail_saves or set()
        self.error = error or OSError(28, "No space left on device")

    def save(
        self,
        key: str,
        value: Any,
        *,
        identity: FileIdentity | None = None,
        run: RunInfo | None = None,
    ) -> Checkpoint:
        self.attempts += 1
        if self.attempts in self.fail_saves or -1 in self.fail_saves:
            raise self.error
        checkpoint = super().save(key, value, identity=identity, run=run)
        self.saves.append(checkpoint)
        return checkpoint


def test_saves_every_n_records_and_at_the_end() -> None:
    store = RecordingStore()
    records = list(Checkpointer(store, "k", every=4).iterate(CountedSource(range(10))))
    assert records == list(range(10))
    assert [(c.value, c.run.trigger) for c in store.saves if c.run] == [
        (4, "interval"),
        (8, "interval"),
        (10, "end"),
    ]


def test_a_position_is_saved_only_after_its_record_was_handled() -> None:
    store = RecordingStore()
    seen_when_handling: list[int | None] = []
    for _ in Checkpointer(store, "k", every=1).iterate(CountedSource("abc")):
        saved = store.load("k")
        seen_when_handling.append(None if saved is None else saved.value)
    assert seen_when_handling == [None, 1, 2]


def test_first_run_uses_initial_and_later_runs_the_saved_value() -> None:
    store = MemoryCheckpointStore()
    first = Checkpointer(store, "k", every=3, initial=5)
    assert list(first.iterate(CountedSource(range(8)))) == [5, 6, 7]
    assert first.resumed_from == 5 and first.loaded is None
    second = Checkpointer(store, "k", every=3, initial=5)
    assert list(second.iterate(CountedSource(range(10)))) == [8, 9]
    assert second.resumed_from == 8 and second.records == 2


def test_break_saves_the_records_done_but_not_the_one_in_hand() -> None:
    store = RecordingStore()
    checkpointer = Checkpointer(store, "k", every=100)
    for record in checkpointer.iterate(CountedSource(range(50))):
        if record == 6:
            break
    saved = store.load("k")
    assert saved is not None and saved.value == 6 and saved.run is not None
    assert saved.run.trigger == "stop"
    assert list(Checkpointer(store, "k").iterate(CountedSource(range(8)))) == [6, 7]


def test_an_error_while_handling_saves_the_done_records_and_propagates() -> None:
    store = RecordingStore()
    handled = []
    with pytest.raises(ZeroDivisionError):
        for record in Checkpointer(store, "k", every=100).iterate(CountedSource(range(20))):
            handled.append(1 / (record - 3))
    saved = store.load("k")
    assert saved is not None and saved.value == 3


def test_an_error_from_the_source_saves_the_records_before_it(tmp_path: Path) -> None:
    def flaky() -> Iterator[int]:
        yield from range(5)
        raise ConnectionError("feed went away")

    store = RecordingStore()
    with pytest.raises(ConnectionError):
        for _ in Checkpointer(store, "k", every=100).iterate(CountedSource(flaky())):
            pass
    saved = store.load("k")
    assert saved is not None and saved.value == 5


def test_nothing_is_saved_again_when_stopping_right_after_a_save() -> None:
    store = RecordingStore()
    for record in Checkpointer(store, "k", every=2).iterate(CountedSource(range(10))):
        if record == 2:
            break
    assert [c.value for c in store.saves] == [2]


def test_every_must_be_a_positive_integer() -> None:
    for every in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="every"):
            Checkpointer(MemoryCheckpointStore(), "k", every=every)  # type: ignore[arg-type]


def test_a_plain_iterable_is_refused_with_advice() -> None:
    with pytest.raises(TypeError, match="CountedSource"):
        list(Checkpointer(MemoryCheckpointStore(), "k").iterate([1, 2]))  # type: ignore[arg-type]


def test_a_source_closes_when_the_run_ends(tmp_path: Path) -> None:
    write_lines(tmp_path / "in.txt", 3)
    source = LinesSource(tmp_path / "in.txt")
    assert len(list(Checkpointer(MemoryCheckpointStore(), "k").iterate(source))) == 3
    assert source._handle is None


# ----------------------------------------------------------------- failure policies


def test_fail_closed_stops_the_run_with_the_save_error() -> None:
    store = RecordingStore(fail_saves={2})
    handled: list[int] = []
    checkpointer = Checkpointer(store, "k", every=3)
    with pytest.raises(CheckpointSaveError) as raised:
        for record in checkpointer.iterate(CountedSource(range(20))):
            handled.append(record)
    assert handled == list(range(6))
    assert isinstance(raised.value.__cause__, OSError)
    assert raised.value.position == 6 and "'k'" in str(raised.value)
    saved = store.load("k")
    assert saved is not None and saved.value == 3
    assert checkpointer.failed_saves == 1


def test_fail_closed_is_the_default() -> None:
    assert Checkpointer(MemoryCheckpointStore(), "k").policy is FailurePolicy.FAIL_CLOSED


def test_fail_closed_raises_a_failed_final_save() -> None:
    store = RecordingStore(fail_saves={1})
    with pytest.raises(CheckpointSaveError):
        list(Checkpointer(store, "k", every=100).iterate(CountedSource(range(5))))
    assert store.load("k") is None


def test_a_failed_save_on_break_is_logged_and_the_previous_save_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RecordingStore(fail_saves={2})
    with caplog.at_level(logging.ERROR, logger="snapstore.checkpoint"):
        for record in Checkpointer(store, "k", every=3).iterate(CountedSource(range(9))):
            if record == 4:
                break
    saved = store.load("k")
    assert saved is not None and saved.value == 3
    assert [
        "could not save checkpoint 'k' at position 4" in r.getMessage() for r in caplog.records
    ] == [True]


def test_an_error_in_the_loop_body_propagates_even_if_the_save_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RecordingStore(fail_saves={-1})
    with caplog.at_level(logging.ERROR, logger="snapstore.checkpoint"), pytest.raises(KeyError):
        for record in Checkpointer(store, "k", every=100).iterate(CountedSource(range(5))):
            if record == 2:
                raise KeyError("boom")
    assert len(caplog.records) == 1 and store.load("k") is None


def test_a_failed_save_after_a_source_error_is_noted_on_that_error() -> None:
    def flaky() -> Iterator[int]:
        yield from range(3)
        raise ConnectionError("feed went away")

    store = RecordingStore(fail_saves={-1})
    with pytest.raises(ConnectionError) as raised:
        for _ in Checkpointer(store, "k", every=100).iterate(CountedSource(flaky())):
            pass
    assert any("could not save checkpoint 'k'" in note for note in raised.value.__notes__)


def test_log_and_continue_logs_and_finishes_the_run(caplog: pytest.LogCaptureFixture) -> None:
    store = RecordingStore(fail_saves={1, 2}, error=LockTimeout("namespace", 0.5))
    checkpointer = Checkpointer(store, "k", every=3, policy=FailurePolicy.LOG_AND_CONTINUE)
    with caplog.at_level(logging.WARNING, logger="snapstore.checkpoint"):
        records = list(checkpointer.iterate(CountedSource(range(10))))
    assert records == list(range(10))
    assert checkpointer.failed_saves == 2
    assert [c.value for c in store.saves] == [9, 10]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all("could not save position" in m for m in messages)
    assert "LockTimeout" in messages[0]


def test_log_and_continue_with_every_save_failing_still_yields_everything() -> None:
    store = RecordingStore(fail_saves={-1})
    checkpointer = Checkpointer(store, "k", every=1, policy=FailurePolicy.LOG_AND_CONTINUE)
    assert list(checkpointer.iterate(CountedSource(range(4)))) == [0, 1, 2, 3]
    assert checkpointer.failed_saves == 5 and store.load("k") is None


def test_a_failing_durable_store_is_reported_by_fail_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckpointStore(tmp_path / "root")
    store.save("k", 2)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store.store, "put_state", refuse)
    with pytest.raises(CheckpointSaveError) as raised:
        list(Checkpointer(store, "k", every=2).iterate(CountedSource(range(10))))
    assert isinstance(raised.value.__cause__, PermissionError)
    monkeypatch.undo()
    saved = store.load("k")
    assert saved is not None and saved.value == 2


# ----------------------------------------------------------------- async sources


class FakeEventsApi:
    """A paged API: events after a cursor, two per page."""

    def __init__(self, count: int) -> None:
        self.events = [{"id": f"ev{index:03d}", "n": index} for index in range(count)]
        self.requests: list[str | None] = []

    async def page_after(self, cursor: str | None) -> list[dict[str, Any]]:
        self.requests.append(cursor)
        await asyncio.sleep(0)
        start = 0 if cursor is None else int(cursor[2:]) + 1
        return self.events[start : start + 2]


class EventsSource:
    """A connector's source: resumes from the id of the last event handled."""

    kind = "events-cursor"

    def __init__(self, api: FakeEventsApi) -> None:
        self.api = api
        self.cursor: str | None = None

    def resume(self, position: Any) -> None:
        self.cursor = position

    def position(self) -> str | None:
        return self.cursor

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while page := await self.api.page_after(self.cursor):
            for event in page:
                self.cursor = event["id"]
                yield event


def test_async_source_resumes_from_its_saved_cursor() -> None:
    store = RecordingStore()
    api = FakeEventsApi(9)

    async def run(limit: int | None) -> list[int]:
        handled: list[int] = []
        checkpointer = Checkpointer(store, "events", every=3)
        async with contextlib.aclosing(checkpointer.aiterate(EventsSource(api))) as events:
            async for event in events:
                handled.append(event["n"])
                if len(handled) == limit:
                    break
        return handled

    assert asyncio.run(run(limit=5)) == [0, 1, 2, 3, 4]
    saved = store.load("events")
    assert saved is not None and saved.value == "ev003" and saved.run is not None
    assert saved.run.source == "events-cursor" and saved.run.trigger == "stop"
    first_run_requests = len(api.requests)
    assert asyncio.run(run(limit=None)) == [4, 5, 6, 7, 8]
    assert api.requests[first_run_requests] == "ev003", "the resume did not use the saved cursor"
    final = store.load("events")
    assert final is not None and final.value == "ev008" and final.run is not None
    assert final.run.trigger == "end"


def test_async_counted_source_over_an_async_generator() -> None:
    async def numbers() -> AsyncIterator[int]:
        for number in range(7):
            await asyncio.sleep(0)
            yield number

    store = MemoryCheckpointStore()
    store.save("k", 4)

    async def run() -> list[int]:
        return [
            n async for n in Checkpointer(store, "k", every=2).aiterate(CountedSource(numbers()))
        ]

    assert asyncio.run(run()) == [4, 5, 6]
    saved = store.load("k")
    assert saved is not None and saved.value == 7


def test_async_fail_closed_raises_the_save_error() -> None:
    store = RecordingStore(fail_saves={1})

    async def run() -> list[int]:
        return [
            n async for n in Checkpointer(store, "k", every=2).aiterate(CountedSource(range(5)))
        ]

    with pytest.raises(CheckpointSaveError):
        asyncio.run(run())


def test_async_log_and_continue_finishes() -> None:
    store = RecordingStore(fail_saves={1})
    checkpointer = Checkpointer(store, "k", every=2, policy=FailurePolicy.LOG_AND_CONTINUE)

    async def run() -> list[int]:
        return [n async for n in checkpointer.aiterate(CountedSource(range(5)))]

    assert asyncio.run(run()) == [0, 1, 2, 3, 4]
    assert checkpointer.failed_saves == 1
    saved = store.load("k")
    assert saved is not None and saved.value == 5
