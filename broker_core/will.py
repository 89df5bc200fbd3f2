"""Will messages and the will delay (MQTT 5.0 3.1.2.5, 3.1.3.2).

A will is published when a connection ends without a normal DISCONNECT, after its
Will Delay Interval or when the session ends, whichever is first [MQTT-3.1.3-9]; a
new connection with the same client id before then cancels it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from broker_core.context import Context, Origin
from broker_core.mqtt.packets import Will
from broker_core.mqtt.properties import EMPTY

__all__ = ["WillScheduler", "will_context"]


def will_context(will: Will, origin: Origin, now: float) -> Context:
    props = will.properties
    if props is not EMPTY and props.will_delay_interval is not None:
        props = replace(props, will_delay_interval=None)
    return Context(
        will.topic, will.payload, will.qos, will.retain, props, origin, received_at=int(now * 1e9)
    )


class WillScheduler:
    """Pending wills; the Context is built when the will is published, so its Message
    Expiry Interval starts then (MQTT 5.0 3.1.3.2.4)."""

    def __init__(self, publish: Callable[[Context], None]) -> None:
        self._publish = publish
        self._pending: dict[str, tuple[asyncio.TimerHandle, Will, Origin]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, client_id: str, will: Will, origin: Origin, delay_s: float) -> None:
        self.cancel(client_id)
        if delay_s <= 0:
            self._publish(will_context(will, origin, time.time()))
            return
        loop = asyncio.get_running_loop()
        handle = loop.call_later(delay_s, self._fire, client_id)
        self._pending[client_id] = (handle, will, origin)

    def cancel(self, client_id: str) -> None:
        entry = self._pending.pop(client_id, None)
        if entry is not None:
            entry[0].cancel()

    def fire_now(self, client_id: str) -> None:
        """The session ended before the delay: publish the will at once."""
        if client_id in self._pending:
            self._pending[client_id][0].cancel()
            self._fire(client_id)

    def _fire(self, client_id: str) -> None:
        entry = self._pending.pop(client_id, None)
        if entry is not None:
            _, will, origin = entry
            self._publish(will_context(will, origin, time.time()))
