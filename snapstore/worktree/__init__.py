"""The work tree: the user's files a snapshot records. Walking a base directory (``scan``)
under exclude rules (``excludes``), reading files whole and untorn into the repository
(``ingest``), remembering digests by stat (``statcache``), and the create pipeline that turns
a scan into a committed manifest (``create``)."""
