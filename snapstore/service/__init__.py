"""snapstore as a long-running service for bridges written in other languages.

``snapstore serve`` speaks JSON-RPC 2.0 over stdio (``server``), ``snapstore mcp`` the Model
Context Protocol (``mcp``, an optional extra), and ``watch`` follows a directory's changes
with inotify. The JSON documents it returns, and the exit codes its errors carry, are the
command line's too: both take them from ``snapstore.frontend``, and this package imports
nothing of the command line.
"""
