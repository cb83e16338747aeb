"""The ``SnapStore`` facade's methods, grouped by concern; ``snapstore.store`` assembles them.

``base`` opens a store and holds what every method shares (the repository, the restores and
the fold thread, all private); ``restoring`` restores, undoes and compares with a directory;
``upkeep`` deletes, sweeps, collects garbage, verifies and measures. Each method checks its
arguments, takes the locks docs/concurrency.md lists, and hands the work to the module that
owns it (docs/architecture.md). Import ``SnapStore`` from ``snapstore``, not from here.
"""
