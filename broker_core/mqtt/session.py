"""``Session``: the server side of one MQTT network connection, without I/O.

Feed it bytes with ``receive_data(data, now)``, read what it decided with ``events()``
and what to write with ``data_to_send()``; answer events with the commands
(``accept``, ``reject``, ``acknowledge``, ``suback``, ``unsuback``, ``disconnect``).
Application messages for the client go to its ``SessionState`` (``deliver``), which
passes them to this connection's ``Outgoing`` flow while it is connected. It never
reads a clock: ``now`` (seconds on the broker's clock, ``broker_core.clock``) is passed
in and ``next_deadline()`` says when ``handle_timeout`` is next due. Keep alive counts
from the last complete Control Packet received, not from the last byte.

Connection states (MQTT 5.0 sections 3.1, 3.14, 4.1, 4.13; 3.1.1 sections 3.1, 3.14):

==============  ===============================  =====================================  ============
state           input                            action                                 next
==============  ===============================  =====================================  ============
AWAIT_CONNECT   CONNECT                          ConnectRequested                       CONNECTING
AWAIT_CONNECT   any other packet                 close, no CONNACK [MQTT-3.1.0-1]       CLOSED
AWAIT_CONNECT   no CONNECT within the timeout    close                                  CLOSED
CONNECTING      accept()                         CONNACK 0x00; the Outgoing flow        CONNECTED
                                                 starts: resend in-flight, drain queue
                                                 [MQTT-4.4.0-1] (mqtt.outgoing)
CONNECTING      reject(code)                     CONNACK code, close [MQTT-3.2.2-7]     CLOSED
CONNECTING      auth_continue() / AUTH           AUTH 0x18 / AuthReceived (4.12)        CONNECTING
CONNECTING      other packets                    held, handled once accepted            CONNECTING
                                                 (``handle_held``)
any             second CONNECT                   protocol error [MQTT-3.1.0-2]          CLOSED
CONNECTED       PUBLISH, SUBSCRIBE, ...          events; acks (4.3, 4.4)                CONNECTED
CONNECTED       3.1.1 QoS 2 PUBLISH over         held with what follows, in order,      CONNECTED
                receive_maximum                  until a PUBREL makes room (_Waiting)
CONNECTED       DISCONNECT                       DisconnectReceived (3.14.4)            CLOSED
CONNECTED       1.5 x keep alive of silence      v5 DISCONNECT 0x8D; close              CLOSED
                                                 [MQTT-3.1.2-22] (3.1.1: -24)
any             malformed packet, violation      v5: CONNACK/DISCONNECT with the        CLOSED
                                                 reason code (4.13); close
CONNECTING      a packet behind the CONNECT      kept until the CONNECT is decided:     CONNECTING
                fails to decode, a second        accepted, it closes the connection
                CONNECT, an AUTH with no         as above after the held packets
                authentication method            (v5: CONNACK 0x00, DISCONNECT 0x81,
                                                 0x82)
==============  ===============================  =====================================  ============

Entering CLOSED, the session state stops sending through this connection
(``SessionState.sending``): from then on it holds what is routed to the client.
"""

from __future__ import annotations

import enum
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from broker_core.errors import ProtocolError, ProtocolViolation
from broker_core.mqtt.aliases import TopicAliases
from broker_core.mqtt.codec import Decoder, UnsupportedProtocolVersion
from broker_core.mqtt.connack import fitted_connack
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.events import (
    AuthReceived,
    ConnectionClosing,
    ConnectRequested,
    DisconnectReceived,
    Event,
    SubscribeRequested,
    UnsubscribeRequested,
    new_publish_received,
)
from broker_core.mqtt.limits import MAX_PACKET, ServerLimits
from broker_core.mqtt.observer import UNOBSERVED, MessageObserver
from broker_core.mqtt.outgoing import Outgoing, Waker
from broker_core.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    Will,
)
from broker_core.mqtt.properties import (
    EMPTY,
    Properties,
    PropertyLimitExceeded,
    PropertyLimits,
)
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session_state import SessionState
from broker_core.origin import new_origin

__all__ = ["ConnState", "Session"]

# Packets held while CONNECT awaits the broker's answer: at most this many, and PUBLISH
# packets of at most twice the maximum packet size together.
_HELD_LIMIT = 1000


class _Waiting(Exception):
    """Internal: an MQTT 3.1.1 or 3.1 client's QoS 2 PUBLISH found ``receive_maximum``
    QoS 2 messages awaiting PUBREL (``Session._on_publish``); ``_handle_all`` holds it and
    what follows (``Session._hold``)."""


class _Held:
    """The packets held behind a 3.1.1 client's QoS 2 PUBLISH over ``receive_maximum``:
    at most ``_HELD_LIMIT``, and PUBLISH topics and payloads of at most twice the maximum
    packet size together (as before CONNACK)."""

    __slots__ = ("bytes", "packets")

    def __init__(self) -> None:
        self.packets: list[Packet] = []
        self.bytes = 0


class _Released(bytes):
    """A persistent session's PUBCOMP for a released packet id (``SessionState.
    release_incoming``), at its turn (``when_durable``): the id's record is removed then,
    on a live connection only, and the PUBCOMP goes once that is committed
    (``_Completing``); a closed connection leaves the record (the PUBCOMP is not sent)."""


class _Completing(bytes):
    """That PUBCOMP, its record's removal committed: sent, or, the connection closed
    meanwhile, the id released again (``SessionState.keep_released``)."""


