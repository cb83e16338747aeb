"""Fixtures of the concurrency suite."""

from helpers.scratch import scratch

__all__ = ["scratch"]
