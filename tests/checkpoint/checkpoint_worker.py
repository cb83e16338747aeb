"""A pipeline process for the crash tests: copies the lines of a file to an output, resumably.

Usage: checkpoint_worker.py ROOT KEY INPUT OUTPUT EVERY [DELAY_SECONDS]
Each record is "done" once it is appended to OUTPUT (one write with O_APPEND, which survives
SIGKILL because it is in the kernel before the next record starts).
"""

from __future__ import annotations

import os
import sys
import time

from snapstore.checkpoint import Checkpointer, FileCheckpointStore, LinesSource


def main(argv: list[str]) -> int:
    """Run the pipeline once, from the saved position to the end of INPUT."""
    root, key, source_path, output_path, every = argv[:5]
    delay = float(argv[5]) if len(argv) > 5 else 0.0
    store = FileCheckpointStore(root)
    checkpointer = Checkpointer(store, key, every=int(every))
    output = os.open(output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for line in checkpointer.iterate(LinesSource(source_path)):
            os.write(output, f"{line}\n".encode())
            if delay:
                time.sleep(delay)
    finally:
        os.close(output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
