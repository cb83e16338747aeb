"""The vocabulary every front end shares: the JSON documents API results are shown as
(``shapes``), the exit code each error ends a command with (``exitcodes``), and readable
sizes and ages (``words``).

The command line (``cli``), the services (``service``), the web page (``ui``) and the
resume checkpoints' tools import it; it imports none of them, so no front end imports
another to speak the same language. Pure code over the library's models: no click, no I/O.
"""
