"""snapstore as a long-running service for bridges written in other languages.

``snapstore serve`` speaks JSON-RPC 2.0 over stdio (``server``), ``snapstore mcp`` the Model
Context Protocol (``mcp``, an optional extra), and ``watch`` follows a directory's changes
with inotify. ``shapes`` holds the JSON documents the command line's ``--json`` prints, which
the services return too.

This package's own import is empty on purpose: the command line imports ``shapes`` for every
``--json`` run, and must not pay for the servers.
"""
