"""Sweep: delete expired snapshots, deciding from the manifests in the store as each session is
listed, never from one process's memory (a long-lived process never deletes a snapshot made
after it started). Sessions are swept one at a time, and a session's victims are deleted in
short steps, each holding only that session's lock for about ``STEP_SECONDS``, as many
deletions as fit at the pace measured so far (``pace``; at most ``STEP_ITEMS``): a sweep
never holds up commits into other sessions, and a commit into the session being swept waits
at most one step.

Each victim is deleted only in the version its header was read from. The decision, made from
the listing, stays right while the session changes: a commit adds a newer snapshot (the
victims are older still), a victim deleted or replaced since is left alone, and a snapshot
another process deletes meanwhile leaves the session as that deletion after this sweep
would have."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from time import monotonic

from snapstore.backend.seam import Handle, Kind
from snapstore.errors import ConcurrentWriteError, InvalidValueError, SweepRefusedError
from snapstore.maintenance.pace import Pace
from snapstore.models import SweepReport
from snapstore.repo.catalog import ManifestFile
from snapstore.repo.repository import Repository
from snapstore.repo.sessions import SessionChange, session_dir_of

STEP_SECONDS = 0.02
"""How long one hold of a session's lock deletes, about (at least one deletion)."""
STEP_ITEMS = 64
"""At most this many deletions per hold of a session's lock."""


def sweep(
    repo: Repository,
    *,
    ttl: float | None,
    keep_last: int | None,
    now_ns: int | None,
    dry_run: bool,
    allow_emptying: bool = True,
) -> SweepReport:
    """Delete (or, with ``dry_run``, list) what ``choose_victims`` picks, session by session
    in short holds of each session's lock (see the module docstring); report future-stamped
    snapshots too. Without ``allow_emptying``, a sweep whose ``ttl`` or ``keep_last`` would
    delete every file checkpoint of a session raises SweepRefusedError: checked across the
    store before anything is deleted, and again for each session as it is listed (a session
    that changed meanwhile stops the sweep there). A dry run only lists. ``now_ns`` None: now
    by the store's clock (``Backend.now_ns``: on object storage, the server's), read once as
    the sweep starts."""
    if ttl is not None and ttl < 0:
        raise InvalidValueError(f"ttl must not be negative, got {ttl}")
    if keep_last is not None and (isinstance(keep_last, bool) or keep_last < 0):
        raise InvalidValueError(f"keep_last must be a non-negative int, got {keep_last!r}")
    repo.check_writable("sweep")
    if now_ns is None:
        now_ns = repo.backend.now_ns()
    report = SweepReport()
    refusing = not (allow_emptying or dry_run) and (ttl is not None or keep_last is not None)
    if refusing:
        everything = repo.catalog.headers()
        _refuse_emptying(
            everything, choose_victims(everything, ttl=ttl, keep_last=keep_last, now_ns=now_ns)
        )
    swept: list[ManifestFile] = []
    pace = Pace(STEP_ITEMS, monotonic)
    session_dirs = sorted({session_dir_of(name) for name in repo.catalog.names()})
    for session_dir in session_dirs:
        found = repo.catalog.headers(session_dir=session_dir)
        report.future_stamped += future_stamped(found)
        victims = choose_victims(found, ttl=ttl, keep_last=keep_last, now_ns=now_ns)
        if refusing:
            _refuse_emptying(found, victims)
        if dry_run:
            swept += victims
            continue
        while victims:
            swept += _hold(repo, session_dir, victims, pace)
    swept.sort(key=_age_order)
    report.deleted = [(item.header.info.session, item.header.info.name) for item in swept]
    return report


def _hold(
    repo: Repository, session_dir: str, victims: list[ManifestFile], pace: Pace
) -> list[ManifestFile]:
    """One hold of the session's lock: delete victims from the front of ``victims`` while
    another fits in ``STEP_SECONDS`` (the clock read before each); those deleted. Each
    deletion is an unlink; the session's directory is flushed once as the hold ends, also
    when a deletion failed (the error is raised after it), so every deletion the hold made
    is durable before the lock goes (docs/concurrency.md, "Sweep in short holds")."""
    swept: list[ManifestFile] = []
    failed: BaseException | None = None
    with repo.sessions.changing_dir(session_dir) as change:
        deadline = monotonic() + STEP_SECONDS
        made = 0
        try:
            while victims and (not made or pace.fitting(deadline, made)):
                removing = monotonic()
                victim = victims.pop(0)
                made += 1
                if _remove(change, victim):
                    swept.append(victim)
                pace.took(1, monotonic() - removing)
        except BaseException as error:
            failed = error
            raise
        finally:
            if swept:
                _flush(repo, swept[0], failed)
    return swept


