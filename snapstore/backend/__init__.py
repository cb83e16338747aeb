"""Storage backends: the seam every store talks to (``seam``), and the places a store can
live (a local directory, process memory, an S3 bucket). Nothing above this package names a
concrete backend except ``opening``, which picks one from a store's root."""
