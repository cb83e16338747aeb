"""The repository: how a store's bytes are organised and committed over one storage backend
(``snapstore.backend.seam``). Blobs (loose and packed), trees, manifests by (session, name),
session heads, the caches, the journals of restores in progress and the store-level locks.
It depends on the backend seam only, never on a concrete backend."""
