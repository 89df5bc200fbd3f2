"""The server-to-client half of a session: delivering application messages.

QoS 0 goes out at once; QoS 1 and 2 go through the inflight window (the smaller of
``max_inflight`` and the client's Receive Maximum) and wait in the session's bounded
queue beyond it, or while the transport is paused at its write high-water mark.
PUBACK, PUBREC and PUBCOMP free the window; on a resumed session the messages still
in flight are resent first, with DUP, as the window allows [MQTT-4.4.0-1,
MQTT-3.3.4-9]. Expired messages are dropped, and messages larger than the client's
Maximum Packet Size are skipped as if sent [MQTT-3.1.2-25]; both are counted.

``Session`` inherits this; the attributes below are its.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from broker_core.context import Context
from broker_core.mqtt.delivery import publish_parts
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import Puback, Pubcomp, Pubrec, Pubrel
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session_state import Delivery, SessionState
from broker_core.mqtt.states import ConnState

__all__ = ["OutgoingFlow"]


class OutgoingFlow:
    __slots__ = ("writable",)  # False while the transport is paused at its high-water mark

    # Provided by Session.
    state: SessionState | None
    conn_state: ConnState
    counters: Any
    wakeup: Callable[[], None] | None
    client_max_packet_size: int
    protocol_level: int
    _v5: bool
    _window: int
    _out: list[bytes]
    _resend: deque[Delivery]

    def _send(self, data: bytes) -> None:
        raise NotImplementedError

    def set_writable(self, writable: bool, now: float) -> None:
        """The driver's transport crossed its write high-water mark (False) or drained."""
        self.writable = writable
        if writable and self.conn_state is ConnState.CONNECTED:
            self._drain(now)

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
        if state is None or self.conn_state is not ConnState.CONNECTED:
            if state is not None and (qos or state.limits.queue_qos0_offline):
                state.enqueue(Delivery(context, qos, retain, subscription_ids))
            return
        if not self.writable or (qos and (state.queue or len(state.outgoing) >= self._window)):
            # Paused at the write high-water mark, or over the inflight window: queue
            # (bounded, overflow by policy). QoS 0 skips a backlog of QoS 1/2 messages.
            state.enqueue(Delivery(context, qos, retain, subscription_ids))
            return
        if context.properties.message_expiry_interval is not None:
            remaining = context.expiry_remaining(now)
            if remaining is not None and remaining <= 0:
                self.counters.dropped_expired += 1
                return
        v5 = self._v5
        key = (v5, qos, retain, subscription_ids if v5 else ())  # see mqtt.delivery
        parts = cache.get(key)
        if parts is None:
            prefix, suffix = publish_parts(context, qos, retain, subscription_ids, v5, now)
            parts = cache[key] = (prefix + suffix if not qos else prefix, suffix)
        self._send_publish(parts, context, qos, retain, subscription_ids)

    def _send_publish(
        self,
        parts: tuple[bytes, bytes],
        context: Context,
        qos: int,
        retain: bool,
        subscription_ids: tuple[int, ...],
    ) -> None:
        prefix, suffix = parts
        counters = self.counters
        if not qos:
            if len(prefix) > self.client_max_packet_size:
                counters.dropped_too_large += 1  # [MQTT-3.1.2-25]
                return
            out = self._out
            out.append(prefix)
            if len(out) == 1 and self.wakeup is not None:
                self.wakeup()  # as _send does, inlined on the QoS 0 path
            counters.messages_sent += 1
            return
        if len(prefix) + 2 + len(suffix) > self.client_max_packet_size:
            counters.dropped_too_large += 1
            return
        state = self.state
        assert state is not None
        pid = state.track(Delivery(context, qos, retain, subscription_ids))
        self._send(prefix + bytes((pid >> 8, pid & 0xFF)) + suffix)
        counters.messages_sent += 1

    def _send_delivery(self, delivery: Delivery, now: float, dup: bool = False) -> None:
        """Sends a queued or in-flight ``Delivery`` (encoded for this client alone)."""
        context = delivery.context
        if not dup and context.properties.message_expiry_interval is not None:
            remaining = context.expiry_remaining(now)
            if remaining is not None and remaining <= 0:
                self.counters.dropped_expired += 1
                if self.state is not None:
                    self.state.discard(delivery)
                return
        prefix, suffix = publish_parts(
            context, delivery.qos, delivery.retain, delivery.subscription_ids, self._v5, now, dup
        )
        if not delivery.qos:
            self._send_publish((prefix + suffix, b""), context, 0, delivery.retain, ())
            return
        state = self.state
        assert state is not None
        if len(prefix) + 2 + len(suffix) > self.client_max_packet_size:
            self.counters.dropped_too_large += 1
            if dup:
                state.complete(delivery.packet_id)
            else:
                state.discard(delivery)
            return
        pid = delivery.packet_id if dup else state.track(delivery)
        self._send(prefix + bytes((pid >> 8, pid & 0xFF)) + suffix)
        self.counters.messages_sent += 1

    def _resend_inflight(self, now: float) -> None:
        """Unacknowledged PUBLISH (DUP set) and PUBREL, original ids [MQTT-4.4.0-1]."""
        state = self.state
        assert state is not None
        for count, delivery in enumerate(list(state.outgoing.values())):
            if count >= self._window:
                # More in flight than this connection's window: the rest follow as
                # acknowledgements free the window [MQTT-3.3.4-9].
                self._resend.append(delivery)
            elif delivery.released:
                self._send(encode(Pubrel(delivery.packet_id), self.protocol_level))
            else:
                self._send_delivery(delivery, now, dup=True)

    def _drain(self, now: float) -> None:
        state = self.state
        if state is None:
            return
        resend = self._resend
        while resend and self.writable and len(state.outgoing) - len(resend) < self._window:
            delivery = resend.popleft()
            if state.outgoing.get(delivery.packet_id) is not delivery:
                continue
            if delivery.released:
                self._send(encode(Pubrel(delivery.packet_id), self.protocol_level))
            else:
                self._send_delivery(delivery, now, dup=True)
        queue = state.queue
        while queue and self.writable and self.conn_state is ConnState.CONNECTED:
            if queue[0].qos and len(state.outgoing) >= self._window:
                return
            self._send_delivery(state.dequeue(), now)

    def _on_puback(self, packet: Puback, now: float) -> None:
        state = self.state
        assert state is not None
        delivery = state.outgoing.get(packet.packet_id)
        if delivery is not None and delivery.qos == 1:
            state.complete(packet.packet_id)
            if state.queue or self._resend:
                self._drain(now)

    def _on_pubrec(self, packet: Pubrec, now: float) -> None:
        state = self.state
        assert state is not None
        pid = packet.packet_id
        delivery = state.outgoing.get(pid)
        if delivery is None or delivery.qos != 2:
            if self._v5:
                self._send(encode(Pubrel(pid, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND), 5))
            else:
                self._send(bytes((0x62, 2, pid >> 8, pid & 0xFF)))
            return
        if packet.reason_code >= 0x80:
            state.complete(pid)  # the receiver refused it: the flow ends (4.3.3)
            self._drain(now)
            return
        state.release(delivery)
        self._send(bytes((0x62, 2, pid >> 8, pid & 0xFF)))

    def _on_pubcomp(self, packet: Pubcomp, now: float) -> None:
        state = self.state
        assert state is not None
        delivery = state.outgoing.get(packet.packet_id)
        if delivery is not None and delivery.released:
            state.complete(packet.packet_id)
            if state.queue or self._resend:
                self._drain(now)
