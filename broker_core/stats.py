"""``Broker.stats()``: what the broker counts, defined once for every reader.

``$SYS`` (``broker_core.sys_topics``), ``/metrics`` and the JSON metrics of the API
(``gateway.api.metrics``) all read a ``BrokerStats``, so the words mean the same
everywhere:

- **connected**: clients whose CONNECT was accepted and whose connection is open (a
  session with a connection attached). Sockets that have not been accepted yet are
  **connecting** (``pending_connections`` of them have not even sent CONNECT); a
  connection being closed counts as neither.
- **received**: application messages that entered the broker, by the publisher's
  protocol: ``mqtt`` (PUBLISH packets of clients, refused ones included), ``api``, and
  each component's protocol (an adapter's type, ``bridge``); wills, delayed messages
  coming due and ``$SYS`` are not received again. ``messages_received`` is the sum.
- **sent**: PUBLISH packets written to MQTT clients (resends not counted again).
- **dropped**: messages lost, by reason (``DROP_REASONS``); ``messages_dropped`` is the
  sum of every reason.

A ``BrokerStats`` is computed when asked (a ``$SYS`` round, a scrape, an API call),
on the broker's loop: it walks the connections, sessions and local subscribers, so
nothing is kept twice and nothing is sampled in the background.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker_core.clock import now as clock_now
from broker_core.clock import to_wall
from broker_core.mqtt.session_state import SessionState
from broker_core.version import VERSION

if TYPE_CHECKING:
    from broker_core.broker import Broker

__all__ = ["DROP_REASONS", "BrokerStats", "ListenerCount", "collect_stats"]

#: Why messages are dropped: the keys of ``BrokerStats.dropped``.
DROP_REASONS = (
    "queue_full",  # a session's queue was full (max_queued_messages / _bytes)
    "expired",  # the message expiry interval passed while queued
    "too_large",  # larger than the client's maximum packet size
    "qos0_offline",  # QoS 0 for an offline session that does not queue QoS 0
    "local_queue_full",  # a local subscriber's (adapter, bridge) queue was full
    "retained_limit",  # not retained: beyond max_retained_messages or max_retained_bytes
    "delayed_limit",  # a $delayed/ message beyond max_delayed_messages
    "not_authorized",  # queued for a resumed session whose new owner may not read it
)


@dataclass(frozen=True, slots=True)
class ListenerCount:
    """Clients of one listener: connected at ``protocol_level``, or (None) connecting."""

    listener: str
    protocol_level: int | None
    count: int


@dataclass(frozen=True, slots=True)
class BrokerStats:
    node: str
    version: str
    started_at: float  # Unix seconds
    uptime_s: float
    connected: int  # clients connected now
    connected_max: int  # the most connected at once since start
    connecting: int  # connections not accepted yet (pending_connections included)
    pending_connections: int  # sockets that have not sent CONNECT
    listeners: tuple[ListenerCount, ...]  # connected and connecting, per listener
    sessions: int  # sessions known, connected or not
    subscriptions: int  # shared and local ones included
    received: Mapping[str, int]  # messages in, by origin protocol
    sent: Mapping[str, int]  # messages out, by protocol
    bytes_received: Mapping[str, int]  # mqtt: wire bytes; api: payload bytes
    bytes_sent: Mapping[str, int]
    dropped: Mapping[str, int]  # by reason, every one of DROP_REASONS
    publish_denied: int  # publishes refused (ACL, $SYS, $delayed/ topic)
    shared_redelivered: int  # owed by an ended shared-subscription member, sent to another
    retained: int
    retained_bytes: int
    delayed: int
    delayed_bytes: int  # message_size of the $delayed/ messages (max_delayed_bytes)
    will_bytes: int  # will_size of the wills held, connected and pending (max_will_bytes_total)
    queued_messages: int  # queued for MQTT sessions, summed
    queued_messages_max: int  # the longest session queue
    queued_bytes: int  # message_size of queued messages (+ inflight_bytes: the total bound)
    inflight: int  # QoS 1/2 messages awaiting the client's acknowledgement
    inflight_bytes: int  # their message_size
    local_queued: int  # waiting for local subscribers
    local_queued_max: int
    store_pending_writes: int
    limit_hits: Mapping[str, int]
    topic_alias_bytes: int
    router_cache_entries: int  # topics in the router's match cache (router._CACHE_LIMIT)
    router_cache_bytes: int  # its estimated bytes (router._CACHE_BYTES)
    login_failures: int
    login_throttle_tracked: int
    observer_errors: int  # broker-event observers that raised
    # Failed TLS handshakes by (listener, reason label): listeners.tls
    tls_handshake_failures: Mapping[tuple[str, str], int]

    @property
    def messages_received(self) -> int:
        return sum(self.received.values())

    @property
    def messages_sent(self) -> int:
        return sum(self.sent.values())

    @property
    def messages_dropped(self) -> int:
        return sum(self.dropped.values())

    @property
    def sessions_online(self) -> int:
        """Sessions with a connection: the connected clients."""
        return self.connected


def collect_stats(broker: Broker) -> BrokerStats:
    counters = broker.counters
    connected_by, connecting_by = broker.connections.by_listener()
    listeners = tuple(
        sorted(
            [ListenerCount(name, level, n) for (name, level), n in connected_by.items()]
            + [ListenerCount(name, None, n) for name, n in connecting_by.items()],
            key=lambda c: (c.listener, c.protocol_level is None, c.protocol_level or 0),
        )
    )

    queued = queued_max = inflight = 0
    for state in broker.sessions:
        depth = len(state.queue or ())
        queued += depth
        queued_max = max(queued_max, depth)
        inflight += len(state.outgoing)

    local_queued = local_max = local_dropped = 0
    seen: set[int] = set()
    for entry in broker.router.entries():
        subscriber = entry.subscriber
        if isinstance(subscriber, SessionState) or id(subscriber) in seen:
            continue
        seen.add(id(subscriber))
        depth = len(subscriber) if isinstance(subscriber, Sized) else 0
        local_queued += depth
        local_max = max(local_max, depth)
        local_dropped += int(getattr(subscriber, "dropped", 0))

    received = {"mqtt": counters.messages_received, "api": 0, **counters.received_from}
    throttle = broker.login_throttle
    now = clock_now()
    broker.retained.expire(now)  # count no expired message
    return BrokerStats(
        node=broker.node_name,
        version=VERSION,
        started_at=to_wall(broker.started_at),  # shown: on the wall clock (broker_core.clock)
        uptime_s=now - broker.started_at,
        connected=broker.sessions.online,
        connected_max=broker.sessions.online_max,
        connecting=sum(connecting_by.values()),
        pending_connections=len(broker.connections.pending),
        listeners=listeners,
        sessions=len(broker.sessions),
        subscriptions=broker.router.count,
        received=received,
        sent={"mqtt": counters.messages_sent},
        bytes_received={"mqtt": counters.bytes_received, "api": 0, **counters.bytes_received_from},
        bytes_sent={"mqtt": counters.bytes_sent},
        dropped={
            "queue_full": counters.dropped_queue_full,
            "expired": counters.dropped_expired,
            "too_large": counters.dropped_too_large,
            "qos0_offline": counters.dropped_qos0_offline,
            "local_queue_full": local_dropped,
            "retained_limit": broker.retained.refused,
            "delayed_limit": broker.delayed.refused,
            "not_authorized": counters.dropped_not_authorized,
        },
        publish_denied=counters.publish_denied,
        shared_redelivered=counters.shared_redelivered,
        retained=len(broker.retained),
        retained_bytes=broker.retained.bytes,
        delayed=len(broker.delayed),
        delayed_bytes=broker.delayed.bytes,
        will_bytes=broker.wills.bytes,
        queued_messages=queued,
        queued_messages_max=queued_max,
        queued_bytes=counters.queued_bytes,
        inflight=inflight,
        inflight_bytes=counters.inflight_bytes,
        local_queued=local_queued,
        local_queued_max=local_max,
        store_pending_writes=broker.store.pending,
        limit_hits=dict(counters.limit_hits),
        topic_alias_bytes=counters.topic_alias_bytes,
        router_cache_entries=broker.router.cache_entries,
        router_cache_bytes=broker.router.cache_bytes,
        login_failures=0 if throttle is None else throttle.failures,
        login_throttle_tracked=0 if throttle is None else len(throttle),
        observer_errors=broker.observers.errors,
        tls_handshake_failures=dict(counters.tls_handshake_failures),
    )
