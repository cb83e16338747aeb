"""The file sources: records of a line-oriented file (lines, JSON lines, CSV rows), resumed
by byte offset (one ``seek``, nothing re-read) and guarded by the file's identity, so a
position is never applied to a replaced, truncated or rewritten file.
"""

from __future__ import annotations

import codecs
import csv
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import (
    IO,
    Any,
    ClassVar,
    Generic,
    Self,
    TypeVar,
)

from snapstore.checkpoint.errors import InvalidPositionError, RecordDecodeError
from snapstore.checkpoint.identity import (
    FINGERPRINT_BYTES,
    FileIdentity,
    fingerprint_of,
    identity_of,
    mismatch_reason,
)
from snapstore.checkpoint.sources import is_natural

T = TypeVar("T")


RECENT_BYTES = 1 << 20
"""How much of what it read a file source keeps, to fingerprint a saved offset from the bytes
it read rather than from what the file holds by then (the last record it yielded is at
most this long ago)."""


class ByteOffsetSource(Generic[T]):
    """Records of a line-oriented file, resumed by byte offset and guarded by file identity.

    The position is ``{"offset": byte offset of the next record, "records": records before it}``.
    With ``complete_lines_only``, a last line without a newline is left for the next run,
    for files another process is still appending to.
    """

    kind: ClassVar[str] = "bytes"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        encoding: str = "utf-8",
        complete_lines_only: bool = False,
    ) -> None:
        if codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")) or (
            "\n".encode(encoding) != b"\n"
        ):
            raise ValueError(f"encoding {encoding!r} does not write a newline as the byte 0x0a")
        self.path = os.path.abspath(os.fspath(path))
        self.encoding = encoding
        self.complete_lines_only = complete_lines_only
        self._handle: IO[bytes] | None = None
        self._offset = 0
        self._records = 0
        self._recent = bytearray()
        self._recent_end = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, offset={self._offset})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file; the next use opens it again by path."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def position(self) -> dict[str, int]:
        """Byte offset of the next record, and how many records come before it."""
        return {"offset": self._offset, "records": self._records}

    def resume(self, position: Any) -> None:
        """Seek to the saved offset on the next iteration (None: the beginning of the file)."""
        offset, records = self._parse(position)
        size = os.fstat(self._open().fileno()).st_size
        if offset > size:
            raise InvalidPositionError(
                f"{self.path} has {size} bytes; cannot resume at byte {offset} beyond its end"
            )
        self._offset, self._records = offset, records
        self._after_resume()

    def identity_at(self, position: Any) -> FileIdentity:
        """The open file's identity at ``position``'s offset, fingerprinted from the bytes
        this source read before that offset where it still has them: a file rewritten in
        place while it was read (same inode) must not pass for the one the offset counts."""
        offset, _ = self._parse(position)
        identity = identity_of(self._open().fileno(), self.path, offset)
        read = self._read_before(offset)
        return identity if read is None else replace(identity, fingerprint=fingerprint_of(read))

    def _read_before(self, offset: int) -> bytes | None:
        """The bytes this source read just before ``offset`` (as many as a fingerprint
        covers), or None if it no longer has them."""
        begin = self._recent_end - len(self._recent)
        start = max(0, offset - FINGERPRINT_BYTES)
        if offset <= 0 or start < begin or offset > self._recent_end:
            return None
        return bytes(self._recent[start - begin : offset - begin])

    def identity_problem(self, saved: FileIdentity, position: Any) -> str | None:
        """Why the file at ``path`` now is not the one the checkpoint was saved for, or None."""
        offset, _ = self._parse(position)
        return mismatch_reason(saved, self._open().fileno(), offset)

    def __iter__(self) -> Iterator[T]:
        raise NotImplementedError

    def _after_resume(self) -> None:
        """Hook run after a resume moved the offset."""

    def _open(self) -> IO[bytes]:
        """The open file, opened on first use."""
        if self._handle is None:
            self._handle = open(self.path, "rb")  # noqa: SIM115 (kept open across calls)
        return self._handle

    def _parse(self, position: Any) -> tuple[int, int]:
        """``(offset, records)`` of a saved position; InvalidPositionError if it is not one."""
        if position is None:
            return 0, 0
        if isinstance(position, dict):
            offset, records = position.get("offset"), position.get("records", 0)
            if is_natural(offset) and is_natural(records):
                return offset, records
        raise InvalidPositionError(
            f"a {self.kind} source resumes from {{'offset': bytes, 'records': count}}, "
            f"not {position!r}: was this checkpoint saved by another kind of source?"
        )

    def _lines(self, start: int) -> Iterator[tuple[int, bytes]]:
        """``(offset, raw line)`` pairs from byte ``start``, line endings included."""
        handle = self._open()
        before = max(0, start - FINGERPRINT_BYTES)
        handle.seek(before)
        self._recent = bytearray(handle.read(start - before))
        if before + len(self._recent) != start:  # shorter than the offset: nothing before it
            self._recent.clear()
        self._recent_end = start
        handle.seek(start)
        offset = start
        while True:
            line = handle.readline()
            if not line or (self.complete_lines_only and not line.endswith(b"\n")):
                return
            self._recent += line
            self._recent_end = offset + len(line)
            if len(self._recent) > 2 * RECENT_BYTES:  # trimmed now and then: amortized O(1)
                del self._recent[: len(self._recent) - RECENT_BYTES]
            yield offset, line
            offset += len(line)

    def _decode(self, line: bytes, offset: int) -> str:
        """One raw line as text; RecordDecodeError naming the byte offset if it is not valid."""
        try:
            return line.decode(self.encoding)
        except UnicodeDecodeError as error:
            raise RecordDecodeError(self.path, offset, f"not {self.encoding}: {error}") from None


class LinesSource(ByteOffsetSource[str]):
    """The lines of a text file, without their line endings; one record per line."""

    kind: ClassVar[str] = "lines"

    def __iter__(self) -> Iterator[str]:
        for offset, line in self._lines(self._offset):
            text = self._decode(line, offset)
            self._offset = offset + len(line)
            self._records += 1
            yield text.removesuffix("\n").removesuffix("\r")


class JsonLinesSource(ByteOffsetSource[Any]):
    """The values of a JSON Lines file, one per line; blank lines are skipped."""

    kind: ClassVar[str] = "jsonl"

    def __iter__(self) -> Iterator[Any]:
        for offset, line in self._lines(self._offset):
            text = self._decode(line, offset)
            if not text.strip():
                self._offset = offset + len(line)
                continue
            try:
                value = json.loads(text)
            except ValueError as error:
                raise RecordDecodeError(self.path, offset, f"invalid JSON: {error}") from None
            self._offset = offset + len(line)
            self._records += 1
            yield value


class CsvSource(ByteOffsetSource[dict[str, str]]):
    """The rows of a CSV file as dicts keyed by the header row (or by ``fieldnames``).

    Quoted fields may span lines; a row is resumed at the byte where it starts. On resume the
    header row is read again from the top of the file (one row), then the rest is skipped by
    seeking. Blank rows are skipped; a row with the wrong number of fields is an error.
    """

    kind: ClassVar[str] = "csv"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fieldnames: list[str] | None = None,
        encoding: str = "utf-8",
        complete_lines_only: bool = False,
        **fmtparams: Any,
    ) -> None:
        super().__init__(path, encoding=encoding, complete_lines_only=complete_lines_only)
        self.fmtparams = fmtparams
        self._given_fieldnames = fieldnames
        self.fieldnames: list[str] | None = fieldnames

    def _after_resume(self) -> None:
        """Read the header row again when resuming past it."""
        if self._given_fieldnames is not None or self._offset == 0:
            self.fieldnames = self._given_fieldnames
            return
        header = next((row for row in self._rows(0) if row[2]), None)  # blank rows skipped
        if header is None or header[1] > self._offset:
            raise InvalidPositionError(
                f"byte {self._offset} of {self.path} is inside its header row, not after it"
            )
        self.fieldnames = header[2]

    def __iter__(self) -> Iterator[dict[str, str]]:
        for start, end, row in self._rows(self._offset):
            if not row:
                self._offset = end
                continue
            if self.fieldnames is None:
                self.fieldnames = row
                self._offset = end
                continue
            if len(row) != len(self.fieldnames):
                raise RecordDecodeError(
                    self.path,
                    start,
                    f"the row has {len(row)} fields, the header {len(self.fieldnames)}",
                )
            self._offset = end
            self._records += 1
            yield dict(zip(self.fieldnames, row, strict=True))

    def _rows(self, start: int) -> Iterator[tuple[int, int, list[str]]]:
        """``(start offset, end offset, fields)`` of each CSV row from byte ``start``."""
        consumed = start
        ran_out = False

        def text_lines() -> Iterator[str]:
            nonlocal consumed, ran_out
            for offset, line in self._lines(start):
                text = self._decode(line, offset)
                consumed = offset + len(line)
                yield text
            ran_out = True

        reader = csv.reader(text_lines(), **self.fmtparams)
        while True:
            row_start = consumed
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                raise RecordDecodeError(self.path, row_start, f"invalid CSV: {error}") from None
            if ran_out and self.complete_lines_only:
                return
            yield row_start, consumed, row
