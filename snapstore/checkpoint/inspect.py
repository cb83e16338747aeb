"""An operator's view of a checkpoint: what the saved value means and what a resume will do."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from snapstore.checkpoint.identity import FileIdentity, check_path
from snapstore.checkpoint.persistence import Checkpoint, SaveTrigger, jsonable
from snapstore.checkpoint.sources import is_natural


@dataclass(frozen=True)
class SourceKind:
    """How a kind of source resumes: the documented row of the built-in sources table."""

    kind: str
    resume_key: str
    granularity: str
    guard: str
    resumes_by: str


_FILE_GUARD = (
    "file identity: same device and inode, size >= the saved size and offset, "
    "same 64 bytes before the offset"
)

BUILTIN_SOURCES: dict[str, SourceKind] = {
    "lines": SourceKind(
        "lines", "byte offset of the next line", "one line", _FILE_GUARD, "seek to the offset"
    ),
    "csv": SourceKind(
        "csv",
        "byte offset of the next row",
        "one row (a quoted field may span lines)",
        _FILE_GUARD,
        "read the header row again, then seek to the offset",
    ),
    "jsonl": SourceKind(
        "jsonl",
        "byte offset of the next line",
        "one JSON value (blank lines skipped)",
        _FILE_GUARD,
        "seek to the offset",
    ),
    "count": SourceKind(
        "count",
        "number of records already done",
        "one record",
        "none: the input must be the same on every run",
        "re-read the input and skip that many records",
    ),
}

_TRIGGERS: dict[SaveTrigger, str] = {
    "interval": "after a batch of `every` records, while the run was going",
    "end": "at the end of the stream: that run read everything there was",
    "stop": "when the run stopped early (break or error), after its last done record",
}


@dataclass(frozen=True)
class ResumePlan:
    """What a saved checkpoint means and what the next run will do with it."""

    key: str
    value: Any
    saved_at: datetime
    age_seconds: float
    source: str | None
    resume_key: str
    granularity: str
    guard: str
    every: int | None
    records_at_save: int | None
    saved_when: str
    identity: FileIdentity | None
    file_problem: str | None
    next_run: str
    reprocess: str
    reprocess_bound: int | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "key": self.key,
            "value": jsonable(self.value),
            "saved_at": self.saved_at.isoformat(),
            "age_seconds": round(self.age_seconds, 3),
            "source": self.source,
            "resume_key": self.resume_key,
            "granularity": self.granularity,
            "guard": self.guard,
            "every": self.every,
            "records_at_save": self.records_at_save,
            "saved_when": self.saved_when,
            "identity": None if self.identity is None else self.identity.to_dict(),
            "file_problem": self.file_problem,
            "next_run": self.next_run,
            "reprocess": self.reprocess,
            "reprocess_bound": self.reprocess_bound,
        }


def explain(checkpoint: Checkpoint, *, now: datetime | None = None) -> ResumePlan:
    """Explain ``checkpoint``, checking a guarded file as it is on disk now."""
    run = checkpoint.run
    kind = None if run is None else run.source
    description = BUILTIN_SOURCES.get(kind or "") or _other_source(checkpoint)
    problem, next_run = _next_run(checkpoint, description)
    every = None if run is None else run.every
    moment = now or datetime.now(UTC)
    return ResumePlan(
        key=checkpoint.key,
        value=checkpoint.value,
        saved_at=checkpoint.saved_at,
        age_seconds=(moment - checkpoint.saved_at).total_seconds(),
        source=kind,
        resume_key=description.resume_key,
        granularity=description.granularity,
        guard=description.guard,
        every=every,
        records_at_save=None if run is None else run.records,
        saved_when="directly, by store.save()" if run is None else _TRIGGERS[run.trigger],
        identity=checkpoint.identity,
        file_problem=problem,
        next_run=next_run,
        reprocess=_reprocess(every),
        reprocess_bound=None if every is None else every - 1,
    )


def plan_lines(plan: ResumePlan) -> list[str]:
    """The plan as labelled lines for a terminal."""
    lines = [
        f"checkpoint   {plan.key}",
        f"value        {json.dumps(jsonable(plan.value))}",
        f"saved at     {plan.saved_at.isoformat()} ({_age(plan.age_seconds)})",
        f"saved        {plan.saved_when}",
        f"source       {plan.source or 'unknown'}",
        f"resume key   {plan.resume_key}",
        f"granularity  {plan.granularity}",
        f"guard        {plan.guard}",
    ]
    if plan.every is not None:
        lines.append(
            f"every        {plan.every} records (the saving run had done {_records(plan)})"
        )
    if plan.identity is not None:
        identity = plan.identity
        lines.append(
            f"file         {identity.path} ({identity.size} bytes, device {identity.device} "
            f"inode {identity.inode} when saved)"
        )
    lines.append(f"next run     {plan.next_run}")
    lines.append(f"re-run       {plan.reprocess}")
    return lines


def _other_source(checkpoint: Checkpoint) -> SourceKind:
    """How a source that is not built in resumes, as far as the checkpoint tells."""
    guard = "file identity" if checkpoint.identity is not None else "none recorded"
    if checkpoint.run is None:
        return SourceKind(
            "direct",
            "the saved value itself (saved by store.save(), not by a Checkpointer)",
            "whatever its saver chose",
            guard,
            "the program loads the value and continues after it",
        )
    return SourceKind(
        checkpoint.run.source,
        "the value the source's position() returned",
        "one record",
        guard,
        "hand the value to the source's resume()",
    )


def _next_run(checkpoint: Checkpoint, description: SourceKind) -> tuple[str | None, str]:
    """The file problem (if any) and a sentence saying what the next run will do."""
    value, identity = checkpoint.value, checkpoint.identity
    offset = _offset(value)
    if identity is not None and offset is not None:
        status, problem = check_path(identity, offset)
        if problem is not None:
            return problem, (
                f"refuse to start with IdentityMismatchError: {identity.path}: {problem}; "
                "with on_mismatch=RESTART it starts over from the beginning of the file"
            )
        size = offset if status is None else status.st_size
        records = value.get("records", 0) if isinstance(value, dict) else 0
        prefix = "read the header row again, then " if description.kind == "csv" else ""
        if size == offset:
            return None, (
                f"{prefix}seek to byte {offset} of {identity.path} (after record {records}) and "
                f"find nothing new until the file grows: all {size} bytes were read"
            )
        return None, (
            f"{prefix}seek to byte {offset} of {identity.path} and read the {size - offset} "
            f"bytes not read yet, starting with record {records + 1}"
        )
    if offset is not None:
        return None, f"seek to byte {offset}, with no file identity to check"
    if description.kind == "count" and isinstance(value, int):
        return None, f"re-read the input, skip the first {value} records, start with {value + 1}"
    if description.kind == "direct":
        saved = json.dumps(jsonable(value))
        return None, f"load {saved} with load({checkpoint.key!r}) and continue after it"
    return (
        None,
        f"hand {json.dumps(jsonable(value))} to the source's resume() and continue after it",
    )


def _reprocess(every: int | None) -> str:
    """How many done records a crash after this save makes the next run process again."""
    if every is None:
        return "unknown: the saver did not record how often it saves"
    records = "none" if every == 1 else f"at most {every - 1} records"
    return (
        f"{records} done after this save (every={every}), if a run stopped without saving "
        "(crash, kill -9), plus the one in flight then; none are skipped (at-least-once)"
    )


def _offset(value: Any) -> int | None:
    """The byte offset of a file source's position, or None if ``value`` is not one (a
    natural ``offset`` and ``records``, as the file sources require)."""
    if isinstance(value, dict):
        offset, records = value.get("offset"), value.get("records", 0)
        if is_natural(offset) and is_natural(records):
            return offset
    return None


def _records(plan: ResumePlan) -> str:
    """The saving run's record count as words."""
    count = plan.records_at_save or 0
    return f"{count} record" + ("" if count == 1 else "s")


def _age(seconds: float) -> str:
    """A short age such as ``5s ago`` or ``3h ago``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{max(int(seconds), 0)}s ago"
