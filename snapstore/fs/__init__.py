"""The filesystem underneath, shared by the repository and the work tree: the seam every
mutating call goes through (``seam``: tests fail, kill or record there), atomic durable writes
(``durable``), and reading files that may be hostile (``reading``)."""
