"""``$SYS/brokers/<node>/...``: what the broker says about itself.

Every ``interval_s`` seconds the statistics below are published as retained messages
(origin ``sys``; never written to the store), read from ``Broker.stats()`` like
``/metrics`` and the API, so the numbers mean the same everywhere (``broker_core.stats``).
These 13 retained topics are the broker's own (``broker_core.retained.is_broker_own``):
they do not count against the clients' retained bounds (``max_retained_messages``,
``max_retained_bytes``), which never refuse them.
With ``events``, a client connecting or disconnecting publishes a JSON event (not
retained) to ``$SYS/brokers/<node>/clients/<client id>/connected`` or
``.../disconnected`` (``SysTopics`` observes ``ClientConnected`` and
``ClientDisconnected``, ``broker_core.observe``), and a component (adapter, bridge, sink)
its own events to ``$SYS/brokers/<node>/<kind>s/<name>/<event>`` (``component_event``),
e.g. a bridge's ``$SYS/brokers/<node>/bridges/cloud/connected``.

==============================  =======================================================
topic (after the node prefix)   value
==============================  =======================================================
version                         the edgebus version
uptime                          seconds since start
clients/connected               clients connected now
clients/total                   sessions known, connected or not
clients/maximum                 most clients connected at once
messages/received, /sent        application messages since start
messages/dropped                dropped messages, every reason (queue full, expired, ...)
messages/retained/count         retained messages held
messages/delayed/count          delayed messages waiting
bytes/received, bytes/sent      bytes on the wire since start
subscriptions/count             subscriptions, shared and local ones included
==============================  =======================================================
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.clock import now as clock_now
from broker_core.clock import to_wall
from broker_core.context import Context, Origin
from broker_core.observe import ClientConnected, ClientDisconnected

if TYPE_CHECKING:
    from broker_core.broker import Broker

__all__ = ["SysTopics"]

_UNSAFE = str.maketrans({"/": "_", "+": "_", "#": "_"})


def _level(name: str) -> str:
    """A client id or component name as one topic level ('/', '+', '#' replaced)."""
    return name.translate(_UNSAFE) or "_"


class SysTopics:
    def __init__(self, broker: Broker, version: str, interval_s: float, events: bool) -> None:
        self.broker = broker
        self.version = version
        self.interval_s = interval_s
        self.events = events
        self.prefix = f"$SYS/brokers/{broker.node_name}/"
        self.origin = Origin("sys", broker.node_name)
        self._stop_observing: Callable[[], None] | None = None
        if events:
            self._stop_observing = broker.observers.observe(
                (ClientConnected, ClientDisconnected), self._client_event
            )

    def close(self) -> None:
        """Stops publishing client events."""
        if self._stop_observing is not None:
            self._stop_observing()
            self._stop_observing = None

    def statistics(self) -> dict[str, str]:
        stats = self.broker.stats()
        return {
            "version": self.version,
            "uptime": str(int(stats.uptime_s)),
            "clients/connected": str(stats.connected),
            "clients/total": str(stats.sessions),
            "clients/maximum": str(stats.connected_max),
            "messages/received": str(stats.messages_received),
            "messages/sent": str(stats.messages_sent),
            "messages/dropped": str(stats.messages_dropped),
            "messages/retained/count": str(stats.retained),
            "messages/delayed/count": str(stats.delayed),
            "bytes/received": str(stats.bytes_received["mqtt"]),
            "bytes/sent": str(stats.bytes_sent["mqtt"]),
            "subscriptions/count": str(stats.subscriptions),
        }

    def publish_statistics(self) -> None:
        now = clock_now()
        for name, value in self.statistics().items():
            context = Context(
                self.prefix + name,
                value.encode(),
                0,
                True,
                origin=self.origin,
                received_at=int(now * 1e9),
            )
            self.broker.publish(context, now=now)

    async def run(self) -> None:
        if self.interval_s <= 0:
            return
        while True:
            self.publish_statistics()
            await asyncio.sleep(self.interval_s)

    def _client_event(self, event: ClientConnected | ClientDisconnected) -> None:
        broker = self.broker
        observers = broker.observers
        if (
            not broker.router.has_first_level("$SYS")
            and not observers.message_hooks
            and not observers.message_publish
            and not observers.message_dropped
        ):
            return  # nobody could see it: no JSON, no Context (a connect's cost)
        if isinstance(event, ClientConnected):
            self._event(
                event.client_id,
                "connected",
                {
                    "clientid": event.client_id,
                    "username": event.username,
                    "ipaddress": event.peer,
                    "proto_ver": event.protocol_level,
                    "keepalive": event.keep_alive,
                    "clean_start": event.clean_start,
                    "connected_at": int(to_wall(event.at) * 1000),
                },
            )
        else:
            self._event(
                event.client_id,
                "disconnected",
                {
                    "clientid": event.client_id,
                    "username": event.username,
                    "reason_code": event.reason_code,
                    "disconnected_at": int(to_wall(event.at) * 1000),
                },
            )

    def component_event(self, kind: str, name: str, what: str, body: dict[str, object]) -> None:
        """``$SYS/brokers/<node>/<kind>s/<name>/<what>``: a component's JSON event (not
        retained), when ``events`` is on."""
        if not self.events:
            return
        self._publish(f"{kind}s/{_level(name)}/{what}", body)

    def _event(self, client_id: str, what: str, body: dict[str, object]) -> None:
        self._publish(f"clients/{_level(client_id)}/{what}", body)

    def _publish(self, path: str, body: dict[str, object]) -> None:
        now = clock_now()
        context = Context(
            self.prefix + path,
            json.dumps(body, separators=(",", ":")).encode(),
            0,
            False,
            origin=self.origin,
            received_at=int(now * 1e9),
        )
        self.broker.publish(context, now=now)
