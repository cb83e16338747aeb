"""Fail a test instead of hanging the suite when an operation blocks."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def no_hang(seconds: int = 10) -> Iterator[None]:
    """Raise TimeoutError in the block if it is still running after ``seconds`` (a blocked
    ``open`` of a FIFO, say): SIGALRM interrupts the system call."""

    def fail(signum: int, frame: object) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
