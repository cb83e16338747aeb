"""``snapstore ui``: a local web page over a store (the optional ``ui`` extra).

Sessions, each session's timeline, a checkpoint's changes as unified diffs, a file's history
and content at any checkpoint, undo backups; restore, undo and delete from the page. Built on
the public ``SnapStore`` API only. See docs/ui.md.
"""
