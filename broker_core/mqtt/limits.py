"""What the server allows: one frozen value shared by every session."""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.mqtt.properties import Properties

__all__ = ["DROP_NEW", "DROP_OLDEST", "MAX_PACKET", "ServerLimits"]

DROP_OLDEST = "drop_oldest"
DROP_NEW = "drop_new"
#: The largest packet MQTT can frame (a Remaining Length of 268,435,455, and 5 bytes).
MAX_PACKET = 268_435_460


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Protocol limits (the ``mqtt:`` section of the configuration, in base units).

    Queue overflow policy: a session's queue (messages waiting while the client is
    offline, over its inflight window, or paused at the write high-water mark) holds at
    most ``max_queued_messages`` and ``max_queued_bytes``. On overflow ``drop_oldest``
    discards the oldest queued message to make room; ``drop_new`` discards the arriving
    one. Either way the drop is counted (``Counters.dropped_queue_full``). A message counts
    its topic, payload and properties (``session_state.message_size``).

    QoS 1/2 messages in flight to one client are at most its window (``max_inflight``,
    its Receive Maximum) and ``max_inflight_bytes``: past either, messages wait in the
    queue (one message larger than the bound still goes when nothing else is in flight).
    All sessions' queues and in-flight messages together hold at most
    ``max_queued_bytes_total``: past it, a ``drop_oldest`` session makes room from its own
    queue, and an arriving message nothing of its session can make room for is dropped.

    Sessions kept for offline clients are at most ``max_offline_sessions``: past it, the
    session offline the longest ends as if it had expired (its will is published).

    Aggregate bounds (docs/broker.md lists each with its reason code and metric): topic
    alias tables (``max_topic_alias`` per connection, ``max_topic_alias_bytes`` in all),
    properties per packet, levels of a topic name or filter (``max_topic_levels``: a
    subscription or a retained message costs a trie node per level), subscriptions per
    session and in all, retained messages in
    count and bytes, and the packets one connection may have handled per loop turn.
    """

    max_packet_size: int = 1_000_000
    receive_maximum: int = 32
    max_inflight: int = 256
    max_queued_messages: int = 1000
    max_queued_bytes: int = 64_000_000
    queue_overflow: str = DROP_OLDEST
    max_queued_bytes_total: int = 256_000_000  # all sessions' queues and in-flight messages
    max_inflight_bytes: int = 16_000_000  # in flight to one client (mosquitto's name)
    max_offline_sessions: int = 10_000  # sessions kept for clients not connected
    max_will_bytes_total: int = 64_000_000  # topics, payloads, properties of pending wills
    max_topic_alias: int = 10  # advertised in CONNACK, as mosquitto does
    max_topic_alias_bytes: int = 32_000_000  # topic characters in all alias tables together
    max_packet_properties: int = 128  # properties in one property block
    max_packet_properties_bytes: int = 131_072  # bytes of one property block
    max_subscriptions: int = 1000  # per session
    max_subscriptions_total: int = 100_000  # in the router, local subscriptions included
    max_topic_levels: int = 128  # levels of a topic name or filter (EMQX's default)
    read_budget: int = 65_536  # bytes of packets handled per connection per loop turn
    max_qos: int = 2
    retain_available: bool = True
    wildcard_subscriptions: bool = True
    shared_subscriptions: bool = True
    subscription_identifiers: bool = True
    server_keep_alive: int | None = None
    max_keepalive: int = 65535
    max_session_expiry: int = 7 * 24 * 3600
    max_client_id_length: int = 65535
    connect_timeout_s: float = 10.0
    queue_qos0_offline: bool = False
    max_retained_messages: int = 100_000
    max_retained_bytes: int = 64_000_000  # topics, payloads and properties of retained messages
    max_delayed_messages: int = 100_000
    max_delayed_bytes: int = 64_000_000  # topics, payloads, properties of $delayed messages
    publish_rate: float | None = None  # PUBLISH per second per client; None: unlimited
    publish_burst: int | None = None

    def advertised(self) -> Properties:
        """What an MQTT 5 CONNACK tells the client of these limits (MQTT 5.0 3.2.2.3):
        each property only when it differs from the protocol's default."""
        return Properties(
            receive_maximum=self.receive_maximum if self.receive_maximum < 65535 else None,
            topic_alias_maximum=self.max_topic_alias or None,
            maximum_qos=self.max_qos if self.max_qos < 2 else None,
            retain_available=None if self.retain_available else 0,
            maximum_packet_size=self.max_packet_size if self.max_packet_size < MAX_PACKET else None,
            wildcard_subscription_available=None if self.wildcard_subscriptions else 0,
            subscription_identifier_available=None if self.subscription_identifiers else 0,
            shared_subscription_available=None if self.shared_subscriptions else 0,
        )
