"""Unified diffs of file contents: per-file hunks as data, and as the text ``git diff`` prints.

Pure code, no I/O: ``file_patch`` compares two versions of one file (bytes, or None where the
file does not exist), and ``PatchBuilder`` gathers the patches of many files within a total
size, marking where it stopped. ``snapstore.compare`` reads the versions from snapshots and
directories; ``SnapStore.patch`` is the public entry point. A file is binary, as git decides,
when a NUL byte appears in its first 8 KiB; binary files are named, never diffed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

BINARY_PROBE_BYTES = 8 << 10
"""How much of a file is looked at for a NUL byte (binary) — the first 8 KiB, as git does."""

DEFAULT_CONTEXT = 3
DEFAULT_MAX_BYTES = 1 << 20
"""The default bound on a patch's text (1 MiB): what goes beyond is left out and marked."""

DEFAULT_MAX_FILE_BYTES = 8 << 20
"""Files larger than this (8 MiB) on either side are named as too large, not diffed."""

EXACT_MATCH_LINES = 2000
"""Up to this many lines (both versions together) the hunks are the smallest difflib finds;
beyond, lines that make up more than 1% of the new version do not anchor a match (difflib's
``autojunk``), which keeps large files of repeated lines from taking minutes."""

Change = Literal["added", "modified", "removed"]


def is_binary(head: bytes) -> bool:
    """Whether content starting with ``head`` is binary: a NUL byte in its first 8 KiB."""
    return b"\x00" in head[:BINARY_PROBE_BYTES]


@dataclass
class Hunk:
    """One hunk: where it starts in each version (1-based lines), how many lines it spans in
    each, and its lines, each starting with ``" "`` (context), ``"-"`` or ``"+"``."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[str] = field(default_factory=list)

    @property
    def header(self) -> str:
        """The ``@@ -a,b +c,d @@`` line."""
        return (
            f"@@ -{_range(self.old_start, self.old_lines)} "
            f"+{_range(self.new_start, self.new_lines)} @@"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "old_start": self.old_start,
            "old_lines": self.old_lines,
            "new_start": self.new_start,
            "new_lines": self.new_lines,
            "lines": list(self.lines),
        }


def _range(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start},{count}"


@dataclass
class FilePatch:
    """How one file changed: ``added`` (no old version), ``removed`` (no new version) or
    ``modified``, and its hunks. ``binary`` files and files over the size bound
    (``too_large``) have no hunks; ``note`` says why in words. ``truncated``: the patch's
    total size bound cut this file's hunks (some, or all, are left out)."""

    path: str
    change: Change
    binary: bool = False
    too_large: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    old_size: int | None = None
    new_size: int | None = None
    note: str | None = None
    truncated: bool = False

    @property
    def additions(self) -> int:
        """Lines added (counted over the hunks kept)."""
        return sum(1 for hunk in self.hunks for line in hunk.lines if line.startswith("+"))

    @property
    def deletions(self) -> int:
        """Lines removed (counted over the hunks kept)."""
        return sum(1 for hunk in self.hunks for line in hunk.lines if line.startswith("-"))

    def header_lines(self) -> list[str]:
        """The ``diff``, ``---`` and ``+++`` lines git prints before the hunks."""
        old = "/dev/null" if self.change == "added" else f"a/{self.path}"
        new = "/dev/null" if self.change == "removed" else f"b/{self.path}"
        lines = [f"diff --git a/{self.path} b/{self.path}"]
        if self.change == "added":
            lines.append("new file")
        elif self.change == "removed":
            lines.append("deleted file")
        if self.binary or self.too_large:
            lines.append(f"{'Binary' if self.binary else 'Large'} files {old} and {new} differ")
            if self.note:
                lines.append(f"# {self.note}")
            return lines
        if self.note:
            lines.append(f"# {self.note}")
        if self.hunks:
            lines += [f"--- {old}", f"+++ {new}"]
        return lines

    def text_lines(self) -> list[str]:
        """The file's part of the unified diff, line by line."""
        lines = self.header_lines()
        for hunk in self.hunks:
            lines.append(hunk.header)
            lines += hunk.lines
        return lines

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.text_lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "change": self.change,
            "binary": self.binary,
            "too_large": self.too_large,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "additions": self.additions,
            "deletions": self.deletions,
            "note": self.note,
            "truncated": self.truncated,
            "hunks": [hunk.to_dict() for hunk in self.hunks],
        }