# Protocol errors that are a bound reached, by reason code: counted in Counters.limit_hits.
_LIMITS: dict[int, str] = {
    ReasonCode.PACKET_TOO_LARGE: "packet_size",
    ReasonCode.RECEIVE_MAXIMUM_EXCEEDED: "receive_maximum",
    ReasonCode.TOPIC_ALIAS_INVALID: "topic_alias",
}


# CONNACK 0x00 before MQTT 5, by session present: nothing in it to encode per client.
# MQTT 3.1 has no session present flag: its first byte is reserved, always 0.
_CONNACK_ACCEPTED = (b"\x20\x02\x00\x00", b"\x20\x02\x01\x00")


# ``Session._late_acks`` of a connection the client's DISCONNECT closed: nothing of the
# server's follows, so late acknowledgements are appended.
_AFTER_DISCONNECT = sys.maxsize


# The origin of a connection not accepted yet (``accept`` gives it its own).
_NOT_CONNECTED = new_origin("mqtt", "", None, None)


@functools.lru_cache(maxsize=8)
def _property_limits(count: int, size: int) -> PropertyLimits:
    """One (frozen) PropertyLimits shared by every session with the same limits."""
    return PropertyLimits(count, size)


class ConnState(enum.Enum):
    """The states of one MQTT network connection (the table above)."""

    AWAIT_CONNECT = "await_connect"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    CLOSED = "closed"


