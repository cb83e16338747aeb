"""Successive indexes of an appendable pack share one append-only table: each version shows
exactly the segments it was made of (whatever was appended since, by whichever thread), a
digest stored twice keeps its first place, and a merge costs what the new segment holds,
not the pack's size."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from snapstore.format.packfile import Block, PackIndex
from snapstore.format.packversions import PackTable, VersionEntries
from snapstore.format.segments import FIRST_SEGMENT, Segment, merge

PACK = "a" * 32


def _digest(number: int) -> bytes:
    return number.to_bytes(4, "big") * 8


def _segment(start: int, digests: list[bytes], blocks: int = 2) -> Segment:
    """A segment at ``start`` of ``blocks`` blocks (100 bytes each), its ``digests`` spread
    over them."""
    placed = tuple(Block(start + 10 + 100 * n, 90, 200, 0, 0) for n in range(blocks))
    entries = {digest: (n % blocks, 4 + 8 * n, 4) for n, digest in enumerate(digests)}
    end = start + 100 * blocks + 50
    return Segment(start, end, PackIndex(PACK, end - 50, entries, placed))


def _chain(count: int, per_segment: int = 3) -> Iterator[tuple[PackIndex, set[bytes]]]:
    """Each version of a pack of ``count`` segments of fresh digests, with what it holds."""
    index: PackIndex | None = None
    start, held = FIRST_SEGMENT, set()
    for number in range(count):
        digests = [_digest(number * per_segment + k) for k in range(per_segment)]
        segment = _segment(start, digests)
        index, _ = merge(PACK, index, [segment])
        held |= set(digests)
        start = segment.end
        yield index, set(held)


def test_a_version_never_shows_what_was_appended_after_it() -> None:
    versions = list(_chain(5))
    for index, held in versions:
        assert set(index.entries) == held and len(index.entries) == len(held)
        assert len(index.blocks) == 2 * index.segments
        assert list(index.blocks)[-1] == index.blocks[len(index.blocks) - 1]
        later = _digest(len(held))  # the first digest of the next segment
        assert later not in index.entries and index.entries.get(later) is None
        with pytest.raises(KeyError):
            index.entries[later]
        with pytest.raises(IndexError):
            index.blocks[len(index.blocks)]
    first, last = versions[0][0], versions[-1][0]
    assert isinstance(first.entries, VersionEntries) and isinstance(last.entries, VersionEntries)
    assert first.entries.table is last.entries.table  # one table, five versions
    assert first.entries == {d: last.entries[d] for d in versions[0][1]}
    assert first.total_bytes == 4 * 3


def test_a_digest_stored_twice_keeps_its_first_place() -> None:
    one, two, three = _digest(1), _digest(2), _digest(3)
    first = _segment(FIRST_SEGMENT, [one, two])
    again = _segment(first.end, [two, three])
    once, _ = merge(PACK, None, [first])
    both, held = merge(PACK, once, [again])
    assert held == [two, three]  # returned all the same: a map may have lost it
    assert both.entries[two] == once.entries[two] == first.index.entries[two]
    assert both.entries[three][0] == 2 + again.index.entries[three][0]
    assert list(both.entries) == [one, two, three] and len(both.entries) == 3
    together, _ = merge(PACK, None, [first, again])  # within one merge too
    assert dict(together.entries) == dict(both.entries)


def test_a_merge_costs_what_the_new_segment_holds_not_the_packs_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copied: list[int] = []
    original = PackTable.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[PackTable], entries: object, blocks: object) -> VersionEntries:
        copied.append(len(entries))  # type: ignore[arg-type]
        return original(cls, entries, blocks)  # type: ignore[no-any-return]

    monkeypatch.setattr(PackTable, "of", classmethod(counted))
    for size in (2, 400):
        *_, (index, _) = _chain(size)
        assert len(index.entries) == 3 * size
    assert copied == []  # no version was copied, whatever the pack's size


def test_a_merge_onto_an_older_version_leaves_the_newer_one_alone() -> None:
    one, two, three = _digest(1), _digest(2), _digest(3)
    first = _segment(FIRST_SEGMENT, [one])
    base, _ = merge(PACK, None, [first])
    newer, _ = merge(PACK, base, [_segment(first.end, [two])])
    other, _ = merge(PACK, base, [_segment(first.end, [three], blocks=1)])  # not the tip
    assert set(newer.entries) == {one, two} and len(newer.blocks) == 4
    assert set(other.entries) == {one, three} and len(other.blocks) == 3
    assert set(base.entries) == {one} and len(base.blocks) == 2
    assert other.entries[three][0] == 2


def test_a_plain_index_is_merged_into_a_table_of_its_own() -> None:
    first = _segment(FIRST_SEGMENT, [_digest(1)])
    plain = first.index._replace(pack_size=first.end, segments=1)
    merged, _ = merge(PACK, plain, [_segment(first.end, [_digest(2)])])
    assert set(merged.entries) == {_digest(1), _digest(2)}
    assert set(plain.entries) == {_digest(1)} and type(plain.entries) is dict


def test_readers_of_older_versions_while_a_thread_appends() -> None:
    """Threads iterate and look up older versions while another merges segments into the
    same table: each sees exactly its version, and no iteration fails on the appends."""
    versions = list(_chain(3))
    published = list(versions)
    done = threading.Event()
    failures: list[str] = []

    def append() -> None:
        index, held = versions[-1]
        start = index.pack_size
        for number in range(3, 1500):
            digests = [_digest(number * 3 + k) for k in range(3)]
            segment = _segment(start, digests)
            index, _ = merge(PACK, index, [segment])
            held = held | set(digests)
            start = segment.end
            published.append((index, held))
        done.set()

    def read() -> None:
        try:
            check()
        except Exception as error:  # a thread's exception must fail the test
            failures.append(repr(error))

    def check() -> None:
        rounds = 0
        while not done.is_set() or rounds < 3:
            rounds += 1
            for index, held in list(published[:: max(1, len(published) // 20)]):
                seen = [digest for digest in index.entries if digest in index.entries]
                if set(seen) != held or len(seen) != len(held):
                    failures.append(f"a version of {len(held)} entries showed {len(seen)}")
                if sum(1 for _ in index.entries.items()) != len(index.entries):
                    failures.append("items and len disagree")
                if len(list(index.blocks)) != 2 * index.segments:
                    failures.append("blocks past the version's count")

    readers = [threading.Thread(target=read) for _ in range(3)]
    writer = threading.Thread(target=append)
    for thread in [*readers, writer]:
        thread.start()
    for thread in [writer, *readers]:
        thread.join()
    assert failures == []


class _Interrupted(dict[bytes, tuple[int, int, int]]):
    """A segment's entries whose walk fails after the first one (as a MemoryError or an
    interrupt half-way through a merge would)."""

    def items(self) -> Iterator[tuple[bytes, tuple[int, int, int]]]:  # type: ignore[override]
        walked = iter(dict(self).items())
        yield next(walked)
        raise MemoryError("injected half-way through a merge")


def test_a_merge_interrupted_half_way_leaves_every_version_as_it_was() -> None:
    versions = list(_chain(2))
    newest, held = versions[-1]
    start = newest.pack_size
    torn = _segment(start, [_digest(100), _digest(101)])
    stray = Segment(
        torn.start, torn.end, torn.index._replace(entries=_Interrupted(torn.index.entries))
    )
    with pytest.raises(MemoryError):
        merge(PACK, newest, [stray])
    for index, before in versions:  # the stray entry names a block past every version
        assert set(index.entries) == before and _digest(100) not in index.entries
        assert len(index.blocks) == 2 * index.segments
    again, _ = merge(PACK, newest, [torn])  # the table's counts match no version: a copy
    assert set(again.entries) == held | {_digest(100), _digest(101)}
    assert again.entries[_digest(100)][0] >= len(newest.blocks)
    assert isinstance(again.entries, VersionEntries)
    assert isinstance(newest.entries, VersionEntries)
    assert again.entries.table is not newest.entries.table
    assert set(newest.entries) == held


def test_items_and_values_walk_only_the_versions_entries() -> None:
    versions = list(_chain(3))
    for index, held in versions:
        assert {digest for digest, _ in index.entries.items()} == held
        assert list(index.entries.values()) == [index.entries[d] for d in index.entries]
        assert dict(index.entries.items()) == {d: index.entries[d] for d in held}
