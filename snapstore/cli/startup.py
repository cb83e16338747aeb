"""The cyclic garbage collector paused while the command line starts.

Starting a command imports click, the command's module and the library: tens of thousands of
objects (modules, classes, functions) that live until the process ends. Each of them counts
towards the collector's next pass, so a ``snapstore create`` ran about 40 young and 4
middle-generation collections, most of them while it started, finding nothing to free.
``main`` pauses the collector before it imports anything, and the top-level group resumes it
once the command is found (its module imported), before the command itself starts: what a
command allocates is collected as usual, and a server runs with the collector on.
"""

from __future__ import annotations

import gc

_paused_here = False


def pause_collector() -> None:
    """Pause the cyclic collector, unless something else already did."""
    global _paused_here
    if gc.isenabled():
        gc.disable()
        _paused_here = True


def resume_collector() -> None:
    """Resume the collector if ``pause_collector`` paused it (else leave it as it is). What
    start-up allocated is frozen first (``gc.freeze``: no pass looks at it again), or the first
    young-generation pass would walk all of it."""
    global _paused_here
    if _paused_here:
        _paused_here = False
        gc.freeze()
        gc.enable()
