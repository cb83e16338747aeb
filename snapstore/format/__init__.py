"""The on-disk format as pure code, no I/O: manifests, pack and index bytes, directory names
for raw session and snapshot names, and the rules for the relative paths a snapshot records.
docs/format.md is the specification this package implements."""
