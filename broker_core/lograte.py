"""Log lines a client can cause, at a bounded rate.

A client refused again and again (an ACL-denied subscription in a loop) must not flood
the log: ``RateLimitedLog`` writes at most ``burst`` lines at once and ``rate`` lines a
second after that, and the next line written says how many were left out meanwhile.
"""

from __future__ import annotations

import logging

from broker_core.ratelimit import TokenBucket

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, rate: float = 1.0, burst: float = 20.0) -> None:
        self.logger = logger
        self._bucket: TokenBucket | None = None
        self._rate = rate
        self._burst = burst
        self.suppressed = 0

    def info(self, now: float, message: str, *args: object) -> None:
        self.log(logging.INFO, now, message, *args)

    def warning(self, now: float, message: str, *args: object) -> None:
        self.log(logging.WARNING, now, message, *args)

    def log(self, level: int, now: float, message: str, *args: object) -> None:
        if not self.logger.isEnabledFor(level):
            return
        bucket = self._bucket
        if bucket is None:
            bucket = self._bucket = TokenBucket(self._rate, self._burst, now)
        if not bucket.try_take(now):
            self.suppressed += 1
            return
        if self.suppressed:
            message += " (%d similar lines left out)"
            args = (*args, self.suppressed)
            self.suppressed = 0
        self.logger.log(level, message, *args)
