"""Change tracking for a long-lived server: which paths under a base directory changed since
the last checkpoint, learnt from inotify instead of a scan.

A full scan of an unchanged 50,000-file tree costs about a second of ``lstat`` even with the
library's stat cache. A server that keeps watching the tree knows which paths changed, so an
incremental checkpoint only has to look at those. What a watch guarantees, and what the
library must do with it, is the contract of ``changes.Changes``.

A drain is ``full`` whenever there is any doubt: the kernel's event queue overflowed, a watch
could not be added (the ``fs.inotify.max_user_watches`` limit), the base directory was moved
or replaced, an exclude file (``.snapstoreignore``, a ``.gitignore``) changed, too many paths
changed to be worth tracking, the filesystem is not one whose changes all pass through this
kernel (NFS, FUSE, SMB...), or inotify is not available at all (not Linux, or the ``watch``
extra not installed). A directory that cannot be watched (permission denied) is rescanned
every time.

What inotify cannot see, this cannot either: writes through a shared memory mapping while
the mapping lasts (its release is seen, as IN_CLOSE_WRITE; the library's stat cache has the
same blind spot, and ``rehash`` reads everything), and writes through a hard link that lives
outside the watched directories. docs/protocol.md ("Watching") says so to clients.

A watched create is ``SnapStore.create_incremental``: the library drains the watch through
the ``changes`` callback once it holds the base directory's lock, builds on the checkpoint the
watch's previous create committed, and scans everything instead when the drain is ``full`` or
it has doubts of its own (``snapstore.worktree.incremental``).

The modules: ``inotify`` (the kernel interface), ``changes`` (the change set and how it is
gathered), ``directories`` (which directories carry a watch), ``tree`` (``TreeWatcher``: one
base directory followed), ``watchset`` (``WatchSet``: a server's watches and watched creates).
"""

from snapstore.service.watch.changes import Changes, apply_changes, entries_below
from snapstore.service.watch.inotify import watch_support
from snapstore.service.watch.tree import TreeWatcher
from snapstore.service.watch.watchset import IncrementalCreate, WatchSet, library_create

__all__ = [
    "Changes",
    "IncrementalCreate",
    "TreeWatcher",
    "WatchSet",
    "apply_changes",
    "entries_below",
    "library_create",
    "watch_support",
]
