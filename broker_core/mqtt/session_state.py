"""``SessionState``: what outlives a network connection (MQTT 5.0 section 4.1).

Subscriptions, QoS 1/2 messages in flight to the client, messages queued for it, and
the packet ids of QoS 2 messages received but not yet released. A ``Session`` (one
connection) is attached while the client is online; the router delivers to the state,
which hands the message to the connection's outgoing flow (``mqtt.outgoing``) while the
connection is open, or else holds it (``hold``: the one "offline, so queue it" rule).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.mqtt.limits import DROP_NEW, ServerLimits
from broker_core.mqtt.observer import UNOBSERVED, MessageObserver
from broker_core.mqtt.packets import SubscriptionOptions
from broker_core.mqtt.properties import EMPTY

if TYPE_CHECKING:
    from broker_core.context import Context
    from broker_core.mqtt.outgoing import Outgoing
    from broker_core.mqtt.session import Session

__all__ = [
    "LIMITS",
    "NEVER_EXPIRES",
    "SIZE_KEY",
    "Counters",
    "Delivery",
    "SessionState",
    "Subscription",
    "message_size",
]

NEVER_EXPIRES = 0xFFFFFFFF

#: The fan-out cache's key for the routed message's ``message_size``, computed by the first
#: recipient that needs it (the cache's other keys are wire variants, ``mqtt.delivery``).
SIZE_KEY = "size"


#: The bounds whose hits ``Counters.limit_hits`` counts (``edgebus_limit_hits_total``).
LIMITS = (
    "pending_connections",  # a socket without CONNECT closed to make room (max_pending_connections)
    "max_connections",  # CONNECT refused, 0x97 (listeners[].max_connections)
    "connection_rate",  # CONNECT refused, 0x9F (listeners[].connection_rate)
    "packets_before_connack",  # more than 1000 packets while CONNECT is decided, 0x97
    "packet_size",  # packet larger than max_packet_size, 0x95
    "connack_size",  # no CONNACK fits the client's Maximum Packet Size: closed without one
    "receive_maximum",  # QoS 1 not PUBACKed + QoS 2 not PUBCOMPed beyond it, 0x93 (3.1.1: waits)
    "receive_maximum_waiting",  # 3.1.1 packets held behind it beyond 1000: closed
    "topic_alias",  # topic alias 0 or beyond max_topic_alias, 0x94
    "packet_properties",  # packet refused, 0x97 (max_packet_properties / _bytes)
    "topic_alias_bytes",  # client disconnected, 0x97 (max_topic_alias_bytes)
    "subscriptions",  # filter refused in SUBACK, 0x97 (max_subscriptions)
    "subscriptions_total",  # filter refused in SUBACK, 0x97 (max_subscriptions_total)
    "topic_levels",  # filter refused 0x8F, PUBLISH refused 0x90 (max_topic_levels)
    "queued_bytes_total",  # a message not queued for a session (max_queued_bytes_total)
    "inflight_bytes",  # a QoS 1/2 message waits in the queue, not sent (max_inflight_bytes)
    "offline_sessions",  # the longest-offline session ended early (max_offline_sessions)
    "will_bytes_total",  # CONNECT refused 0x97, or a will published at once (max_will_bytes_total)
    "retained_messages",  # retained message not stored (max_retained_messages)
    "retained_bytes",  # retained message not stored (max_retained_bytes)
    "read_budget",  # a connection's input deferred to the next loop turn (read_budget)
    "login_throttle",  # a login delayed or refused, 0x9F (auth.login_throttle)
    "lingering",  # a closed socket reset at once: LINGER_MAX linger (listeners.linger)
    "write_high_water",  # reading paused until the client reads (mqtt.write_high_water)
    "write_timeout",  # a client closed: it read nothing for mqtt.write_timeout
    "router_cache",  # the router's match cache emptied at its bound (router._CACHE_BYTES)
)


class Counters:
    """Broker-wide counters the sessions update (read through ``Broker.stats()``)."""

    __slots__ = (
        "bytes_received",
        "bytes_received_from",
        "bytes_sent",
        "dropped_expired",
        "dropped_not_authorized",
        "dropped_qos0_offline",
        "dropped_queue_full",
        "dropped_too_large",
        "inflight_bytes",
        "limit_hits",
        "messages_received",
        "messages_sent",
        "publish_denied",
        "queued_bytes",
        "received_from",
        "shared_redelivered",
        "tls_handshake_failures",
        "topic_alias_bytes",
    )

    def __init__(self) -> None:
        self.messages_received = 0  # PUBLISH packets from MQTT clients
        # Messages from in-process publishers, by origin protocol (api, adapter types,
        # bridge), and the payload bytes of those that count them (the API).
        self.received_from: dict[str, int] = {}
        self.bytes_received_from: dict[str, int] = {}
        self.messages_sent = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        self.dropped_queue_full = 0
        self.dropped_expired = 0
        self.dropped_too_large = 0
        self.dropped_qos0_offline = 0
        self.dropped_not_authorized = 0  # queued for a session whose new owner may not read it
        self.publish_denied = 0
        self.limit_hits: dict[str, int] = dict.fromkeys(LIMITS, 0)
        self.topic_alias_bytes = 0  # topic bytes held in client topic alias tables
        # Bytes (``message_size``) in all sessions' queues, and in flight to their clients:
        # the two together are bounded by max_queued_bytes_total.
        self.queued_bytes = 0
        self.inflight_bytes = 0
        # Messages a shared-subscription member's session owed when it ended, sent to
        # another member of the group (MQTT 5.0 4.8.2).
        self.shared_redelivered = 0
        # Failed TLS handshakes by (listener name, reason label) (listeners.tls).
        self.tls_handshake_failures: dict[tuple[str, str], int] = {}

    def hit(self, limit: str) -> None:
        """A bound of ``LIMITS`` was reached once."""
        self.limit_hits[limit] += 1

    def count_received(self, protocol: str, payload_bytes: int | None = None) -> None:
        """A message from an in-process publisher (``protocol``: its origin's)."""
        self.received_from[protocol] = self.received_from.get(protocol, 0) + 1
        if payload_bytes is not None:
            by = self.bytes_received_from
            by[protocol] = by.get(protocol, 0) + payload_bytes


def message_size(context: Context) -> int:
    """What a message counts against the byte bounds of queues, in-flight messages and
    delayed messages: its topic, payload and properties (``retained.retained_size`` adds
    the cost of its topic levels to it). Properties count as their encoded block,
    measured without caching it (``Properties.encoded_length``): a held message does not
    hold its properties twice; ``Outgoing.deliver``, which sends at once, caches it."""
    props = context.properties
    size = len(context.topic) + len(context.payload)
    return size if props is EMPTY else size + props.encoded_length()


class Delivery:
    """One message on its way to one client: queued, or in flight with a packet id.

    ``size`` is ``message_size(context)``, given by a caller that computed it once for
    every recipient of the message, or computed here.
    """

    __slots__ = (
        "context",
        "key",
        "packet_id",
        "qos",
        "released",
        "retain",
        "size",
        "subscription_ids",
    )

    def __init__(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        size: int = -1,
    ) -> None:
        self.context = context
        self.qos = qos
        self.retain = retain
        self.subscription_ids = subscription_ids
        self.packet_id = 0
        self.released = False  # QoS 2: PUBREC received, PUBREL sent
        self.key = 0  # the store's id for it, once journaled
        self.size = size if size >= 0 else message_size(context)


class Journal(Protocol):
    """Where a persistent session records its QoS 1/2 state (the store implements it).

    Calls come in the order things happen; each must only queue a write, never block.
    """

    def queued(self, state: SessionState, delivery: Delivery) -> None: ...

    def sent(self, state: SessionState, delivery: Delivery) -> None: ...

    def released(self, state: SessionState, delivery: Delivery) -> None: ...

    def completed(self, state: SessionState, delivery: Delivery) -> None: ...

    def incoming_added(self, state: SessionState, packet_id: int) -> None: ...

    def incoming_removed(self, state: SessionState, packet_id: int) -> None: ...


class Subscription:
    """One of a session's subscriptions, as the client asked for it.

    The router's entry for a subscription (``router.Entry``) is one: the session's
    record and the router's are the same object, a subscription is held once.
    """

    __slots__ = ("options", "subscription_ids", "topic_filter")

    def __init__(
        self, topic_filter: str, options: SubscriptionOptions, subscription_id: int | None = None
    ) -> None:
        self.topic_filter = topic_filter
        self.options = options
        # As a delivery carries them: () or the one identifier (MQTT 5.0 3.8.2.1.2).
        self.subscription_ids: tuple[int, ...] = (subscription_id,) if subscription_id else ()

    @property
    def subscription_id(self) -> int | None:
        ids = self.subscription_ids
        return ids[0] if ids else None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.topic_filter!r}, {self.options!r},"
            f" {self.subscription_id!r})"
        )