class Session:
    """One MQTT connection's protocol state; attach a ``SessionState`` with ``accept``.

    The server-to-client flow of application messages is an ``Outgoing`` (its own
    state machine, ``mqtt.outgoing``), built on ``accept`` and handed to the state.
    """

    __slots__ = (
        "_aliases",
        "_carried_qos2",
        "_completing",
        "_error_after_connect",
        "_events",
        "_held",
        "_held_bytes",
        "_last_rx",
        "_late_acks",
        "_out",
        "_v5",
        "_v5_expiry_asked",
        "_waiting",
        "acks_held",
        "acks_received",
        "clean_start",
        "close_reason",
        "closed",
        "conn_state",
        "connect",
        "counters",
        "credential",
        "decoder",
        "keep_alive",
        "limits",
        "observer",
        "origin",
        "outgoing",
        "peer",
        "protocol_level",
        "qos1_unacked",
        "state",
        "waker",
        "when_durable",
        "will",
        "will_size",
        "writable",
    )

    def __init__(
        self,
        limits: ServerLimits,
        now: float,
        peer: str | None = None,
        counters: Any = None,
        observer: MessageObserver = UNOBSERVED,
    ) -> None:
        self.limits = limits
        self.decoder = Decoder(
            limits.max_packet_size,
            property_limits=_property_limits(
                limits.max_packet_properties, limits.max_packet_properties_bytes
            ),
            read_budget=limits.read_budget,
        )
        self.conn_state = ConnState.AWAIT_CONNECT
        #: True from the moment the connection is CLOSED (``conn_state``), read on every
        #: input and flush: an attribute, not a property.
        self.closed = False
        self.protocol_level = 4
        self._v5 = False
        self.peer = peer
        self.state: SessionState | None = None
        self.counters: Any = counters  # the broker's Counters (the state's, once accepted)
        self.observer = observer
        # The CONNECT, until accepted; kept after that only when re-authentication may
        # read it again (MQTT 5 with an authentication method): ~160 bytes a client.
        self.connect: Connect | None = None
        self.clean_start = False  # the CONNECT's clean session / clean start flag
        self._v5_expiry_asked = False  # an MQTT 5 CONNECT asked for a session expiry
        self.origin = _NOT_CONNECTED  # until accept(): nothing reads it before
        # ``AuthResult.credential`` of the accepted CONNECT (or re-authentication): the
        # password file entry it proved, shared with the file's table; else None.
        self.credential: object | None = None
        self.keep_alive = 0
        self.will: Will | None = None
        # What the broker counts of ``will`` in max_will_bytes_total while connected
        # (broker_core.connect sets it, SessionRegistry.end_connection gives it back).
        self.will_size = 0
        self.close_reason: int | None = None
        self.writable = True  # False while the transport is at its write high-water mark
        # Told when data_to_send() stops being empty (the driver); set it before accept().
        self.waker: Waker | None = None
        self.outgoing: Outgoing | None = None  # built by accept()
        self.acks_held = 0  # acknowledgements waiting for the store to commit
        # Sends a QoS 2 flow's PUBCOMP or PUBREL (``send_acknowledgement``) once what the
        # packet changed in the store is committed, in order with the PUBACK / PUBREC
        # held for the same reason (the broker's ``Broker.when_durable``, set before
        # ``accept``); None: at once (no store, a unit test).
        self.when_durable: Callable[[Session, bytes], None] | None = None
        # QoS 1 PUBLISH packets received and not PUBACKed yet, from an MQTT 5 client
        # (told the Receive Maximum in CONNACK): with the QoS 2 ones not PUBCOMPed
        # (``SessionState.incoming_qos2``) at most ``receive_maximum`` (3.3.4).
        self.qos1_unacked = 0
        # The QoS 2 PUBLISH an earlier connection left awaiting PUBREL: not counted
        # against this connection's Receive Maximum, whose quota the client starts
        # afresh (MQTT 5.0 4.9 [MQTT-4.9.0-1]); None when there were none.
        self._carried_qos2: set[int] | None = None
        # Released QoS 2 packet ids whose record's removal is written and whose PUBCOMP
        # waits for its commit (``_Completing``): written back should the connection
        # close first (``_enter_closed``); None: none.
        self._completing: set[int] | None = None
        # Closed for a protocol error (exceeding receive_maximum, a malformed packet):
        # the acknowledgements of the packets before the one that failed still go out,
        # before the DISCONNECT (the index in ``_out`` they go to); closed by the
        # client's DISCONNECT: those of the packets before it (SUBACK [MQTT-3.8.4-1],
        # PUBACK), the driver's close waiting for those held for a commit
        # (``acks_due``): _AFTER_DISCONNECT; else -1.
        self._late_acks = -1
        # The input being handled acknowledged a delivery (PUBACK, PUBREC, PUBCOMP); the
        # driver reads and clears it (``MqttConnection.data_received``).
        self.acks_received = False
        self._aliases: TopicAliases | None = None  # built on the first alias
        self._events: list[Event] | None = None  # built on the first event
        self._held: list[Packet] | None = None  # while CONNECTING, built on the first
        self._held_bytes = 0  # PUBLISH payload and topic bytes in _held
        self._out: list[bytes] = []  # shared with the Outgoing; emptied in place
        # An MQTT 3.1.1 / 3.1 client's packets held from a QoS 2 PUBLISH over
        # receive_maximum until a PUBREL makes room (``_hold``); None: none held.
        self._waiting: _Held | None = None
        # A decoding error in what followed a CONNECT not decided yet: raised once it is
        # accepted, after the packets before it (``handle_held``); None: none.
        self._error_after_connect: ProtocolError | None = None
        # When the last complete packet arrived once CONNECTED (keep alive); before that,
        # when the connection opened: the CONNECT must arrive within connect_timeout_s of it.
        self._last_rx = now

    # -- driver interface -------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> None:
        conn_state = self.conn_state
        if conn_state is ConnState.CLOSED:
            return
        elif (
            conn_state is ConnState.AWAIT_CONNECT
            and data
            and data[0] != 0x10
            and not self.decoder.buffered
        ):
            # Not even the start of a CONNECT: no need to wait for the rest [MQTT-3.1.0-1].
            self._fail(ProtocolViolation("the first packet must be CONNECT"))
            return
        try:
            packets = self.decoder.feed(data)
        except ProtocolError as exc:
            if exc is not self._error_after_connect:  # else: known, its turn to come
                self._fail(exc)
            return
        if packets and conn_state is ConnState.CONNECTED:
            # Keep alive restarts with a complete Control Packet, not with any byte:
            # a packet dribbled a byte at a time does not keep a client connected
            # (MQTT 3.1.1 [MQTT-3.1.2-24], MQTT 5.0 [MQTT-3.1.2-22]).
            self._last_rx = now
        self._handle_all(packets, now)
        error = self.decoder.error
        if error is not None and self.conn_state is not ConnState.CLOSED:
            self._fail(error)

    def events(self) -> Sequence[Event]:
        events = self._events
        if events is None:
            return ()
        self._events = None
        return events

    @property
    def acks_due(self) -> bool:
        """Closed by the client's DISCONNECT or for a protocol error of a connected
        client, acknowledgements of packets it sent before wait for the store's commit
        (``acks_held``): the driver writes what goes before them
        (``data_before_acks``) and closes once they are written (each wakes it; a
        failed commit too, ``disconnect``)."""
        return self._late_acks >= 0 and self.acks_held > 0

    def data_before_acks(self) -> bytes:
        """While ``acks_due``: the output that goes before the acknowledgements due (not
        the DISCONNECT after them), which then go at the start of what is left."""
        out = self._out
        at = self._late_acks
        if at >= len(out):
            data = b"".join(out)
            out.clear()
        else:
            data = b"".join(out[:at])
            del out[:at]
        if at != _AFTER_DISCONNECT:
            self._late_acks = 0
        return data

    @property
    def has_output(self) -> bool:
        """``data_to_send()`` has bytes to return."""
        return bool(self._out)

    def data_to_send(self) -> bytes:
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        return data

    def next_deadline(self) -> float | None:
        """The time (the ``now`` passed in) at which ``handle_timeout`` must run, or None."""
        if self.conn_state is ConnState.CLOSED:
            return None
        if self.conn_state is not ConnState.CONNECTED:
            return self._last_rx + self.limits.connect_timeout_s
        if self.keep_alive:
            return self._last_rx + self.keep_alive * 1.5
        return None

    def handle_timeout(self, now: float) -> None:
        deadline = self.next_deadline()
        if deadline is None or now < deadline:
            return
        if self.conn_state is ConnState.CONNECTED:
            self._close(ReasonCode.KEEP_ALIVE_TIMEOUT, "keep alive timeout", notify=True)
        else:
            self._close(ReasonCode.MAXIMUM_CONNECT_TIME, "no CONNECT in time", notify=False)

    @property
    def input_pending(self) -> bool:
        """Received bytes wait, beyond the read budget: call ``receive_data(b"", now)``."""
        return self.decoder.input_pending and self.conn_state is not ConnState.CLOSED

    def connection_lost(self) -> None:
        """The transport closed under us; nothing more will be sent."""
        if self.conn_state is not ConnState.CLOSED:
            self._enter_closed()
            if self.close_reason is None:
                self.close_reason = ReasonCode.UNSPECIFIED_ERROR
        self._out.clear()
        self._late_acks = -1
        self._release_aliases()
        # Let go of the driver and of the flow (which refers back to both): no reference
        # cycle outlives the connection, so it is freed at once, not by the cyclic GC.
        self.waker = None
        self.outgoing = None

    def set_writable(self, writable: bool, now: float) -> None:
        """The driver's transport crossed its write high-water mark (False) or drained."""
        self.writable = writable
        if self.outgoing is not None:
            self.outgoing.set_writable(writable, now)

    # -- commands ---------------------------------------------------------------------

    def accept(
        self,
        state: SessionState,
        session_present: bool,
        now: float,
        *,
        assigned_client_id: str | None = None,
        session_expiry_interval: int | None = None,
        keep_alive: int | None = None,
        auth_method: str | None = None,
        auth_data: bytes | None = None,
        username: str | None = None,
    ) -> bool:
        """Sends CONNACK 0x00 and attaches ``state``; the packets held meanwhile wait
        for ``handle_held``.

        False (nothing attached, nothing sent, the session closed with Packet too large)
        when not even a minimal CONNACK fits the client's Maximum Packet Size
        (``mqtt.connack``): the caller ends what it prepared for the client."""
        if self.conn_state is not ConnState.CONNECTING:
            raise RuntimeError(f"accept() in state {self.conn_state}")
        connect = self.connect
        assert connect is not None
        limits = self.limits
        connack = _CONNACK_ACCEPTED[session_present and self.protocol_level == 4]  # 3.1: 0
        window = limits.max_inflight
        max_packet_size = MAX_PACKET
        if self._v5:
            cp = connect.properties
            window = min(limits.max_inflight, cp.receive_maximum or 65535)
            max_packet_size = cp.maximum_packet_size or MAX_PACKET
            server_keep_alive = None
            if keep_alive is not None and keep_alive != connect.keep_alive:
                server_keep_alive = keep_alive
            if session_expiry_interval == (cp.session_expiry_interval or 0):
                session_expiry_interval = None  # as asked for: not repeated
            props = replace(
                limits.advertised(),
                session_expiry_interval=session_expiry_interval,
                assigned_client_identifier=assigned_client_id,
                server_keep_alive=server_keep_alive,
                authentication_method=auth_method,
                authentication_data=auth_data,
            )
            connack = encode(Connack(session_present, 0, props), 5)
            if len(connack) > max_packet_size:  # [MQTT-3.1.2-24]
                fitted = fitted_connack(session_present, 0, props, max_packet_size)
                if fitted is None:
                    self._close(
                        ReasonCode.PACKET_TOO_LARGE,
                        "CONNACK larger than the client's Maximum Packet Size",
                        notify=True,
                        send=False,
                    )
                    return False
                connack = fitted
        self.state = state
        self.counters = state.counters
        state.connection = self
        if state.incoming_qos2:
            self._carried_qos2 = set(state.incoming_qos2)
        self.origin = new_origin("mqtt", state.client_id, self.peer, username)
        self.will = connect.will
        self.keep_alive = connect.keep_alive if keep_alive is None else keep_alive
        self._send(connack)
        self.conn_state = ConnState.CONNECTED
        self._last_rx = now
        self.clean_start = connect.clean_start
        if self._v5:
            cp = connect.properties
            self._v5_expiry_asked = bool(cp.session_expiry_interval)
            if cp.authentication_method is None:
                self.connect = None  # nothing reads it again
        else:
            self.connect = None
        outgoing = self.outgoing = Outgoing(
            self,
            state,
            self._out,
            self.waker,
            self.protocol_level,
            window,
            max_packet_size,
            self.writable,
        )
        state.sending = outgoing
        outgoing.start(session_present, now)
        return True

    def handle_held(self, now: float) -> None:
        """Handles, in order, the packets held while the CONNECT awaited its answer, once
        the caller has done what accepting it takes (``broker_core.connect``: the
        connection online, its will registered): a DISCONNECT among them then ends a
        connection that was fully accepted."""
        held = self._held
        if held is not None and self.conn_state is ConnState.CONNECTED:
            self._held = None
            self._held_bytes = 0
            self._handle_all(held, now)
        error = self._error_after_connect
        if error is not None:
            self._error_after_connect = None
            if self.conn_state is ConnState.CONNECTED:
                self._fail(error)  # as for any connected client: the will goes out

    def reject(self, reason_code: int, reason_string: str | None = None) -> None:
        """Sends CONNACK with a failure code and closes [MQTT-3.2.2-6, -7]."""
        props = Properties(reason_string=reason_string) if self._v5 and reason_string else EMPTY
        data = encode(Connack(False, reason_code, props), self.protocol_level)
        connect = self.connect
        if self._v5 and connect is not None:
            limit = connect.properties.maximum_packet_size or MAX_PACKET
            if len(data) > limit:  # [MQTT-3.1.2-24]: without the reason string, or none
                data = fitted_connack(False, reason_code, props, limit) or b""
        if data:
            self._send(data)
        self._close(reason_code, reason_string or "connection refused", notify=False, send=False)

    def auth_continue(
        self, method: str, data: bytes | None, reason_code: int = ReasonCode.CONTINUE_AUTHENTICATION
    ) -> None:
        """Sends AUTH during enhanced authentication (MQTT 5.0 4.12)."""
        props = Properties(authentication_method=method, authentication_data=data)
        self._send(encode(Auth(reason_code, props), 5))

    def acknowledge(self, packet_id: int, qos: int, reason_code: int = 0) -> None:
        """PUBACK or PUBREC for a PublishReceived, once the broker has routed it."""
        if qos == 1:
            if self._v5:
                self.qos1_unacked -= 1
                if reason_code:
                    data = encode(Puback(packet_id, reason_code), 5)
                else:
                    data = bytes((0x40, 2, packet_id >> 8, packet_id & 0xFF))
            else:
                data = bytes((0x40, 2, packet_id >> 8, packet_id & 0xFF))
        elif qos == 2:
            if reason_code and self._v5:
                data = encode(Pubrec(packet_id, reason_code), 5)
            else:
                data = bytes((0x50, 2, packet_id >> 8, packet_id & 0xFF))
            state = self.state
            if (
                reason_code >= 0x80
                and state is not None
                and packet_id in (state.incoming_qos2 or ())
            ):
                # A refusing PUBREC ends the flow and frees the packet id: once that
                # is committed (as PUBCOMP, ``_on_pubrel``). The broker has usually
                # removed it already, and waited for that with the PUBREC.
                state.remove_incoming(packet_id)
                when_durable = self.when_durable
                if when_durable is not None and state.journal is not None:
                    when_durable(self, data)
                    return
        else:
            return
        if self.conn_state is not ConnState.CLOSED:
            self._send(data)
        elif self._late_acks >= 0:
            self._send_before_close(data)

    def send_acknowledgement(self, data: bytes) -> None:
        """A PUBCOMP or PUBREL held by ``when_durable`` (a SUBACK or UNSUBACK by
        ``Broker.when_committed``), now committed: sent unless the connection closed
        meanwhile (the next one resends the PUBREL; the client its PUBREL, answered then;
        a client without its SUBACK subscribes again)."""
        kind = type(data)
        if kind is not bytes and (kind is _Released or kind is _Completing):
            self._complete(data)
            return
        if self.conn_state is not ConnState.CLOSED:
            self._send(data)
        elif self._late_acks >= 0:
            self._send_before_close(data)

    def _complete(self, data: bytes) -> None:
        """The PUBCOMP of a released QoS 2 packet id (``_on_pubrel``), at its turn."""
        state = self.state
        assert state is not None
        pid = (data[2] << 8) | data[3]
        pubcomp = bytes(data)
        completing = self._completing
        if type(data) is _Released:
            if self.conn_state is ConnState.CLOSED:
                self._wake_if_acks_were_due()
                return  # not sent: the record stays; the client resends its PUBREL
            if state.complete_released(pid) and self.when_durable is not None:
                if completing is None:
                    self._completing = {pid}
                else:
                    completing.add(pid)
                self.when_durable(self, _Completing(pubcomp))  # once the removal is
                return
            self._send(pubcomp)  # removed by another PUBREL's PUBCOMP, committed
        elif self.conn_state is not ConnState.CLOSED:
            if completing is not None:
                completing.discard(pid)
            self._send(pubcomp)
        else:  # closed meanwhile, the record written back then (``_enter_closed``)
            self._wake_if_acks_were_due()

    def suback(
        self, packet_id: int, reason_codes: list[int], reason_string: str | None = None
    ) -> None:
        if self._v5:
            props = Properties(reason_string=reason_string) if reason_string else EMPTY
            codes = tuple(reason_codes)
        else:
            props = EMPTY
            codes = tuple(c if c <= 2 else 0x80 for c in reason_codes)
        # A persistent session's waits for a commit: the connection may have closed.
        self.send_acknowledgement(encode(Suback(packet_id, codes, props), self.protocol_level))

    def unsuback(self, packet_id: int, reason_codes: list[int]) -> None:
        data = encode(Unsuback(packet_id, tuple(reason_codes)), self.protocol_level)
        self.send_acknowledgement(data)

    def disconnect(
        self,
        reason_code: int,
        reason_string: str | None = None,
        server_reference: str | None = None,
    ) -> None:
        """Server-initiated close; MQTT 5 clients get DISCONNECT with the reason (4.13)."""
        if self.conn_state is ConnState.CLOSED:
            self._wake_if_acks_were_due()  # a commit failed: no acknowledgement comes
            return
        if self._v5 and self.conn_state is ConnState.CONNECTED:
            props = EMPTY
            if reason_string or server_reference:
                props = Properties(reason_string=reason_string, server_reference=server_reference)
            data = encode(Disconnect(reason_code, props), 5)
            outgoing = self.outgoing
            if outgoing is not None and len(data) > outgoing.max_packet_size:
                # Without the reason string, which must not make it larger than the
                # client's Maximum Packet Size (3.14.2.2.2); the server reference stays.
                props = replace(props, reason_string=None)
                data = encode(Disconnect(reason_code, props), 5)
                if len(data) > outgoing.max_packet_size:
                    data = encode(Disconnect(reason_code), 5)  # smaller than any CONNACK
            self._send(data)
        self._close(
            reason_code,
            reason_string or ReasonCode(reason_code).name.lower(),
            notify=False,
            send=False,
        )

    # -- internals ----------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        out = self._out
        out.append(data)
        if len(out) == 1 and self.waker is not None:
            self.waker.wakeup()

    def _send_before_close(self, data: bytes) -> None:
        """An acknowledgement after closing for a protocol error: before the DISCONNECT
        still waiting in ``_out`` (none once written: the transport is closing); after
        the client's DISCONNECT: sent. The driver's close waits for those held for a
        commit (``acks_due``)."""
        out = self._out
        at = self._late_acks
        if at == _AFTER_DISCONNECT:
            out.append(data)
        elif at <= len(out):
            out.insert(at, data)
            self._late_acks = at + 1
        else:
            return
        if self.waker is not None:
            self.waker.wakeup()

    def _wake_if_acks_were_due(self) -> None:
        """An acknowledgement the driver's close may wait for (``acks_due``) will not
        come: it looks again."""
        if self._late_acks >= 0 and self.waker is not None:
            self.waker.wakeup()

    def _event(self, event: Event) -> None:
        events = self._events
        if events is None:
            self._events = [event]
        else:
            events.append(event)

    def _handle_all(self, packets: list[Packet], now: float) -> None:
        if self._waiting is not None:
            self._hold(packets, now)
            return
        connected = ConnState.CONNECTED
        on_publish = self._on_publish
        try:
            for packet in packets:
                state = self.conn_state
                if state is connected and type(packet) is Publish:
                    on_publish(packet, now)
                elif state is ConnState.CLOSED:
                    return
                else:
                    self._handle(packet, now)
        except _Waiting:
            self._waiting = _Held()
            self._hold(packets[_index(packets, packet) :], now)
        except ProtocolError as exc:
            self._fail(exc)

    def _hold(self, packets: list[Packet], now: float) -> None:
        """Flow control of an MQTT 3.1.1 / 3.1 client, told no Receive Maximum: from a
        QoS 2 PUBLISH that found ``receive_maximum`` QoS 2 messages awaiting PUBREL, its
        packets wait unanswered, in order, until a PUBREL makes room (``_release``); its
        in-flight window slows it down meanwhile. PUBREL, PINGREQ and acknowledgements of
        the outgoing flow are handled at once (the PUBREL making room comes after the held
        packets; each one tries them again); a DISCONNECT drops the held packets (never
        acknowledged) and ends the connection. Past ``_Held``'s bounds the connection
        closes (limit ``receive_maximum_waiting``)."""
        for i, packet in enumerate(packets):
            waiting = self._waiting
            if waiting is None:  # a PUBREL released them all: the rest as usual
                self._handle_all(packets[i:], now)
                return
            if self.conn_state is ConnState.CLOSED:
                return
            kind = type(packet)
            try:
                if kind is Pubrel:
                    self._handle(packet, now)
                    if self._waiting is not None and self.conn_state is ConnState.CONNECTED:
                        self._release(now)
                elif kind is Pingreq or kind in _ACKNOWLEDGEMENTS:
                    self._handle(packet, now)
                elif kind is Disconnect:
                    self._waiting = None
                    self._handle(packet, now)
                else:
                    if type(packet) is Publish:
                        waiting.bytes += len(packet.payload) + len(packet.topic)
                    if (
                        len(waiting.packets) >= _HELD_LIMIT
                        or waiting.bytes > 2 * self.limits.max_packet_size
                    ):
                        self.counters.hit("receive_maximum_waiting")
                        raise ProtocolError(
                            "too many packets waiting for PUBREL", ReasonCode.QUOTA_EXCEEDED
                        )
                    waiting.packets.append(packet)
            except ProtocolError as exc:
                self._fail(exc)
                return

    def _release(self, now: float) -> None:
        """A PUBREL while packets are held: handle them in order; a QoS 2 PUBLISH among
        them that still finds no room holds the rest again."""
        waiting = self._waiting
        assert waiting is not None
        self._waiting = None
        self._handle_all(waiting.packets, now)

    def _handle(self, packet: Packet, now: float) -> None:
        state = self.conn_state
        if state is ConnState.CONNECTED:
            kind = type(packet)
            acknowledged = _ACKNOWLEDGEMENTS.get(kind)
            if acknowledged is not None:  # of the outgoing flow (built once CONNECTED)
                acknowledged(self.outgoing, packet, now)
                self.acks_received = True
                return
            handler = _HANDLERS.get(kind)
            if handler is None:
                raise ProtocolViolation(f"{type(packet).__name__} is not sent by clients")
            handler(self, packet, now)
        elif state is ConnState.AWAIT_CONNECT:
            if type(packet) is not Connect:
                raise ProtocolViolation("the first packet must be CONNECT")  # [MQTT-3.1.0-1]
            self._on_connect(packet)
        elif self._error_after_connect is not None:
            return  # behind a protocol error kept for after the CONNECT: never handled
        elif type(packet) is Connect:
            self._behind_connect(ProtocolViolation("second CONNECT"))  # [MQTT-3.1.0-2]
        elif type(packet) is Auth and self._v5:
            if self._connect_without_exchange():
                self._behind_connect(
                    ProtocolViolation("AUTH without an authentication method in CONNECT")
                )
            else:
                self._on_auth(packet, now)
        else:
            held = self._held
            if held is None:
                held = self._held = []
            if type(packet) is Publish:
                self._held_bytes += len(packet.payload) + len(packet.topic)
            if len(held) >= _HELD_LIMIT or self._held_bytes > 2 * self.limits.max_packet_size:
                if self.counters is not None:
                    self.counters.hit("packets_before_connack")
                raise ProtocolError("too much sent before CONNACK", ReasonCode.QUOTA_EXCEEDED)
            held.append(packet)

    def _on_connect(self, connect: Connect) -> None:
        self.connect = connect
        self.clean_start = connect.clean_start
        self.protocol_level = connect.protocol_level
        self._v5 = connect.protocol_level == 5
        self.conn_state = ConnState.CONNECTING
        self._event(ConnectRequested(connect))

    def _on_publish(self, packet: Publish, now: float) -> None:
        topic = packet.topic
        props = packet.properties
        if props is not EMPTY:
            alias = props.topic_alias
            if alias is not None:
                aliases = self._aliases
                if aliases is None:
                    limits = self.limits
                    aliases = self._aliases = TopicAliases(
                        limits.max_topic_alias, limits.max_topic_alias_bytes
                    )
                topic = aliases.resolve(alias, topic, self.counters)
                props = replace(props, topic_alias=None)
            if props.subscription_identifiers:
                raise ProtocolViolation("PUBLISH from a client with a subscription identifier")
        if not topic:
            raise ProtocolViolation("empty topic without a topic alias")  # [MQTT-4.7.3-1]
        qos = packet.qos
        if qos > self.limits.max_qos:
            raise ProtocolError(f"QoS {qos} not supported", ReasonCode.QOS_NOT_SUPPORTED)
        if packet.retain and not self.limits.retain_available:
            raise ProtocolError("retain not supported", ReasonCode.RETAIN_NOT_SUPPORTED)
        state = self.state
        assert state is not None
        if qos == 2:
            incoming = state.incoming_qos2 or ()
            pid = packet.packet_id
            assert pid is not None
            released = state.released_qos2
            if pid in incoming or (released is not None and pid in released):
                # A retransmission of a message already received: acknowledge it again,
                # never deliver it twice (MQTT 5.0 4.3.3). A persistent session's, once
                # the id's record is committed, as the first PUBREC: sent before, a kill
                # left the id unknown to the restarted broker, and the client, past
                # PUBREC, sends PUBREL, not the message (lost).
                data = bytes((0x50, 2, pid >> 8, pid & 0xFF))
                when_durable = self.when_durable
                if when_durable is not None and state.journal is not None:
                    when_durable(self, data)
                else:
                    self._send(data)
                return
            held = len(incoming)
            carried = self._carried_qos2
            if carried:
                held -= len(carried)
            if held + self.qos1_unacked >= self.limits.receive_maximum:
                if not self._v5:  # told no Receive Maximum: it waits (_hold)
                    self.counters.hit("receive_maximum")
                    raise _Waiting
                self._receive_maximum_exceeded()
            state.add_incoming(pid)
        elif qos and self._v5:
            unacked = self.qos1_unacked
            in_qos2 = state.incoming_qos2
            if in_qos2:
                unacked += len(in_qos2)
                carried = self._carried_qos2
                if carried:
                    unacked -= len(carried)
            if unacked >= self.limits.receive_maximum:
                self._receive_maximum_exceeded()
            self.qos1_unacked += 1
        self.counters.messages_received += 1
        raw = packet.raw
        if raw is not None and (packet.retain or props is not EMPTY):
            raw = None  # forwarded byte for byte only without retain and properties
        event = new_publish_received(packet, topic, props, raw)
        events = self._events
        if events is None:
            self._events = [event]
        else:
            events.append(event)

    def _receive_maximum_exceeded(self) -> NoReturn:
        """More QoS 1 and 2 PUBLISH packets unacknowledged than receive_maximum (3.3.4):
        DISCONNECT 0x93, after the acknowledgements of those already received."""
        self._late_acks = len(self._out)
        raise ProtocolError("receive maximum exceeded", ReasonCode.RECEIVE_MAXIMUM_EXCEEDED)

    def _release_aliases(self) -> None:
        if self._aliases is not None:
            self._aliases.release(self.counters)
            self._aliases = None

    def _on_pubrel(self, packet: Pubrel, now: float) -> None:
        state = self.state
        assert state is not None
        pid = packet.packet_id
        when_durable = self.when_durable
        if when_durable is not None and state.journal is not None:
            released = state.released_qos2
            if pid in (state.incoming_qos2 or ()) or (released is not None and pid in released):
                # Released (room for the next QoS 2 message), its record kept until the
                # PUBCOMP goes out on a live connection (``_Released``): a PUBCOMP that
                # never reached the client leaves the id a duplicate's, even after a kill.
                state.release_incoming(pid)
                carried = self._carried_qos2
                if carried:
                    carried.discard(pid)
                when_durable(self, _Released(bytes((0x70, 2, pid >> 8, pid & 0xFF))))
                return
        if pid in (state.incoming_qos2 or ()):
            state.remove_incoming(pid)
            carried = self._carried_qos2
            if carried:
                carried.discard(pid)
            data = bytes((0x70, 2, pid >> 8, pid & 0xFF))
        elif self._v5:
            data = encode(Pubcomp(pid, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND), 5)
        else:
            data = bytes((0x70, 2, pid >> 8, pid & 0xFF))
        when_durable = self.when_durable
        if when_durable is not None and state.journal is not None:
            # PUBCOMP frees the packet id for the client's next message: only once its
            # removal is committed, else a kill brings the id back as "awaiting PUBREL"
            # and that next message, resent with DUP, would be taken for a duplicate
            # (never routed). Unknown ids too: their removal may still be on its way.
            when_durable(self, data)
        else:
            self._send(data)

    def _on_subscribe(self, packet: Subscribe, now: float) -> None:
        self._event(SubscribeRequested(packet))

    def _on_unsubscribe(self, packet: Unsubscribe, now: float) -> None:
        self._event(UnsubscribeRequested(packet))

    def _on_pingreq(self, packet: Pingreq, now: float) -> None:
        self._send(b"\xd0\x00")

    def _on_disconnect(self, packet: Disconnect, now: float) -> None:
        expiry = packet.properties.session_expiry_interval
        if expiry is not None:
            assert self.state is not None
            if not self._v5_expiry_asked and expiry:
                raise ProtocolViolation(
                    "session expiry set on DISCONNECT after 0 on CONNECT"
                )  # [MQTT-3.14.2-2]
            self.state.expiry_interval = min(expiry, self.limits.max_session_expiry)
        publish_will = packet.reason_code == ReasonCode.DISCONNECT_WITH_WILL_MESSAGE
        if not publish_will:
            self.will = None  # [MQTT-3.14.4-3]
        self._event(DisconnectReceived(packet.reason_code, publish_will))
        self.close_reason = packet.reason_code
        self._enter_closed()
        # What the broker still answers to the packets before it goes out first (a
        # SUBACK is due [MQTT-3.8.4-1]; mosquitto answers each packet in turn).
        self._late_acks = _AFTER_DISCONNECT

    def _on_auth(self, packet: Auth, now: float) -> None:
        connect = self.connect
        if connect is None or connect.properties.authentication_method is None:
            raise ProtocolViolation("AUTH without an authentication method in CONNECT")
        self._event(AuthReceived(packet))

    def _behind_connect(self, exc: ProtocolError) -> None:
        """A protocol error in a packet behind the CONNECT being decided (a second
        CONNECT, an AUTH with no exchange begun): kept for after it, as a packet that
        fails to decode there (``_fail``); during an AUTH exchange the CONNACK tells it."""
        if self._connect_without_exchange():
            if self._error_after_connect is None:
                self._error_after_connect = exc
            return
        raise exc

    def _fail(self, exc: ProtocolError) -> None:
        """Reports a protocol error to the peer where the spec allows, then closes."""
        if (
            self.conn_state is ConnState.CONNECTING
            and exc is self.decoder.error
            and self._connect_without_exchange()
        ):
            # An error in a packet behind the CONNECT, not in the CONNECT: a CONNACK
            # must not carry it (MQTT 5.0 4.13.1). The CONNECT gets its own answer
            # first; accepted, the error then closes the connection (``handle_held``),
            # after the packets before it (a second CONNECT's or an AUTH's too,
            # ``_behind_connect``). During an AUTH exchange the packet may be the AUTH
            # the CONNECT waits for: the CONNACK tells the error, as before.
            if self._error_after_connect is None:
                self._error_after_connect = exc
            return
        code = exc.reason_code
        limit = "packet_properties" if isinstance(exc, PropertyLimitExceeded) else _LIMITS.get(code)
        if limit is not None and self.counters is not None:
            self.counters.hit(limit)
        if self.conn_state is ConnState.CONNECTED:
            if self._late_acks < 0:
                # The acknowledgements of the packets before this one (their events
                # not dispatched yet: the same read) go before the DISCONNECT, as
                # when each comes in its own read (``_send_before_close``).
                self._late_acks = len(self._out)
            if self._v5:
                self._send(encode(Disconnect(code), 5))
        elif isinstance(exc, UnsupportedProtocolVersion):
            self._send(b"\x20\x02\x00\x01")  # [MQTT-3.1.2-2]: 3.1.1-format CONNACK 0x01
        elif self.decoder.protocol_level == 5:
            self._send(encode(Connack(False, code), 5))
        self._close(code, str(exc), notify=True, send=False)

    def _connect_without_exchange(self) -> bool:
        """The CONNECT being decided names no authentication method (MQTT 5.0 4.12)."""
        connect = self.connect
        return connect is None or connect.properties.authentication_method is None

    def _close(self, code: int, message: str, notify: bool, send: bool = True) -> None:
        if send and self._v5 and self.conn_state is ConnState.CONNECTED:
            self._send(encode(Disconnect(code), 5))
        self._enter_closed()
        self.close_reason = code
        self._release_aliases()
        if notify:
            self._event(ConnectionClosing(code, message))
        if self.waker is not None:
            self.waker.wakeup()  # the driver flushes what is left, then closes the transport

    def _enter_closed(self) -> None:
        """CLOSED: the state stops sending through this connection's flow."""
        self.conn_state = ConnState.CLOSED
        self.closed = True
        self._waiting = None  # never acknowledged: dropped
        state = self.state
        completing = self._completing
        if completing and state is not None:
            # Their PUBCOMPs will not go out: the records written back now, behind their
            # removal (in its commit, unless that has begun), not once it is committed.
            self._completing = None
            for pid in completing:
                state.keep_released(pid)
        if state is not None and state.sending is self.outgoing:
            state.sending = None


# Acknowledgements of the outgoing flow (mqtt.outgoing): PUBACK, PUBREC, PUBCOMP.
_ACKNOWLEDGEMENTS: dict[type, Callable[[Any, Any, float], None]] = {
    Puback: Outgoing.on_puback,
    Pubrec: Outgoing.on_pubrec,
    Pubcomp: Outgoing.on_pubcomp,
}

_HANDLERS: dict[type, Callable[[Session, Any, float], None]] = {
    Publish: Session._on_publish,
    Pubrel: Session._on_pubrel,
    Subscribe: Session._on_subscribe,
    Unsubscribe: Session._on_unsubscribe,
    Pingreq: Session._on_pingreq,
    Disconnect: Session._on_disconnect,
    Auth: Session._on_auth,
}


def _index(packets: list[Packet], packet: Packet) -> int:
    """The position of ``packet`` itself in ``packets`` (an equal one may come before)."""
    return next(i for i, p in enumerate(packets) if p is packet)
