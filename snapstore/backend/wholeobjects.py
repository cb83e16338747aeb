"""What a backend that writes every object whole says of appending: it offers no appendable
objects (``stage_appendable`` gives None). Object storage, memory and encrypted stores share
it."""

from __future__ import annotations

from snapstore.backend.seam import Kind, Properties


def cannot_append(properties: Properties) -> Properties:
    """``properties`` of a backend on top of another that must not offer appending (an
    encrypted store seals every object whole, even where the store below appends)."""
    return properties._replace(appends=False)


class WritesWhole:
    """The appending part of the seam, for a backend that cannot append."""

    def stage_appendable(self, kind: Kind) -> None:
        """None: objects are written whole."""
        return None
