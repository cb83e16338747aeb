"""Sweep: delete expired snapshots, deciding from the manifests in the store under the lock,
never from one process's memory (a long-lived process never deletes a snapshot made after it
started)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from snapstore.errors import InvalidValueError
from snapstore.models import SweepReport
from snapstore.repo.catalog import ManifestFile
from snapstore.repo.repository import Repository


def sweep(
    repo: Repository,
    *,
    ttl: float | None,
    keep_last: int | None,
    now_ns: int,
    dry_run: bool,
) -> SweepReport:
    """Delete (or, with ``dry_run``, list) what ``choose_victims`` picks, under the namespace
    lock; report future-stamped snapshots too."""
    if ttl is not None and ttl < 0:
        raise InvalidValueError(f"ttl must not be negative, got {ttl}")
    if keep_last is not None and (isinstance(keep_last, bool) or keep_last < 0):
        raise InvalidValueError(f"keep_last must be a non-negative int, got {keep_last!r}")
    report = SweepReport()
    with repo.namespace_lock.exclusive():
        found = repo.catalog.headers()
        report.future_stamped = future_stamped(found)
        for victim in choose_victims(found, ttl=ttl, keep_last=keep_last, now_ns=now_ns):
            if not dry_run:
                repo.catalog.remove(victim.name, victim.version)
            report.deleted.append((victim.header.info.session, victim.header.info.name))
    return report


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
    retention is their own). Ages go by ``Header.order_ns``. Oldest first."""
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
        items.sort(key=lambda m: (m.header.order_ns, m.header.info.name), reverse=True)
        for rank, item in enumerate(items):
            kept_by_ttl = ttl is not None and now_ns - item.header.order_ns <= ttl * 1e9
            kept_by_count = keep_last is not None and rank < keep_last
            if not (kept_by_ttl or kept_by_count):
                victims.append(item)
    return sorted(victims, key=_age_order)


def _age_order(item: ManifestFile) -> tuple[int, str, str]:
    return (item.header.order_ns, item.header.info.session, item.header.info.name)