@dataclass
class Patch:
    """The patches of several files, in path order, within a size bound: ``truncated`` says
    the bound was reached, and ``omitted`` names the changed files left out entirely."""

    files: list[FilePatch] = field(default_factory=list)
    truncated: bool = False
    omitted: list[str] = field(default_factory=list)
    max_bytes: int | None = None

    @property
    def text(self) -> str:
        """The unified diff, ending with a marker line where the size bound cut it."""
        text = "".join(file.text for file in self.files)
        if self.truncated:
            text += self.truncation_marker() + "\n"
        return text

    def truncation_marker(self) -> str:
        """The line that says where and why the patch stops."""
        cut = [file.path for file in self.files if file.truncated]
        parts = [f"[patch truncated at {self.max_bytes} bytes"]
        if cut:
            parts.append(f"; hunks left out of {', '.join(cut)}")
        if self.omitted:
            parts.append(f"; {len(self.omitted)} more changed files not shown")
        parts.append(": ask for fewer paths or a larger bound]")
        return "".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [file.to_dict() for file in self.files],
            "truncated": self.truncated,
            "omitted": list(self.omitted),
            "text": self.text,
        }


def _split_lines(data: bytes) -> tuple[list[str], bool]:
    """The lines of text ``data`` (decoded as UTF-8, odd bytes replaced), and whether the
    last one ended without a newline."""
    text = data.decode("utf-8", errors="replace")
    return text.splitlines(), bool(text) and not text.endswith(("\n", "\r"))


def _hunks(old: Sequence[str], new: Sequence[str], context: int) -> list[Hunk]:
    import difflib  # deferred: only a diff needs it, not the creates and restores

    exact = len(old) + len(new) <= EXACT_MATCH_LINES
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=not exact)
    hunks = []
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        old_from, old_to, new_from, new_to = first[1], last[2], first[3], last[4]
        hunk = Hunk(
            old_start=old_from + 1 if old_to > old_from else old_from,
            old_lines=old_to - old_from,
            new_start=new_from + 1 if new_to > new_from else new_from,
            new_lines=new_to - new_from,
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                hunk.lines += [" " + line for line in old[i1:i2]]
                continue
            hunk.lines += ["-" + line for line in old[i1:i2]]
            hunk.lines += ["+" + line for line in new[j1:j2]]
        hunks.append(hunk)
    return hunks


def file_patch(
    path: str,
    old: bytes | None,
    new: bytes | None,
    *,
    context: int = DEFAULT_CONTEXT,
    old_size: int | None = None,
    new_size: int | None = None,
    note: str | None = None,
) -> FilePatch:
    """The patch of one file from ``old`` to ``new`` (None: that version does not exist).
    Either side may be given as too large to read by passing its size alone (``old_size`` or
    ``new_size`` with the content None)."""
    change: Change = "modified"
    if old is None and old_size is None:
        change = "added"
    elif new is None and new_size is None:
        change = "removed"
    patch = FilePatch(
        path,
        change,
        note=note,
        old_size=len(old) if old is not None else old_size,
        new_size=len(new) if new is not None else new_size,
    )
    if (old is None and old_size is not None) or (new is None and new_size is not None):
        patch.too_large = True
        patch.note = note or f"larger than {DEFAULT_MAX_FILE_BYTES} bytes: not diffed"
        return patch
    if is_binary(old or b"") or is_binary(new or b""):
        patch.binary = True
        return patch
    old_lines, old_open = _split_lines(old or b"")
    new_lines, new_open = _split_lines(new or b"")
    if old_open and old_lines:
        old_lines[-1] += "\n\\ No newline at end of file"
    if new_open and new_lines:
        new_lines[-1] += "\n\\ No newline at end of file"
    patch.hunks = _hunks(old_lines, new_lines, context)
    return patch


def _text_bytes(lines: Iterable[str]) -> int:
    """How many bytes ``lines`` take in the patch text, each with its newline, as UTF-8 (a
    character outside ASCII takes up to 4 bytes; a lone surrogate from an undecodable file
    name is counted as the 3 bytes it takes, never refused)."""
    return sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in lines)


class PatchBuilder:
    """Gathers file patches in order, keeping the text within ``max_bytes`` of UTF-8 (None: no
    bound). A file whose hunks do not all fit keeps those that do and is marked
    ``truncated``; once the bound is reached, later files are only named in ``omitted``."""

    def __init__(self, max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        self.patch = Patch(max_bytes=max_bytes)
        self.used = 0

    @property
    def full(self) -> bool:
        """Whether the bound is reached (later files are only named)."""
        return self.patch.truncated

    def add(self, file: FilePatch) -> None:
        """Add one file's patch, or as much of it as fits."""
        if self.full:
            self.patch.omitted.append(file.path)
            return
        limit = self.patch.max_bytes
        head = _text_bytes(file.header_lines())
        if limit is not None and self.used + head > limit:
            self._stop(file)
            return
        self.used += head
        kept: list[Hunk] = []
        for hunk in file.hunks:
            size = _text_bytes((hunk.header, *hunk.lines))
            if limit is not None and self.used + size > limit:
                file.truncated = True
                self.patch.truncated = True
                break
            kept.append(hunk)
            self.used += size
        file.hunks = kept
        self.patch.files.append(file)

    def _stop(self, file: FilePatch) -> None:
        self.patch.truncated = True
        self.patch.omitted.append(file.path)

    def add_all(self, files: Iterable[FilePatch]) -> Patch:
        for file in files:
            self.add(file)
        return self.patch
