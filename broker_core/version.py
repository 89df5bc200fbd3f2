"""The edgebus version the broker reports ($SYS, the API, /metrics)."""

from __future__ import annotations

__all__ = ["VERSION"]

VERSION = "0.1.0"
