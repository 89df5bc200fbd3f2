"""``SessionState``: what outlives a network connection (MQTT 5.0 section 4.1).

Subscriptions, QoS 1/2 messages in flight to the client, messages queued for it, and
the packet ids of QoS 2 messages received but not yet released. A ``Session`` (one
connection) is attached while the client is online; the router delivers to the state,
which hands the message to its connection or queues it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker_core.context import Context
from broker_core.mqtt.limits import DROP_NEW, ServerLimits
from broker_core.mqtt.packets import SubscriptionOptions

if TYPE_CHECKING:
    from broker_core.mqtt.session import Session

__all__ = ["NEVER_EXPIRES", "Counters", "Delivery", "SessionState", "Subscription"]

NEVER_EXPIRES = 0xFFFFFFFF


class Counters:
    """Broker-wide counters the sessions update (read by $SYS and /metrics)."""

    __slots__ = (
        "bytes_received",
        "bytes_sent",
        "dropped_expired",
        "dropped_qos0_offline",
        "dropped_queue_full",
        "dropped_too_large",
        "messages_received",
        "messages_sent",
        "publish_denied",
    )

    def __init__(self) -> None:
        self.messages_received = 0
        self.messages_sent = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        self.dropped_queue_full = 0
        self.dropped_expired = 0
        self.dropped_too_large = 0
        self.dropped_qos0_offline = 0
        self.publish_denied = 0

    def dropped(self) -> int:
        return (
            self.dropped_queue_full
            + self.dropped_expired
            + self.dropped_too_large
            + self.dropped_qos0_offline
        )


class Delivery:
    """One message on its way to one client: queued, or in flight with a packet id."""

    __slots__ = ("context", "packet_id", "qos", "released", "retain", "subscription_ids")

    def __init__(
        self, context: Context, qos: int, retain: bool, subscription_ids: tuple[int, ...]
    ) -> None:
        self.context = context
        self.qos = qos
        self.retain = retain
        self.subscription_ids = subscription_ids
        self.packet_id = 0
        self.released = False  # QoS 2: PUBREC received, PUBREL sent

    def size(self) -> int:
        return len(self.context.payload) + len(self.context.topic)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One of a session's subscriptions, as the client asked for it."""

    topic_filter: str
    options: SubscriptionOptions
    subscription_id: int | None = None


class SessionState:
    __slots__ = (
        "__weakref__",
        "client_id",
        "connection",
        "counters",
        "expiry_interval",
        "incoming_qos2",
        "limits",
        "next_packet_id",
        "outgoing",
        "queue",
        "queued_bytes",
        "store_key",
        "subscriptions",
        "user",
    )

    def __init__(self, client_id: str, limits: ServerLimits, counters: Counters) -> None:
        self.client_id = client_id
        self.limits = limits
        self.counters = counters
        self.connection: Session | None = None
        self.subscriptions: dict[str, Subscription] = {}
        self.outgoing: dict[int, Delivery] = {}
        self.queue: deque[Delivery] = deque()
        self.queued_bytes = 0
        self.incoming_qos2: set[int] = set()
        self.next_packet_id = 1
        self.expiry_interval = 0
        self.store_key: Any = None
        self.user: Any = None

    @property
    def online(self) -> bool:
        return self.connection is not None

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        """Route target entry point: to the live connection, or into the queue."""
        conn = self.connection
        if conn is not None:
            conn.deliver(context, qos, retain, subscription_ids, cache, now)
        elif qos or self.limits.queue_qos0_offline:
            self.enqueue(Delivery(context, qos, retain, subscription_ids))
        else:
            self.counters.dropped_qos0_offline += 1

    def enqueue(self, delivery: Delivery) -> bool:
        """Queues ``delivery`` under the overflow policy; False when it was dropped."""
        limits = self.limits
        size = delivery.size()
        queue = self.queue
        if (
            len(queue) >= limits.max_queued_messages
            or self.queued_bytes + size > limits.max_queued_bytes
        ):
            if limits.queue_overflow == DROP_NEW or size > limits.max_queued_bytes:
                self.counters.dropped_queue_full += 1
                return False
            while queue and (
                len(queue) >= limits.max_queued_messages
                or self.queued_bytes + size > limits.max_queued_bytes
            ):
                old = queue.popleft()
                self.queued_bytes -= old.size()
                self.counters.dropped_queue_full += 1
        queue.append(delivery)
        self.queued_bytes += size
        return True

    def dequeue(self) -> Delivery:
        delivery = self.queue.popleft()
        self.queued_bytes -= delivery.size()
        return delivery

    def allocate_packet_id(self) -> int:
        """The next packet id not in flight (1..65535, wrapping) [MQTT-2.2.1-3]."""
        pid = self.next_packet_id
        outgoing = self.outgoing
        while pid in outgoing:
            pid = pid + 1 if pid < 0xFFFF else 1
        self.next_packet_id = pid + 1 if pid < 0xFFFF else 1
        return pid
