"""Replay a git repository's first-parent history as successive states of one work tree.

The source repository is only read: a private git directory borrows its objects (through
``objects/info/alternates``) and keeps its own index, so materializing never writes to the
user's repository. Its ``info/attributes`` unsets every attribute that would change bytes on
the way out (``text``, ``eol``, ``filter``, ``ident``, ``export-ignore``, ``export-subst``...),
so the work tree and ``git archive`` both hold exactly the blobs of each commit, whatever the
commit's own ``.gitattributes`` says.

A tree's content is compared as a *fingerprint*: path -> (kind, executable bit, sha256 of the
content or of the link target), for regular files and symlinks. Empty directories (a
submodule is one in ``git archive`` and in the work tree; git itself cannot store one) are
compared separately and reported, not counted as a mismatch of the file set.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

NEUTRAL_ATTRIBUTES = (
    "* -text -eol -crlf -filter -ident -working-tree-encoding -export-ignore -export-subst\n"
)
Fingerprint = dict[str, tuple[str, bool, str]]


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> bytes:
    """Output of ``git args`` (failing loudly with git's message)."""
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout


def first_parent_commits(repo: Path, revisions: str | None, states: int | None) -> list[str]:
    """The commits of ``revisions`` (default ``HEAD``) in first-parent order, oldest first;
    only the last ``states`` of them if given."""
    args = ["rev-list", "--first-parent", "--reverse"]
    if states is not None:
        args.append(f"--max-count={states}")
    out = git(*args, revisions or "HEAD", "--", cwd=repo)
    commits = out.decode().split()
    if not commits:
        raise SystemExit(f"no commits in {revisions or 'HEAD'} of {repo}")
    return commits


def tree_fingerprint(base: Path) -> tuple[Fingerprint, set[str]]:
    """The fingerprint of the files under ``base`` and its empty directories."""
    found: Fingerprint = {}
    empty: set[str] = set()
    for directory, dirs, files in os.walk(base):
        relative_dir = os.path.relpath(directory, base)
        prefix = "" if relative_dir == "." else relative_dir + "/"
        if not dirs and not files and prefix:
            empty.add(prefix.rstrip("/"))
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(path).encode()
                found[prefix + name] = ("symlink", False, hashlib.sha256(target).hexdigest())
            elif stat.S_ISREG(info.st_mode):
                executable = bool(info.st_mode & stat.S_IXUSR)
                with open(path, "rb") as file:
                    digest = hashlib.file_digest(file, "sha256").hexdigest()
                found[prefix + name] = ("file", executable, digest)
            else:
                found[prefix + name] = ("special", False, "")
    return found, empty


def tar_fingerprint(data: bytes) -> tuple[Fingerprint, set[str]]:
    """The fingerprint of a tar archive's members and its empty directories."""
    found: Fingerprint = {}
    dirs: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive:
            name = member.name.rstrip("/")
            if member.isdir():
                dirs.add(name)
            elif member.issym():
                digest = hashlib.sha256(member.linkname.encode()).hexdigest()
                found[name] = ("symlink", False, digest)
            elif member.isfile():
                content = archive.extractfile(member)
                assert content is not None
                digest = hashlib.sha256(content.read()).hexdigest()
                found[name] = ("file", bool(member.mode & stat.S_IXUSR), digest)
            else:
                found[name] = ("special", False, "")
    parents = {os.path.dirname(path) for path in [*found, *dirs]}
    return found, {d for d in dirs if d not in parents}


def differences(expected: Fingerprint, actual: Fingerprint, limit: int = 5) -> list[str]:
    """What differs between two fingerprints, as at most ``limit`` readable lines (and a count
    of the rest)."""
    problems = [f"missing {path}" for path in sorted(expected.keys() - actual.keys())]
    problems += [f"unexpected {path}" for path in sorted(actual.keys() - expected.keys())]
    for path in sorted(expected.keys() & actual.keys()):
        want, got = expected[path], actual[path]
        if want[0] != got[0]:
            problems.append(f"{path}: {got[0]} instead of {want[0]}")
        elif want[2] != got[2]:
            problems.append(f"{path}: content differs")
        elif want[1] != got[1]:
            problems.append(f"{path}: executable bit {got[1]} instead of {want[1]}")
    if len(problems) > limit:
        problems = [*problems[:limit], f"... and {len(problems) - limit} more"]
    return problems


@dataclass
class Verdict:
    """The outcome of comparing a directory with ``git archive`` of a commit."""

    problems: list[str]
    empty_dirs_missing: list[str] = field(default_factory=list)
    empty_dirs_unexpected: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class Replay:
    """Materializes commits of ``repo`` in place in ``tree``, one after another, and checks
    directories against ``git archive`` of a commit."""

    def __init__(self, repo: Path, private: Path, tree: Path) -> None:
        self.repo, self.tree = repo.resolve(), tree
        self.git_dir = private / "replay.git"
        objects = git("rev-parse", "--path-format=absolute", "--git-path", "objects", cwd=repo)
        git("init", "-q", "--bare", str(self.git_dir))
        git("--git-dir", str(self.git_dir), "config", "core.bare", "false")
        (self.git_dir / "objects" / "info" / "alternates").write_bytes(objects.strip() + b"\n")
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
        (self.git_dir / "info" / "exclude").write_text("")
        tree.mkdir(parents=True, exist_ok=True)
        self._expected: dict[str, tuple[Fingerprint, set[str]]] = {}

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            GIT_DIR=str(self.git_dir),
            GIT_WORK_TREE=str(self.tree),
            GIT_INDEX_FILE=str(self.git_dir / "index"),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
        )
        return env

    def materialize(self, commit: str) -> None:
        """Make the work tree hold exactly ``commit``'s files: changed files are rewritten in
        place, removed ones deleted (with directories left empty), unchanged ones untouched.
        Checked against the commit's listing; a difference is an error."""
        git("read-tree", "--reset", "-u", commit, env=self._env())
        listing = git("ls-tree", "-r", "-z", "--full-tree", commit, env=self._env())
        wanted: dict[str, str] = {}
        for record in listing.split(b"\0"):
            if record:
                meta, name = record.split(b"\t", 1)
                wanted[os.fsdecode(name)] = meta.split()[0].decode()
        actual, empty = tree_fingerprint(self.tree)
        gitlinks = {path for path, mode in wanted.items() if mode == "160000"}
        problems = sorted(actual.keys() ^ (wanted.keys() - gitlinks))
        problems += sorted(empty - gitlinks)
        for path, (kind, executable, _) in actual.items():
            mode = wanted.get(path)
            expected = {"120000": ("symlink", False), "100755": ("file", True)}
            if mode is not None and expected.get(mode, ("file", False)) != (kind, executable):
                problems.append(f"{path}: mode {mode} but {kind}, executable={executable}")
        if problems:
            raise RuntimeError(f"work tree does not match {commit}: {problems[:5]}")

    def stats(self) -> tuple[int, int]:
        """Files and bytes in the work tree now."""
        count = total = 0
        for directory, _, files in os.walk(self.tree):
            for name in files:
                count += 1
                total += os.lstat(os.path.join(directory, name)).st_size
        return count, total

    def expected(self, commit: str) -> tuple[Fingerprint, set[str]]:
        """Fingerprint and empty directories of ``git archive commit`` (cached)."""
        if commit not in self._expected:
            archive = git("archive", "--format=tar", commit, env=self._env())
            self._expected[commit] = tar_fingerprint(archive)
        return self._expected[commit]

    def verify(self, commit: str, directory: Path) -> Verdict:
        """Compare ``directory`` with ``git archive commit``: file set, contents, symlink
        targets and executable bits must match; empty directories are only reported."""
        want, want_empty = self.expected(commit)
        got, got_empty = tree_fingerprint(directory)
        return Verdict(
            differences(want, got),
            sorted(want_empty - got_empty),
            sorted(got_empty - want_empty),
        )


def spread(count: int, chosen: int) -> list[int]:
    """``chosen`` indexes out of ``range(count)``, evenly spread, first and last included."""
    chosen = min(chosen, count)
    if chosen <= 1:
        return [count - 1] if chosen == 1 else []
    return sorted({round(i * (count - 1) / (chosen - 1)) for i in range(chosen)})


def disk_usage(paths: Iterable[Path]) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) under ``paths`` as ``du -b`` and ``du -B1`` count
    them: every file and directory once, hard links once, links not followed."""
    apparent = allocated = 0
    seen: set[tuple[int, int]] = set()
    for base in paths:
        if not base.exists():
            continue
        for directory, dirs, files in os.walk(base):
            for name in [".", *files, *dirs]:
                info = os.lstat(os.path.join(directory, name))
                if name in dirs and stat.S_ISDIR(info.st_mode):
                    continue
                key = (info.st_dev, info.st_ino)
                if key in seen:
                    continue
                seen.add(key)
                apparent += info.st_size
                allocated += info.st_blocks * 512
    return apparent, allocated
