"""``Context``: the one message envelope every part of edgebus passes around.

Created once where a message enters (an MQTT PUBLISH, an adapter's native message, a
bridge, a rule, the API) and shared by reference after that: hooks, rules, the router,
session queues, bridges and the stream log all hold the same object, so the payload is
never copied between stages. Change one only with ``dataclasses.replace``.

``received_at`` defaults to now on the broker's clock (``broker_core.clock``: Unix
time in ns that a wall-clock step does not move; a Message Expiry Interval counts from
it): the one reason this module reads a clock, and why the sans-I/O ``mqtt`` package
never imports it (the broker builds the Context of a client's PUBLISH from the
session's ``PublishReceived``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from broker_core.clock import now_ns
from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.properties import EMPTY, Properties
from broker_core.origin import Origin

__all__ = ["EMPTY_META", "Context", "Origin", "new_context", "next_message_id"]

EMPTY_META: Mapping[str, Any] = MappingProxyType({})

# 64-bit monotonic message ids: unique and increasing within a process run.
next_message_id = itertools.count(1).__next__


LOCAL = Origin("api", "local")


@dataclass(frozen=True, slots=True)
class Context:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = EMPTY
    origin: Origin = LOCAL
    meta: Mapping[str, Any] = field(default_factory=lambda: EMPTY_META)
    id: int = field(default_factory=next_message_id)
    received_at: int = field(default_factory=now_ns)

    def expiry_remaining(self, now: float) -> int | None:
        """Seconds of Message Expiry Interval left at ``now`` (the broker's clock).

        ``None`` when the message never expires; ``0`` or less when it has expired.
        """
        interval = self.properties.message_expiry_interval
        if interval is None:
            return None
        return interval - int(now - self.received_at / 1e9)


# Every field positionally, fast (the session builds one per PUBLISH): see fastinit.
new_context = frozen_factory(Context)
