"""``RateLimit``: ``queue.rate_limit``, the messages per second a bridge sends to the
remote at most, as a token bucket of one second.

The forwarder asks ``allowance()`` before it sends (how many may go now: the bucket
refills at ``rate`` tokens a second, up to ``rate``), then ``spend(count)`` for what it
sent. When the bucket is empty a timer calls ``on_refill`` once a token is back, so
that the forwarder sends again. Without a rate nothing is counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["RateLimit"]


class RateLimit:
    """See the module docstring. Build it on the event loop."""

    def __init__(self, rate: float | None, on_refill: Callable[[], None]) -> None:
        self.rate = rate
        self.tokens = float(rate or 0)
        self.refilled = time.monotonic()
        self._on_refill = on_refill
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None

    def allowance(self) -> float:
        """How many messages may go now (infinite without a rate)."""
        rate = self.rate
        if rate is None:
            return float("inf")
        now = time.monotonic()
        self.tokens = min(rate, self.tokens + (now - self.refilled) * rate)
        self.refilled = now
        if self.tokens < 1 and self._timer is None:
            self._timer = self._loop.call_later((1 - self.tokens) / rate, self._refill)
        return int(self.tokens)

    def spend(self, count: int) -> None:
        """``count`` messages went."""
        if self.rate is not None:
            self.tokens -= count

    def _refill(self) -> None:
        self._timer = None
        self._on_refill()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
