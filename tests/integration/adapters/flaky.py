"""Adapters for supervision tests: they fail on purpose."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway.hub import HubClient

ATTEMPTS: dict[str, int] = {}


class FlakyAdapter:
    """Fails to start twice, then runs, publishes one message, and fails at run time once."""

    def __init__(self, config: Any) -> None:
        self.config = config

    async def run(self, hub: HubClient, ready: Callable[[], None]) -> None:
        n = ATTEMPTS[self.config.name] = ATTEMPTS.get(self.config.name, 0) + 1
        if n <= 2:
            raise ConnectionError(f"native side unreachable (attempt {n})")
        ready()
        hub.publish(hub.context(f"flaky/{n}", b"up", 1))
        if n == 3:
            await asyncio.sleep(0.1)
            raise RuntimeError("native side crashed")
        await asyncio.Event().wait()
