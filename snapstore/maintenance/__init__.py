"""Keeping a store small and sound: which snapshots a sweep deletes (``sweep``), blob and pack
garbage collection (``gc``, ``packgc``), and the checks of ``verify`` (``checks``)."""
