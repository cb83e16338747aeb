"""Fixtures of the faults suite."""

from helpers.pacing import steps_by_count
from helpers.scratch import scratch

__all__ = ["scratch", "steps_by_count"]