def _flush(repo: Repository, victim: ManifestFile, failed: BaseException | None) -> None:
    """Flush the session's directory of ``victim`` (a non-durable deletion never removes
    it: it is there). If the hold failed with ``failed``, that error is the one raised, and
    a failed flush is noted on it."""
    try:
        repo.backend.note_existing(Handle(Kind.MANIFEST, victim.name))
        repo.backend.flush()
    except OSError as error:
        if failed is None:
            raise
        failed.add_note(f"the deletions before it may not be durable either: {error}")


def _remove(change: SessionChange, victim: ManifestFile) -> bool:
    """Delete one victim, unless it went or was replaced since the session was listed (a
    replaced snapshot is a new one, which this sweep did not judge); its session's
    directory is flushed as the hold ends."""
    try:
        change.remove(victim.name, victim.header.info.name, victim.version, durable=False)
    except (FileNotFoundError, NotADirectoryError, ConcurrentWriteError):
        return False
    return True


def emptied_sessions(found: Iterable[ManifestFile], victims: list[ManifestFile]) -> list[str]:
    """The sessions all of whose file checkpoints are among ``victims``."""
    going = {(v.header.info.session, v.header.info.name) for v in victims}
    sessions: dict[str, bool] = {}
    for item in found:
        info = item.header.info
        if info.kind == "files" and not info.is_backup:
            kept = (info.session, info.name) not in going
            sessions[info.session] = sessions.get(info.session, False) or kept
    return sorted(session for session, any_kept in sessions.items() if not any_kept)


def _refuse_emptying(found: list[ManifestFile], victims: list[ManifestFile]) -> None:
    emptied = emptied_sessions(found, victims)
    if emptied:
        shown = ", ".join(repr(session) for session in emptied[:5])
        more = f" and {len(emptied) - 5} more" if len(emptied) > 5 else ""
        raise SweepRefusedError(
            f"this sweep would delete every file checkpoint of session{'s' * (len(emptied) > 1)} "
            f"{shown}{more}; nothing was deleted",
            emptied,
        )


def future_stamped(found: Iterable[ManifestFile]) -> list[tuple[str, str]]:
    """The (session, name) of manifests whose recorded time is well ahead of their file's."""
    return [
        (item.header.info.session, item.header.info.name)
        for item in found
        if item.header.ahead_ns > 0
    ]


def choose_victims(
    found: Iterable[ManifestFile], *, ttl: float | None, keep_last: int | None, now_ns: int
) -> list[ManifestFile]:
    """The manifests to delete: those past their own expiry, and file checkpoints that
    neither the TTL (created within ``ttl`` of now) nor ``keep_last`` (the N newest of their
    session) keeps. State snapshots go only by their own expiry, undo backups never (their
    retention is their own). The N newest are the N last committed (``Header.session_order``);
    ages go by ``Header.age_ns``. Oldest first."""
    by_session: dict[str, list[ManifestFile]] = defaultdict(list)
    victims: list[ManifestFile] = []
    for item in found:
        header = item.header
        expires_ns = header.effective_expires_ns
        if header.info.is_backup:
            continue
        if expires_ns is not None and expires_ns <= now_ns:
            victims.append(item)
        elif header.info.kind == "files":
            by_session[header.info.session].append(item)
    if ttl is None and keep_last is None:
        return sorted(victims, key=_age_order)
    for items in by_session.values():
        items.sort(key=lambda m: m.header.session_order, reverse=True)
        for rank, item in enumerate(items):
            kept_by_ttl = ttl is not None and now_ns - item.header.age_ns <= ttl * 1e9
            kept_by_count = keep_last is not None and rank < keep_last
            if not (kept_by_ttl or kept_by_count):
                victims.append(item)
    return sorted(victims, key=_age_order)


def _age_order(item: ManifestFile) -> tuple[int, str, int, str]:
    header = item.header
    return (header.age_ns, header.info.session, header.seq, header.info.name)
