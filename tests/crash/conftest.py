"""Fixtures of the crash suite."""

from helpers.scratch import scratch

__all__ = ["scratch"]
