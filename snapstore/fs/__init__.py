"""The filesystem underneath, shared by the repository and the work tree: the seam every
mutating call goes through (``seam``: tests fail, kill or record there), atomic durable writes
(``durable``), reading files that may be hostile (``reading``), which file and version a stat
describes (``stamps``), and which filesystem holds a path (``mounts``)."""
