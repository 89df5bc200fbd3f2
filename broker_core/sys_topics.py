"""``$SYS/brokers/<node>/...``: what the broker says about itself.

Every ``interval_s`` seconds the statistics below are published as retained messages
(origin ``sys``; never written to the store). With ``events``, a client connecting or
disconnecting publishes a JSON event (not retained) to
``$SYS/brokers/<node>/clients/<client id>/connected`` or ``.../disconnected``, and a
component (adapter, bridge, sink) its own events to
``$SYS/brokers/<node>/<kind>s/<name>/<event>`` (``component_event``), e.g. a bridge's
``$SYS/brokers/<node>/bridges/cloud/connected``.

==============================  =======================================================
topic (after the node prefix)   value
==============================  =======================================================
version                         the edgebus version
uptime                          seconds since start
clients/connected               clients connected now
clients/total                   sessions known, connected or not
clients/maximum                 most clients connected at once
messages/received, /sent        application messages since start
messages/dropped                dropped messages (queue full, expired, too large, ...)
messages/retained/count         retained messages held
messages/delayed/count          delayed messages waiting
bytes/received, bytes/sent      bytes on the wire since start
subscriptions/count             subscriptions, shared and local ones included
==============================  =======================================================
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING

from broker_core.context import Context, Origin

if TYPE_CHECKING:
    from broker_core.broker import Broker
    from broker_core.mqtt.session import Session

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
        self.max_connected = 0

    def statistics(self) -> dict[str, str]:
        broker = self.broker
        counters = broker.counters
        connected = len(broker.connections)
        self.max_connected = max(self.max_connected, connected)
        return {
            "version": self.version,
            "uptime": str(int(time.time() - broker.started_at)),
            "clients/connected": str(connected),
            "clients/total": str(len(broker.sessions)),
            "clients/maximum": str(self.max_connected),
            "messages/received": str(counters.messages_received),
            "messages/sent": str(counters.messages_sent),
            "messages/dropped": str(counters.dropped()),
            "messages/retained/count": str(len(broker.retained)),
            "messages/delayed/count": str(len(broker.delayed)),
            "bytes/received": str(counters.bytes_received),
            "bytes/sent": str(counters.bytes_sent),
            "subscriptions/count": str(broker.router.count),
        }

    def publish_statistics(self) -> None:
        now = time.time()
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

    def client_connected(self, session: Session) -> None:
        if not self.events:
            return
        connect = session.connect
        self._event(
            session.origin.name,
            "connected",
            {
                "clientid": session.origin.name,
                "username": session.origin.username,
                "ipaddress": session.peer,
                "proto_ver": session.protocol_level,
                "keepalive": session.keep_alive,
                "clean_start": bool(connect and connect.clean_start),
                "connected_at": int(time.time() * 1000),
            },
        )

    def client_disconnected(self, session: Session) -> None:
        if not self.events:
            return
        self._event(
            session.origin.name,
            "disconnected",
            {
                "clientid": session.origin.name,
                "username": session.origin.username,
                "reason_code": session.close_reason or 0,
                "disconnected_at": int(time.time() * 1000),
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
        now = time.time()
        context = Context(
            self.prefix + path,
            json.dumps(body, separators=(",", ":")).encode(),
            0,
            False,
            origin=self.origin,
            received_at=int(now * 1e9),
        )
        self.broker.publish(context, now=now)
