"""Shared machinery of the reliability suites: seam wrappers, scenarios and the checker."""
