"""The repository: where a store's bytes live and how they are committed. Blobs (loose and
packed), manifests by (session, name), the caches, the journals of restores in progress and the
locks, all over one storage backend (``backend``): the local POSIX directory (``local``), an
S3-compatible bucket shared by several hosts (``s3``), or memory (``memory``, for tests).
Nothing outside this package knows a path of the layout."""
