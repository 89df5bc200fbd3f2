"""Errors of the benchmark harness.

    BenchError            a run could not be measured
    ├── BrokerError       a broker did not start, or died
    └── LoadError         a load-generator process failed (refused, closed, malformed)

A failed run is reported as such and the other runs go on; nothing here is raised for
a broker that is merely slow.
"""

from __future__ import annotations

__all__ = ["BenchError", "BrokerError", "LoadError"]


class BenchError(RuntimeError):
    """A run could not be measured."""


class BrokerError(BenchError):
    """A broker did not start, or died."""


class LoadError(BenchError):
    """A load-generator process failed: connection refused or closed, malformed stream."""
