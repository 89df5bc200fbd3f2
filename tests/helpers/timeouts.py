"""One timeout unit for every test, scaled by ``EDGEBUS_TEST_TIMEOUT_SCALE``.

Slow machines set ``EDGEBUS_TEST_TIMEOUT_SCALE=3``; tests write ``unit(2)`` instead of
``2.0`` so every wait in the suite stretches together.
"""

from __future__ import annotations

import os

__all__ = ["SCALE", "unit"]

SCALE = float(os.environ.get("EDGEBUS_TEST_TIMEOUT_SCALE", "1"))


def unit(n: float = 1.0) -> float:
    """``n`` timeout units, in seconds."""
    return n * SCALE
