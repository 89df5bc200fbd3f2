"""Token buckets for connection and publish rates.

A bucket holds up to ``burst`` tokens and refills at ``rate`` per second. ``take``
spends tokens and may go into debt; ``wait_s`` says how long until the debt is repaid,
so a caller can pause (publishers) instead of dropping anything.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    __slots__ = ("_stamp", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be positive")
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._stamp = now

    def _refill(self, now: float) -> None:
        elapsed = now - self._stamp
        if elapsed > 0:
            self._tokens = min(self.burst, self._tokens + elapsed * self.rate)
            self._stamp = now

    def try_take(self, now: float, n: float = 1.0) -> bool:
        """Takes ``n`` tokens if there are that many; never goes into debt."""
        self._refill(now)
        if self._tokens >= n:
            self._tokens -= n
            return True
        return False

    def take(self, now: float, n: float = 1.0) -> float:
        """Takes ``n`` tokens, going into debt if needed; returns the seconds to wait."""
        self._refill(now)
        self._tokens -= n
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate
