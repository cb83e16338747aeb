"""The repository: where a store's bytes live and how they are committed. Blobs (loose and
packed), manifests by (session, name), the caches, the journals of restores in progress and the
locks, all over one storage backend (``backend``): the local POSIX directory (``local``) or
memory (``memory``, for tests). Nothing outside this package knows a path of the layout."""
