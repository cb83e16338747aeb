"""The work tree: the user's files a snapshot records. Walking a base directory (``scan``)
under exclude rules (``excludes``), reading files whole and untorn into the repository
(``ingest``), remembering digests by stat (``statcache``), the create pipeline that turns
a scan into a committed manifest (``create``), and the create that builds on the previous
checkpoint, scanning only what changed (``incremental``, with ``changes``, ``parentmemo`` and
``rescanplan``)."""
