"""The exit codes of the ``snapstore`` command, under the name docs/cli.md gives them.

Defined in ``snapstore.frontend.exitcodes``, which the services share (a JSON-RPC error
carries the exit code the command would end with); these are the same objects.
"""

from __future__ import annotations

from snapstore.frontend.exitcodes import ExitCode, exit_code_for

__all__ = ["ExitCode", "exit_code_for"]
