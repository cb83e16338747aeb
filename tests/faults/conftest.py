"""Fixtures of the faults suite."""

from helpers.scratch import scratch

__all__ = ["scratch"]
