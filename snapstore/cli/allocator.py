"""Letting a one-shot command keep the memory it frees, instead of handing it back to the
kernel and faulting it in again for the next file.

A create streams a tree's bytes through buffers of up to a few MiB (each file read, the 1 MiB
blocks they join into, each block's compressed copy). glibc's malloc serves buffers of 128 KiB
and more with ``mmap`` (a threshold it raises as it sees them freed) and gives the top of its
heap back once more than twice that is free, so buffer after buffer came back as fresh pages:
each first touch is a page fault that clears a page. A first snapshot of the medium tree of
``bench/run.py`` (60 MB) made about 21,500 page faults. With ``mmap`` kept for buffers over
``MMAP_THRESHOLD_BYTES`` and the heap's top trimmed only past ``TRIM_THRESHOLD_BYTES``, freed
buffers are reused as they are: about 9,000 faults (4,000 of them the imports'), and about
5% less CPU (docs/performance.md, "The first snapshot through the command line").

The memory a process holds is still what its peak use was (a freed buffer is reused, not added
to); only a one-shot command, whose memory the kernel takes back at exit, asks for this. A
long-running server keeps glibc's defaults. Where the C library has no ``mallopt`` (musl,
macOS), nothing changes.
"""

from __future__ import annotations

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
"""glibc's largest allowed mmap threshold (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit)."""
TRIM_THRESHOLD_BYTES = 128 << 20


def keep_freed_memory() -> bool:
    """Ask the C library to reuse freed buffers rather than return them to the kernel
    (see the module's docstring); True if it agreed."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