_NO_SUBSCRIPTIONS: Mapping[str, Subscription] = MappingProxyType({})

# The ``outgoing`` of every session with nothing ever in flight; never written to.
_NOTHING_IN_FLIGHT: dict[int, Delivery] = {}


class SessionState:
    __slots__ = (
        "_subscriptions",
        "client_id",
        "connection",
        "counters",
        "expiry_interval",
        "incoming_qos2",
        "inflight_bytes",
        "journal",
        "limits",
        "next_packet_id",
        "observer",
        "outgoing",
        "queue",
        "queued_bytes",
        "released_qos2",
        "sending",
    )

    def __init__(
        self,
        client_id: str,
        limits: ServerLimits,
        counters: Counters,
        observer: MessageObserver = UNOBSERVED,
    ) -> None:
        self.client_id = client_id
        self.limits = limits
        self.counters = counters
        self.observer = observer
        self.connection: Session | None = None
        # The open connection's outgoing flow: set while the connection is CONNECTED,
        # None otherwise (then messages are held: ``hold``).
        self.sending: Outgoing | None = None
        # None, the one subscription of a session with a single one (most clients: a
        # dict of one costs 184 bytes), or a dict by filter once there are more.
        self._subscriptions: Subscription | dict[str, Subscription] | None = None
        # Shares _NOTHING_IN_FLIGHT until the first QoS 1/2 delivery (``hold_in_flight``
        # makes its own dict first): most idle clients never get one (~64 bytes each).
        self.outgoing: dict[int, Delivery] = _NOTHING_IN_FLIGHT
        self.inflight_bytes = 0  # sizes of ``outgoing``'s deliveries (max_inflight_bytes)
        # Built on first use: most sessions never queue or receive QoS 2 (an empty
        # deque is ~600 bytes, an empty set ~200, per connected client).
        self.queue: deque[Delivery] | None = None
        self.queued_bytes = 0
        self.incoming_qos2: set[int] | None = None
        # A journaled session's QoS 2 packet ids whose PUBREL arrived and whose PUBCOMP
        # has not gone out: their records stay (``release_incoming``); None: none.
        self.released_qos2: set[int] | None = None
        self.next_packet_id = 1
        self.expiry_interval = 0
        # Set while the session is persistent (expiry > 0) and the store is durable.
        self.journal: Journal | None = None

    @property
    def online(self) -> bool:
        return self.connection is not None

    # -- subscriptions ----------------------------------------------------------------------

    @property
    def subscriptions(self) -> Mapping[str, Subscription]:
        """The subscriptions by filter: a read-only copy (change them with
        ``add_subscription`` and ``remove_subscription``)."""
        subs = self._subscriptions
        if subs is None:
            return _NO_SUBSCRIPTIONS
        if isinstance(subs, dict):
            return MappingProxyType(dict(subs))
        return MappingProxyType({subs.topic_filter: subs})

    @property
    def subscription_count(self) -> int:
        subs = self._subscriptions
        if subs is None:
            return 0
        return len(subs) if isinstance(subs, dict) else 1

    def subscription(self, topic_filter: str) -> Subscription | None:
        subs = self._subscriptions
        if isinstance(subs, dict):
            return subs.get(topic_filter)
        if subs is not None and subs.topic_filter == topic_filter:
            return subs
        return None

    def add_subscription(self, subscription: Subscription) -> None:
        """Adds ``subscription``, or replaces the one with its filter."""
        subs = self._subscriptions
        topic_filter = subscription.topic_filter
        if subs is None or (isinstance(subs, Subscription) and subs.topic_filter == topic_filter):
            self._subscriptions = subscription
            return
        if isinstance(subs, Subscription):
            subs = self._subscriptions = {subs.topic_filter: subs}
        subs[topic_filter] = subscription

    def remove_subscription(self, topic_filter: str) -> Subscription | None:
        """Removes the subscription to ``topic_filter``; None when there was none."""
        subs = self._subscriptions
        if isinstance(subs, dict):
            removed = subs.pop(topic_filter, None)
            if len(subs) == 1:
                [self._subscriptions] = subs.values()
            return removed
        if subs is not None and subs.topic_filter == topic_filter:
            self._subscriptions = None
            return subs
        return None

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        """Route target entry point: to the open connection, or held."""
        sending = self.sending
        if sending is not None:
            sending.deliver(context, qos, retain, subscription_ids, cache, now)
        else:
            self.hold(context, qos, retain, subscription_ids, now, cache)

    def hold(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        now: float | None = None,
        cache: dict[Any, Any] | None = None,
    ) -> None:
        """No open connection (offline, or closing): queue it, unless it is QoS 0 and
        QoS 0 is not queued for offline sessions (``queue_qos0_offline``), then drop it
        (counted, ``qos0_offline``). ``cache``: the fan-out's, where the message's size
        is kept for its other recipients."""
        if qos or self.limits.queue_qos0_offline:
            if cache is None:
                size = message_size(context)
            else:
                size = cache.get(SIZE_KEY, -1)
                if size < 0:
                    size = cache[SIZE_KEY] = message_size(context)
            self.enqueue(Delivery(context, qos, retain, subscription_ids, size))
        else:
            self.counters.dropped_qos0_offline += 1
            if self.observer.message_dropped:
                self.report_drop(context, "qos0_offline", now)

    def report_drop(self, context: Context, reason: str, now: float | None = None) -> None:
        """Tells the observer a message for this session was dropped (it observes drops)."""
        session = self.connection
        username = None if session is None else session.origin.username
        self.observer.report_dropped(context, reason, self.client_id, username, now)

    def enqueue(self, delivery: Delivery) -> bool:
        """Queues ``delivery`` under the overflow policy; False when it was dropped.

        A message with Message Expiry Interval 0 is dropped as expired.

        The session's own bounds come first; the broker-wide ``max_queued_bytes_total``
        (all queues and all messages in flight) is met the same way, except that only this
        session's queue can make room for it.
        """
        limits = self.limits
        counters = self.counters
        if delivery.context.properties.message_expiry_interval == 0:
            # Its lifetime has passed: sent only when its delivery starts at once,
            # never held (MQTT 5.0 3.3.2.3.3, [MQTT-3.3.2-5]).
            counters.dropped_expired += 1
            if self.observer.message_dropped:
                self.report_drop(delivery.context, "expired")
            return False
        size = delivery.size
        queue = self.queue
        if queue is None:
            queue = self.queue = deque()
        if self._no_room(queue, size):
            if (
                counters.queued_bytes + counters.inflight_bytes + size
                > limits.max_queued_bytes_total
            ):
                counters.hit("queued_bytes_total")
            if (
                limits.queue_overflow != DROP_NEW
                and size <= limits.max_queued_bytes
                and size <= limits.max_queued_bytes_total
            ):
                while queue and self._no_room(queue, size):
                    self._drop(self.dequeue())
            if self._no_room(queue, size):
                self._drop(delivery)
                return False
        queue.append(delivery)
        self.queued_bytes += size
        counters.queued_bytes += size
        if self.journal is not None and delivery.qos:
            self.journal.queued(self, delivery)
        return True

    def _no_room(self, queue: deque[Delivery], size: int) -> bool:
        """A message of ``size`` bytes does not fit: the session's bounds or all queues'."""
        limits = self.limits
        return (
            len(queue) >= limits.max_queued_messages
            or self.queued_bytes + size > limits.max_queued_bytes
            or self.counters.queued_bytes + self.counters.inflight_bytes + size
            > limits.max_queued_bytes_total
        )

    def _drop(self, delivery: Delivery) -> None:
        """``delivery`` did not fit the queue: gone, counted, reported."""
        self.counters.dropped_queue_full += 1
        self.discard(delivery)
        if self.observer.message_dropped:
            self.report_drop(delivery.context, "queue_full")

    def dequeue(self) -> Delivery:
        """The oldest queued delivery; only when ``queue`` holds one."""
        assert self.queue is not None
        delivery = self.queue.popleft()
        size = delivery.size
        self.queued_bytes -= size
        self.counters.queued_bytes -= size
        return delivery

    def unqueue_all(self) -> None:
        """Empties the queue without sending (the session ends); no drop is reported."""
        self.counters.queued_bytes -= self.queued_bytes
        self.queue = None
        self.queued_bytes = 0

    def track(self, delivery: Delivery) -> int:
        """Puts a QoS 1/2 delivery in flight under a fresh packet id."""
        pid = self.allocate_packet_id()
        delivery.packet_id = pid
        self.hold_in_flight(delivery)
        if self.journal is not None:
            self.journal.sent(self, delivery)
        return pid

    def hold_in_flight(self, delivery: Delivery) -> None:
        """Puts ``delivery`` in ``outgoing`` under its packet id (the only writer), its
        size counted in ``inflight_bytes``."""
        outgoing = self.outgoing
        if outgoing is _NOTHING_IN_FLIGHT:
            outgoing = self.outgoing = {}
        outgoing[delivery.packet_id] = delivery
        size = delivery.size
        self.inflight_bytes += size
        self.counters.inflight_bytes += size

    def release(self, delivery: Delivery) -> None:
        """QoS 2: PUBREC arrived, PUBREL goes out."""
        delivery.released = True
        if self.journal is not None:
            self.journal.released(self, delivery)

    def complete(self, packet_id: int) -> Delivery | None:
        """The flow of an in-flight delivery ended (acknowledged or refused)."""
        delivery = self.outgoing.pop(packet_id, None)
        if delivery is not None:
            size = delivery.size
            self.inflight_bytes -= size
            self.counters.inflight_bytes -= size
            if delivery.key:
                self.discard(delivery)
        return delivery

    def clear_in_flight(self) -> None:
        """Forgets what is in flight without completing it (the session ends)."""
        self.outgoing.clear()
        self.counters.inflight_bytes -= self.inflight_bytes
        self.inflight_bytes = 0

    def discard(self, delivery: Delivery) -> None:
        """A delivery leaves the session for good (done, dropped or expired)."""
        if delivery.key and self.journal is not None:
            self.journal.completed(self, delivery)

    def add_incoming(self, packet_id: int) -> None:
        """A QoS 2 PUBLISH arrived: its packet id awaits PUBREL. Not journaled here: the
        broker records it (``record_incoming``) once the message is in every durable
        store it went to, else a kill could leave the id received, the message missing
        there, and the publisher's resend taken for a duplicate."""
        if self.incoming_qos2 is None:
            self.incoming_qos2 = set()
        self.incoming_qos2.add(packet_id)

    def record_incoming(self, packet_id: int) -> None:
        """Journals that ``packet_id`` awaits PUBREL (``add_incoming``)."""
        if self.journal is not None and packet_id in (self.incoming_qos2 or ()):
            self.journal.incoming_added(self, packet_id)

    def release_incoming(self, packet_id: int) -> None:
        """A journaled session's PUBREL for ``packet_id``, awaiting PUBREL: no longer
        counted as awaiting it (room for the client's next QoS 2 message), but its record
        stays, and a PUBLISH with the id is still a duplicate, until the PUBCOMP goes out
        (``complete_released``). The client cannot use the id for a new message before
        it has that PUBCOMP; a client that resends the PUBLISH after its PUBREL (paho
        2.2 does, after two reconnections in a row) would have it routed again, and, had
        the record been removed when the PUBREL arrived, after a kill too."""
        incoming = self.incoming_qos2
        if incoming is not None and packet_id in incoming:
            incoming.discard(packet_id)
            released = self.released_qos2
            if released is None:
                self.released_qos2 = {packet_id}
            else:
                released.add(packet_id)

    def complete_released(self, packet_id: int) -> bool:
        """The PUBCOMP of a released id is about to go out on a live connection: its
        record is removed (journaled), and the PUBCOMP goes once that is committed.
        False when ``packet_id`` is not released (another PUBREL's PUBCOMP did it)."""
        released = self.released_qos2
        if released is None or packet_id not in released:
            return False
        released.discard(packet_id)
        if self.journal is not None:
            self.journal.incoming_removed(self, packet_id)
        return True

    def keep_released(self, packet_id: int) -> None:
        """The PUBCOMP of a released id (``complete_released``) will not be sent after
        all, the connection closed while its record's removal was being committed: the
        id is released again and its record written back."""
        if packet_id in (self.incoming_qos2 or ()):
            return
        released = self.released_qos2
        if released is None:
            self.released_qos2 = {packet_id}
        else:
            released.add(packet_id)
        if self.journal is not None:
            self.journal.incoming_added(self, packet_id)

    def remove_incoming(self, packet_id: int) -> None:
        incoming = self.incoming_qos2
        if incoming is not None and packet_id in incoming:
            incoming.discard(packet_id)
            if self.journal is not None:
                self.journal.incoming_removed(self, packet_id)

    def allocate_packet_id(self) -> int:
        """The next packet id not in flight (1..65535, wrapping) [MQTT-2.2.1-3]."""
        pid = self.next_packet_id
        outgoing = self.outgoing
        while pid in outgoing:
            pid = pid + 1 if pid < 0xFFFF else 1
        self.next_packet_id = pid + 1 if pid < 0xFFFF else 1
        return pid
