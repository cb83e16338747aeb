"""The journal of commits during a gc costs each step what was committed since the last one,
not every commit since gc started, nor a walk of every cache file of the store."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snapstore import SnapStore
from snapstore.backend.seam import Handle, Kind
from snapstore.internals import repository
from snapstore.maintenance import gcnoted
from snapstore.repo.gcjournal import NOTED_PREFIX
from snapstore.repo.trees import Marks


def test_each_look_reads_only_what_was_noted_since_the_last_one(root: Path) -> None:
    store = SnapStore(root, fold_threshold=0)
    repo = repository(store)
    journal = repo.sessions.gc_journal
    with journal.run_lock.exclusive():
        token = journal.start()
        for name in ("s/a", "s/b", "t/c"):
            journal.note(name)
        seen: set[str] = set()
        found = journal.noted(token, seen)
        assert sorted(name for _, name in found) == ["s/a", "s/b", "t/c"]
        for entry, _ in found:
            journal.consume(entry, seen)
        assert repo.backend.names(Kind.CACHE, NOTED_PREFIX) == []
        journal.note("s/d")
        assert [name for _, name in journal.noted(token, seen)] == ["s/d"]
        journal.clear()


def test_a_manifest_noted_but_not_yet_there_stays_noted_until_the_lock_is_held(
    root: Path, tmp_path: Path
) -> None:
    """gc marks most new commits before a step takes the lock. A commit notes its manifest
    before it writes it, so a noted manifest missing then may be on its way, and one found
    then may be the snapshot's previous version: every entry stays for the step, which
    marks it once the commit is done (consumed then, it would never be marked, and the blob
    it reuses could go). Under the lock, missing means failed."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "f.txt").write_text("x\n")
    store = SnapStore(root, fold_threshold=0)
    repo = repository(store)
    journal = repo.sessions.gc_journal
    with journal.run_lock.exclusive():
        commits = gcnoted.NewCommits(repo, journal.start())
        store.create("s", "n", ["f.txt"], base_dir=base)  # noted, and committed
        (name,) = repo.catalog.names()
        journal.note(name.replace("/", "/later-"))  # noted, not committed yet
        marks = Marks()
        assert commits.mark_ahead(marks, time.monotonic) is None
        assert marks.sizes  # the committed one is marked
        assert len(journal.noted(commits.token or "", commits.seen)) == 2  # both wait
        assert commits.settle(marks, time.monotonic, time.monotonic() + 60) == (True, None)
        commits.release()
        assert journal.noted(commits.token or "", commits.seen) == []
        assert repo.backend.names(Kind.CACHE, NOTED_PREFIX) == []  # removed after the hold
        journal.clear()


def test_a_look_walks_no_cache_directory_that_cannot_hold_an_entry(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache holds a file per session (heads) and more; the journal's entries lie at its
    top, and listing them walks none of its directories."""
    store = SnapStore(root, fold_threshold=0)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "f.txt").write_text("x\n")
    for session in ("a", "b", "c"):
        store.create(session, None, ["f.txt"], base_dir=tmp_path / "p")
    backend = repository(store).backend
    backend.write(Handle(Kind.CACHE, "nested/deeper/entry"), b"x", durable=False)
    walked: list[str] = []
    real_walk = os.walk

    def recording_walk(top: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for parent, directories, files in real_walk(top, *args, **kwargs):
            walked.append(os.path.relpath(parent, top))
            yield parent, directories, files

    monkeypatch.setattr(os, "walk", recording_walk)
    assert backend.names(Kind.CACHE, NOTED_PREFIX) == []
    assert walked == ["."]
    assert backend.names(Kind.CACHE, "nested/deeper/") == ["nested/deeper/entry"]
    assert "nested/deeper/entry" in backend.names(Kind.CACHE)
    assert any(name.startswith("heads/") for name in backend.names(Kind.CACHE))
