"""``Outgoing``: the server-to-client flow of application messages on one connection.

A ``Session`` builds one when it accepts the connection and hands it to its
``SessionState`` (``state.sending``), which gives it every message routed to the client
while the connection is CONNECTED; before and after that the state holds messages
itself (``SessionState.hold``). The flow owns the inflight window (the smaller of
``max_inflight`` and the client's Receive Maximum), the resend of what was in flight
when the session resumed, and whether the transport takes more (``writable``); it writes
into the session's output (``out``, read with ``Session.data_to_send``) and calls
its ``waker`` when that output stops being empty.

Each message goes through these states (MQTT 5.0 sections 4.3, 4.4, 4.9; 3.1.1
sections 4.3, 4.4); the packet id is allocated when it goes in flight:

===============  ========================================  =========================  ===========
state            input                                     action                     next
===============  ========================================  =========================  ===========
(routed)         QoS 0, writable                           PUBLISH                    done
(routed)         QoS 1/2, writable, window open, no queue  PUBLISH with a packet id   IN_FLIGHT
(routed)         not writable, window or bytes full, or a  append to the session's    QUEUED
                 queue (QoS 0 only when not writable)      bounded queue [MQTT-4.9]
QUEUED           window opens (PUBACK, PUBREC >= 0x80,     PUBLISH (QoS 0: no id)     IN_FLIGHT
                 PUBCOMP) or the transport drains                                     (QoS 0: done)
IN_FLIGHT        PUBACK, QoS 1                             MessageAcked               done
IN_FLIGHT        PUBREC < 0x80, QoS 2                      PUBREL (once committed)    RELEASED
IN_FLIGHT        PUBREC >= 0x80, QoS 2                     the flow ends (4.3.3)      done
RELEASED         PUBCOMP                                   MessageAcked               done
IN_FLIGHT        session resumed [MQTT-4.4.0-1]            PUBLISH again, DUP set,    IN_FLIGHT
                                                           as the window allows
RELEASED         session resumed                           PUBREL again               RELEASED
routed, QUEUED   Message Expiry Interval passed            dropped (``expired``)      done
routed, QUEUED   larger than the client's Maximum Packet   dropped (``too_large``)    done
                 Size [MQTT-3.1.2-25]
===============  ========================================  =========================  ===========

"Bytes full": the client's in-flight messages would pass ``max_inflight_bytes`` (while
at least one is in flight: a larger message still goes alone), or all queues and
in-flight messages would pass ``max_queued_bytes_total`` (then the queue's overflow
policy decides). Sizes are ``Delivery.size``, computed once per routed message and
shared by its recipients through the fan-out's ``cache``.

A persistent session's PUBREL goes out once its ``released`` mark is committed (the
session's ``when_durable``): a kill before that resends the PUBLISH, never after. A new
QoS 2 PUBLISH to it likewise goes out once its packet id is committed (``_send_qos2``).

A PUBACK, PUBREC or PUBCOMP for a packet id not in flight is ignored, except that a
PUBREC gets PUBREL 0x92 (MQTT 5). Drops are counted in the broker's ``Counters`` and
reported to the ``MessageObserver`` (``mqtt.observer``) when it watches them.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.mqtt.delivery import publish_parts
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import Puback, Pubcomp, Pubrec, Pubrel
from broker_core.mqtt.properties import EMPTY
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session_state import SIZE_KEY, Delivery, SessionState

if TYPE_CHECKING:
    from broker_core.context import Context

__all__ = ["Outgoing", "Waker"]


class Waker(Protocol):
    """The driver of a connection, told when its output stops being empty (it then
    schedules a flush). An object rather than a callback: a bound method stored per
    client costs 64 bytes."""

    def wakeup(self) -> None: ...


class Outgoing:
    """The outgoing flow of one connection; see the module's table."""

    __slots__ = (
        "_resend",
        "client",
        "counters",
        "max_bytes_total",
        "max_inflight_bytes",
        "max_packet_size",
        "observer",
        "out",
        "protocol_level",
        "state",
        "v5",
        "waker",
        "window",
        "writable",
    )

    def __init__(
        self,
        client: Any,
        state: SessionState,
        out: list[bytes],
        waker: Waker | None,
        protocol_level: int,
        window: int,
        max_packet_size: int,
        writable: bool = True,
    ) -> None:
        self.client = client  # the Session, named in the observer's events
        self.state = state
        self.counters = state.counters
        self.observer = state.observer
        self.out = out  # the session's output buffer, shared
        self.waker = waker
        self.protocol_level = protocol_level
        self.v5 = protocol_level == 5
        self.window = window
        self.max_packet_size = max_packet_size
        self.max_inflight_bytes = state.limits.max_inflight_bytes
        self.max_bytes_total = state.limits.max_queued_bytes_total
        self.writable = writable  # False while the transport is at its high-water mark
        # In flight when the session resumed, beyond the window: resent as it opens.
        self._resend: deque[Delivery] | None = None

    @property
    def open(self) -> bool:
        """The connection is CONNECTED: its state sends through this flow."""
        return self.state.sending is self

    def _send(self, data: bytes) -> None:
        out = self.out
        out.append(data)
        if len(out) == 1 and self.waker is not None:
            self.waker.wakeup()

    # -- commands ---------------------------------------------------------------------------

    def start(self, session_present: bool, now: float) -> None:
        """The connection was accepted: resend what was in flight, then the queue (a
        new session has neither)."""
        if session_present:
            self._resend_inflight(now)
            self.drain(now)

    def set_writable(self, writable: bool, now: float) -> None:
        """The transport crossed its write high-water mark (False) or drained (True)."""
        self.writable = writable
        if writable and self.open:
            self.drain(now)

    def deliver(
        self,
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        cache: dict[Any, Any],
        now: float,
    ) -> None:
        """Sends an application message now, or queues it behind the inflight window."""
        state = self.state
        size = -1
        if qos:
            size = cache.get(SIZE_KEY, -1)
            if size < 0:
                # message_size, inlined: once per routed message
                props = context.properties
                size = len(context.topic) + len(context.payload)
                if props is not EMPTY:
                    size += len(props.encoded())
                cache[SIZE_KEY] = size
            outgoing = state.outgoing
            counters = self.counters
            if (
                state.queue
                or len(outgoing) >= self.window
                or (outgoing and state.inflight_bytes + size > self.max_inflight_bytes)
                or counters.queued_bytes + counters.inflight_bytes + size > self.max_bytes_total
            ):
                # Over the inflight window or its bytes: queue (bounded, overflow by
                # policy); the hits of max_inflight_bytes are counted.
                if outgoing and state.inflight_bytes + size > self.max_inflight_bytes:
                    counters.hit("inflight_bytes")
                state.enqueue(Delivery(context, qos, retain, subscription_ids, size))
                return
        if not self.writable:
            # Paused at the write high-water mark: queue. QoS 0 skips a backlog of QoS
            # 1/2 messages.
            state.enqueue(Delivery(context, qos, retain, subscription_ids, size))
            return
        if context.properties.message_expiry_interval:
            # Not an interval of 0: that message is sent when its delivery starts at
            # once, here, with an interval of 0 (MQTT 5.0 3.3.2.3.3); it is never queued.
            remaining = context.expiry_remaining(now)
            if remaining is not None and remaining <= 0:
                self._drop(context, "expired", now)
                return
        v5 = self.v5
        key = (v5, qos, retain, subscription_ids if v5 else ())  # see mqtt.delivery
        parts = cache.get(key)
        if parts is None:
            prefix, suffix = publish_parts(context, qos, retain, subscription_ids, v5, now)
            parts = cache[key] = (prefix + suffix if not qos else prefix, suffix)
        self._send_publish(parts, context, qos, retain, subscription_ids, now, size)

    def drain(self, now: float) -> None:
        """Sends what waits (resends first) as far as the window and the transport allow."""
        state = self.state
        resend = self._resend
        while resend and self.writable and len(state.outgoing) - len(resend) < self.window:
            delivery = resend.popleft()
            if state.outgoing.get(delivery.packet_id) is not delivery:
                continue
            if delivery.released:
                self._send(encode(Pubrel(delivery.packet_id), self.protocol_level))
            else:
                self._send_delivery(delivery, now, dup=True)
        queue = state.queue
        while queue and self.writable and self.open:
            head = queue[0]
            if head.qos and (
                len(state.outgoing) >= self.window
                or (state.outgoing and state.inflight_bytes + head.size > self.max_inflight_bytes)
            ):
                return
            self._send_delivery(state.dequeue(), now)

    # -- acknowledgements from the client ---------------------------------------------------

    def on_puback(self, packet: Puback, now: float) -> None:
        state = self.state
        delivery = state.outgoing.get(packet.packet_id)
        if delivery is not None and delivery.qos == 1:
            state.complete(packet.packet_id)
            if self.observer.message_acked:
                self.observer.report_acked(self.client, delivery.context, 1, packet.packet_id, now)
            if state.queue or self._resend:
                self.drain(now)

    def on_pubrec(self, packet: Pubrec, now: float) -> None:
        state = self.state
        pid = packet.packet_id
        delivery = state.outgoing.get(pid)
        if delivery is None or delivery.qos != 2:
            if self.v5:
                self._send(encode(Pubrel(pid, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND), 5))
            else:
                self._send(bytes((0x62, 2, pid >> 8, pid & 0xFF)))
            return
        if packet.reason_code >= 0x80:
            state.complete(pid)  # the receiver refused it: the flow ends (4.3.3)
            self.drain(now)
            return
        state.release(delivery)
        data = bytes((0x62, 2, pid >> 8, pid & 0xFF))
        when_durable = self.client.when_durable
        if when_durable is not None and state.journal is not None:
            # Only once the release is committed: a kill before it would resend the
            # PUBLISH, a duplicate, where the receiver owns the message (4.3.3).
            when_durable(self.client, data)
        else:
            self._send(data)

    def on_pubcomp(self, packet: Pubcomp, now: float) -> None:
        state = self.state
        delivery = state.outgoing.get(packet.packet_id)
        if delivery is not None and delivery.released:
            state.complete(packet.packet_id)
            if self.observer.message_acked:
                self.observer.report_acked(self.client, delivery.context, 2, packet.packet_id, now)
            if state.queue or self._resend:
                self.drain(now)

    # -- internals --------------------------------------------------------------------------

    def _send_publish(
        self,
        parts: tuple[bytes, bytes],
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
        now: float,
        size: int = -1,
    ) -> None:
        prefix, suffix = parts
        counters = self.counters
        if not qos:
            if len(prefix) > self.max_packet_size:
                self._drop(context, "too_large", now)  # [MQTT-3.1.2-25]
                return
            out = self.out
            out.append(prefix)
            if len(out) == 1 and self.waker is not None:
                self.waker.wakeup()  # as _send does, inlined on the QoS 0 path
            counters.messages_sent += 1
            if self.observer.message_delivered:
                self.observer.report_delivered(self.client, context, 0, retain, now)
            return
        if len(prefix) + 2 + len(suffix) > self.max_packet_size:
            self._drop(context, "too_large", now)
            return
        state = self.state
        pid = state.track(Delivery(context, qos, retain, subscription_ids, size))
        if qos == 2 and state.journal is not None:
            self._send_qos2(prefix + bytes((pid >> 8, pid & 0xFF)) + suffix)
        else:
            self._send(prefix + bytes((pid >> 8, pid & 0xFF)) + suffix)
        counters.messages_sent += 1
        if self.observer.message_delivered:
            self.observer.report_delivered(self.client, context, qos, retain, now)

    def _send_delivery(self, delivery: Delivery, now: float, dup: bool = False) -> None:
        """Sends a queued or in-flight ``Delivery`` (encoded for this client alone)."""
        context = delivery.context
        state = self.state
        if not dup and context.properties.message_expiry_interval is not None:
            remaining = context.expiry_remaining(now)
            if remaining is not None and remaining <= 0:
                self._drop(context, "expired", now)
                state.discard(delivery)
                return
        prefix, suffix = publish_parts(
            context, delivery.qos, delivery.retain, delivery.subscription_ids, self.v5, now, dup
        )
        if not delivery.qos:
            self._send_publish((prefix + suffix, b""), context, 0, delivery.retain, (), now)
            return
        if len(prefix) + 2 + len(suffix) > self.max_packet_size:
            self._drop(context, "too_large", now)
            if dup:
                state.complete(delivery.packet_id)
            else:
                state.discard(delivery)
            return
        pid = delivery.packet_id if dup else state.track(delivery)
        if delivery.qos == 2 and not dup and state.journal is not None:
            self._send_qos2(prefix + bytes((pid >> 8, pid & 0xFF)) + suffix)
        else:
            self._send(prefix + bytes((pid >> 8, pid & 0xFF)) + suffix)
        self.counters.messages_sent += 1
        if not dup and self.observer.message_delivered:
            self.observer.report_delivered(self.client, context, delivery.qos, delivery.retain, now)

    def _send_qos2(self, data: bytes) -> None:
        """A persistent session's new QoS 2 PUBLISH: once its packet id is committed
        (``SessionState.track``). Sent before, a kill could leave the client holding the
        id (PUBREC sent, awaiting PUBREL) while the restarted broker, which never
        recorded it, gives the id to another message, which the client then takes for a
        duplicate (lost), and sends the first message again under a new id."""
        when_durable = self.client.when_durable
        if when_durable is not None:
            when_durable(self.client, data)
        else:
            self._send(data)

    def _resend_inflight(self, now: float) -> None:
        """Unacknowledged PUBLISH (DUP set) and PUBREL, original ids [MQTT-4.4.0-1]."""
        for count, delivery in enumerate(list(self.state.outgoing.values())):
            if count >= self.window:
                # More in flight than this connection's window: the rest follow as
                # acknowledgements free the window [MQTT-3.3.4-9].
                if self._resend is None:
                    self._resend = deque()
                self._resend.append(delivery)
            elif delivery.released:
                self._send(encode(Pubrel(delivery.packet_id), self.protocol_level))
            else:
                self._send_delivery(delivery, now, dup=True)

    def _drop(self, context: Context, reason: str, now: float) -> None:
        """``expired`` or ``too_large``: counted, and reported when drops are watched."""
        counters = self.counters
        if reason == "expired":
            counters.dropped_expired += 1
        else:
            counters.dropped_too_large += 1
        if self.observer.message_dropped:
            self.state.report_drop(context, reason, now)
