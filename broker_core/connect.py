"""CONNECT: whether a client may connect, and on what terms (MQTT 5.0 3.1, 3.2; 3.1.1
3.1, 3.2). ``handle_connect`` decides, in this order:

1. the listener's bounds, decided when the CONNECT arrived (``listeners.connections``):
   ``max_connections`` (0x97 Quota exceeded), ``connection_rate`` (0x9F);
2. the client id: none given is assigned one (MQTT 5 gets it back as the Assigned
   Client Identifier) unless the client is MQTT 3.1, or 3.1.1 without a clean session
   (0x85, [MQTT-3.1.3-8]); one given that is longer than ``max_client_id_length``
   (MQTT 3.1: 23) is refused (0x85);
3. the credentials, through the login throttle when there is one
   (``broker_core.login_throttle``), then the authenticator;
4. the will: a topic it could never be published to refuses the client, with the code
   a PUBLISH to it would get (``Broker.publish_checked``; ``will_topic_refusal``):
   0x90 Topic Name invalid (MQTT 5.0 3.2.2.2) for more levels than
   ``max_topic_levels`` (counted in limit ``topic_levels``), a ``$share/`` topic or a
   ``$delayed/`` topic that is not a valid one, 0x87 Not authorized for a ``$SYS``
   topic, which belongs to the broker; then, when an ACL is configured, a topic the
   client may not publish to (as judged for its PUBLISH: its username, client id and
   address; a ``$delayed/`` topic by the topic it names) refuses it with 0x87 Not
   authorized; a QoS or retain the server does not offer refuses an MQTT 5 client (0x9B, 0x9A
   [MQTT-3.2.2-12, -13]); an MQTT 3.1.1 client's will is lowered to what it offers; a
   will ``max_will_bytes_total`` has no room for refuses the client (0x97). That bound
   counts the wills held for connected clients (``Session.will_size``) with the pending
   ones (``WillScheduler.bytes``): room the client's own session holds (its connected
   will, taken over, or its pending will, cancelled or published) is counted free.
   MQTT 3.1.1 refusals are CONNACK return codes (``v3_connack_code``: 0x90 and 0x97
   are 3, Server unavailable; 0x87 is 5, Not authorized), as 3.1.1 3.1.4 asks of a
   CONNECT that passes the format checks but fails further restrictions. A CONNECT
   without a will pays nothing of this; one with a will pays the ACL lookup only when
   an ACL is configured;
5. the keep alive: ``server_keep_alive`` is imposed on MQTT 5 clients; one beyond
   ``max_keepalive`` (or 0 when a maximum is set) is lowered for MQTT 5 and refused for
   earlier versions (return code 2), as mosquitto does;
6. the session expiry: MQTT 5's, capped by ``max_session_expiry``; MQTT 3.1.1 clean
   session 0 lasts ``max_session_expiry``;
7. acceptance: a client connected under the same client id is taken over (DISCONNECT
   0x8E [MQTT-3.1.4-3]); clean start ends the old session (its pending will goes out
   [MQTT-3.1.2-8]), else the session resumes (its pending will is cancelled
   [MQTT-3.1.3-9]) keeping only what the new owner may read (``broker_core.resume``);
   the session is persisted, the CONNACK queued, and a will written to the store
   (``Store.will_held``, a no-op for ``persistence: memory``; a CONNECT without a
   will writes nothing more than before) until the connection ends, so that the
   will of a client connected when the process is killed is published after the
   restart (``SessionRegistry.restore``). Only then are the packets the client sent
   behind its CONNECT handled (``Session.handle_held``), so that a DISCONNECT among them
   ends a connection that is online with its will registered.

Broker events: ``ClientConnect`` first, ``ClientConnack`` with the answer (also when a
refusal is raised as a protocol error during an AUTH exchange), ``ClientConnected``
once accepted.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker_core.acl import PUBLISH
from broker_core.auth import AuthRequest, AuthResult, new_auth_request
from broker_core.clock import now as clock_now
from broker_core.context import Origin
from broker_core.delayed import DELAYED_PREFIX, parse_delayed_topic
from broker_core.errors import ProtocolError
from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import Connect
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session import Session
from broker_core.mqtt.session_state import NEVER_EXPIRES, SessionState
from broker_core.mqtt.topics import SHARE_PREFIX, abbreviate
from broker_core.observe import ClientConnack, ClientConnect, new_client_connected
from broker_core.origin import new_origin
from broker_core.resume import restrict_to_owner
from broker_core.will import will_size

if TYPE_CHECKING:
    from broker_core.broker import Broker

__all__ = [
    "granted_expiry",
    "granted_keep_alive",
    "granted_will",
    "handle_connect",
    "will_target",
    "will_topic_refusal",
]

log = logging.getLogger(__name__)


def granted_keep_alive(connect: Connect, limits: ServerLimits) -> int | None:
    """The keep alive the client gets, or None when it must be refused (before MQTT 5)."""
    keep_alive = connect.keep_alive
    if connect.protocol_level == 5 and limits.server_keep_alive is not None:
        return limits.server_keep_alive
    if keep_alive > limits.max_keepalive or (keep_alive == 0 and limits.max_keepalive < 65535):
        return limits.max_keepalive if connect.protocol_level == 5 else None
    return keep_alive


def granted_expiry(connect: Connect, limits: ServerLimits) -> int:
    """The Session Expiry Interval the session gets."""
    if connect.protocol_level != 5:
        return 0 if connect.clean_start else limits.max_session_expiry
    asked = connect.properties.session_expiry_interval
    if asked == NEVER_EXPIRES and limits.max_session_expiry >= NEVER_EXPIRES:
        return NEVER_EXPIRES
    return min(asked or 0, limits.max_session_expiry)


def will_topic_refusal(topic: str, max_levels: int) -> int | None:
    """The reason code refusing a will on ``topic``, the code a PUBLISH to it would get
    (``Broker.publish_checked``), or None when a PUBLISH could use it: Topic Name invalid
    for a ``$delayed/`` topic that is no valid one, a ``$share/`` topic, or a topic (the
    one a ``$delayed/`` topic names) of more than ``max_levels`` levels
    (``topics.too_deep``: a topic shorter than ``max_levels`` pays one comparison); Not
    authorized for a ``$SYS`` topic. The ACL is the caller's (``will_target`` names the
    topic it judges)."""
    if topic[0] == "$":
        if topic.startswith(DELAYED_PREFIX):
            delayed = parse_delayed_topic(topic)
            if delayed is None:
                return ReasonCode.TOPIC_NAME_INVALID
            topic = delayed[1]
        elif topic.startswith("$SYS"):
            return ReasonCode.NOT_AUTHORIZED
        elif topic.startswith(SHARE_PREFIX):
            return ReasonCode.TOPIC_NAME_INVALID
    if len(topic) >= max_levels and topic.count("/") >= max_levels:
        return ReasonCode.TOPIC_NAME_INVALID
    return None


def will_target(topic: str) -> str:
    """The topic the ACL judges for a will on ``topic`` (one ``will_topic_refusal``
    accepted): the topic a ``$delayed/`` topic names, as for a PUBLISH."""
    if topic[0] == "$" and topic.startswith(DELAYED_PREFIX):
        delayed = parse_delayed_topic(topic)
        assert delayed is not None
        return delayed[1]
    return topic


def granted_will(connect: Connect, limits: ServerLimits) -> Connect | int:
    """``connect`` with a will the server can honour, or the reason code refusing it."""
    will = connect.will
    if will is None or (
        will.qos <= limits.max_qos and (limits.retain_available or not will.retain)
    ):
        return connect
    if connect.protocol_level == 5:
        if will.qos > limits.max_qos:
            return ReasonCode.QOS_NOT_SUPPORTED
        return ReasonCode.RETAIN_NOT_SUPPORTED
    # MQTT 3.1.1 cannot be told: the will is published as the server can.
    lowered = replace(
        will, qos=min(will.qos, limits.max_qos), retain=will.retain and limits.retain_available
    )
    return replace(connect, will=lowered)


def _may_assign_client_id(connect: Connect) -> bool:
    """[MQTT-3.1.3-8] (3.1.1); MQTT 3.1 requires 1 to 23 characters."""
    level = connect.protocol_level
    return level == 5 or (level == 4 and connect.clean_start)


def _client_id_too_long(client_id: str, level: int, limits: ServerLimits) -> bool:
    return len(client_id) > limits.max_client_id_length or (level == 3 and len(client_id) > 23)


class _Answer:
    """Refusals and the events of one CONNECT."""

    def __init__(
        self, broker: Broker, session: Session, connect: Connect, listener: str, now: float
    ) -> None:
        self.broker = broker
        self.session = session
        self.connect = connect
        self.listener = listener
        self.now = now

    def _asked(self) -> tuple[str, str | None, str | None, int, int, bool, int, str]:
        connect = self.connect
        expiry = connect.properties.session_expiry_interval if connect.protocol_level == 5 else 0
        return (
            connect.client_id,
            connect.username,
            self.session.peer,
            connect.protocol_level,
            connect.keep_alive,
            connect.clean_start,
            expiry or 0,
            self.listener,
        )

    def received(self) -> None:
        observers = self.broker.observers
        if observers.client_connect:
            observers.emit(ClientConnect(*self._asked(), self.now))

    def answered(self, reason_code: int) -> None:
        observers = self.broker.observers
        if observers.client_connack:
            observers.emit(ClientConnack(*self._asked(), reason_code, clock_now()))

    def refuse(self, reason_code: int) -> None:
        self.session.reject(reason_code)
        self.answered(reason_code)


def handle_connect(
    broker: Broker,
    session: Session,
    connect: Connect,
    now: float,
    listener: ListenerSettings | None = None,
    certificate_identity: str | None = None,
    refusal: int | None = None,
) -> Coroutine[Any, Any, None] | None:
    """Decides on a CONNECT (see the module); ``refusal``: the listener's bounds refused it.
    Returns None when it is decided without waiting, the common case: no credential
    provider, authentication method or login throttle has to be awaited (the
    authenticator's ``decide_now``). Otherwise returns the rest of the decision, to
    await."""
    listener = listener or ListenerSettings()
    answer = _Answer(broker, session, connect, listener.name, now)
    answer.received()
    if refusal is not None:
        answer.refuse(refusal)
        return None
    limits = broker.limits
    client_id = connect.client_id
    assigned: str | None = None
    if not client_id:
        if not _may_assign_client_id(connect):
            answer.refuse(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)
            return None
        client_id = broker.sessions.assign_client_id()
        if connect.protocol_level == 5:
            assigned = client_id  # [MQTT-3.2.2-16]
    elif _client_id_too_long(client_id, connect.protocol_level, limits):
        # The bound is on what clients send: an assigned id is the broker's own.
        answer.refuse(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)
        return None
    request = _auth_request(broker, session, connect, client_id, listener, certificate_identity)
    throttle = broker.login_throttle
    result = None
    if throttle is None or throttle.passes(request):
        result = broker.authenticator.decide_now(request)
    if result is None:
        return _decide_later(answer, client_id, assigned, request)
    _decide(answer, client_id, assigned, result)
    return None


async def _decide_later(
    answer: _Answer, client_id: str, assigned: str | None, request: AuthRequest
) -> None:
    """The decision once the authenticator (or the login throttle) has answered."""
    try:
        result = await _authenticate(answer.broker, answer.session, request, answer.now)
    except ProtocolError as exc:
        answer.answered(exc.reason_code)
        raise
    _decide(answer, client_id, assigned, result)


def _decide(answer: _Answer, client_id: str, assigned: str | None, result: AuthResult) -> None:
    """Steps 3 (the authenticator's answer) to 7 of the module."""
    broker = answer.broker
    session = answer.session
    connect = answer.connect
    now = answer.now
    limits = broker.limits
    if not result.allowed:
        log.info(
            "client %s from %s refused (0x%02X)",
            client_id,
            session.peer,
            result.reason_code,
            extra={"client_id": client_id},
        )
        answer.refuse(result.reason_code)
        return
    will = connect.will
    size = 0
    if will is not None:
        topic = will.topic
        max_levels = limits.max_topic_levels
        # A usual will topic (no "$", shorter than the bound) pays two comparisons.
        if topic[0] == "$" or len(topic) >= max_levels:
            refusal = will_topic_refusal(topic, max_levels)
            if refusal is not None:
                if refusal == ReasonCode.TOPIC_NAME_INVALID and not topic.startswith(SHARE_PREFIX):
                    broker.counters.hit("topic_levels")
                answer.refuse(refusal)
                return
        acl = broker.acl
        if acl is not None:
            owner = result.username if result.username is not None else connect.username
            publisher = new_origin("mqtt", client_id, session.peer, owner)
            if not acl.allows(publisher, PUBLISH, will_target(topic)):
                broker.refusal_log.info(
                    now,
                    "client %s from %s refused (0x87): user %s may not publish to its will"
                    " topic %s (acl)",
                    client_id,
                    session.peer,
                    owner,
                    abbreviate(topic),
                )
                answer.refuse(ReasonCode.NOT_AUTHORIZED)
                return
        honoured = granted_will(connect, limits)
        if isinstance(honoured, int):
            answer.refuse(honoured)
            return
        if honoured is not connect:
            connect = session.connect = honoured
        size = will_size(will)
        wills = broker.wills
        # One addition and comparison; the client's own wills are looked up only past it.
        if (
            wills.max_bytes
            and wills.bytes + size > wills.max_bytes
            and not _room_for_will(broker, client_id, size)
        ):
            broker.counters.hit("will_bytes_total")
            answer.refuse(ReasonCode.QUOTA_EXCEEDED)
            return
    keep_alive = granted_keep_alive(connect, limits)
    if keep_alive is None:
        answer.refuse(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)  # 3.1.1 return code 2
        return
    if session.closed:
        return  # the client went away while we decided
    session.credential = result.credential
    _accept(
        broker,
        session,
        connect,
        client_id,
        assigned,
        keep_alive,
        now,
        result.username,
        result.auth_data,
        answer,
        size,
    )


def _connack_too_large(
    broker: Broker,
    state: SessionState,
    present: bool,
    connect: Connect,
    now: float,
    answer: _Answer,
) -> None:
    """Not even a minimal CONNACK fits the client's Maximum Packet Size (``mqtt.connack``):
    the connection closes without one, as mosquitto's does, the will goes with it (the
    client was never told it connected), and the session is left as a connection that
    ended now would leave it: a new one ends, a resumed one stays offline."""
    broker.counters.hit("connack_size")
    log.warning(
        "client %s refused: its Maximum Packet Size (%d) is smaller than a CONNACK;"
        " connection closed without one",
        state.client_id,
        connect.properties.maximum_packet_size or 0,
        extra={"client_id": state.client_id},
    )
    broker.sessions.left_unconnected(state, present, now)
    answer.answered(ReasonCode.PACKET_TOO_LARGE)


def _room_for_will(broker: Broker, client_id: str, size: int) -> bool:
    """A will of ``size`` bytes fits ``max_will_bytes_total`` once what ``client_id``'s
    session holds is freed, as accepting this CONNECT frees it: the will of the
    connection taken over (published or cancelled) and its pending will (cancelled, or
    published at once on a clean start)."""
    wills = broker.wills
    held = wills.pending_size(client_id)
    state = broker.sessions.get(client_id)
    if state is not None and state.connection is not None:
        held += state.connection.will_size
    return wills.bytes - held + size <= wills.max_bytes


def _auth_request(
    broker: Broker,
    session: Session,
    connect: Connect,
    client_id: str,
    listener: ListenerSettings,
    certificate_identity: str | None,
) -> AuthRequest:
    method = connect.properties.authentication_method if connect.protocol_level == 5 else None
    return new_auth_request(
        client_id,
        connect.username,
        connect.password,
        session.peer,
        listener,
        connect.protocol_level,
        certificate_identity,
        method,  # auth_method
        None if method is None else connect.properties.authentication_data,  # auth_data
        None if method is None else broker.auth_exchanges.exchange(session, method),  # exchange
        False,  # reauthentication
    )


async def _authenticate(
    broker: Broker, session: Session, request: AuthRequest, now: float
) -> AuthResult:
    throttle = broker.login_throttle
    if throttle is None:
        return await broker.authenticator.authenticate(request)
    deadline = session.next_deadline()
    budget = broker.limits.connect_timeout_s if deadline is None else deadline - now
    return await throttle.authenticate(broker.authenticator, request, now, budget)


def _accept(
    broker: Broker,
    session: Session,
    connect: Connect,
    client_id: str,
    assigned: str | None,
    keep_alive: int,
    now: float,
    username: str | None,
    auth_data: bytes | None,
    answer: _Answer,
    will_bytes: int,
) -> None:
    """``will_bytes``: ``will_size`` of the CONNECT's will (0 without one), counted in
    ``max_will_bytes_total`` from now until the connection ends (``end_connection``)."""
    sessions = broker.sessions
    wills = broker.wills
    existing = sessions.get(client_id)
    old_username = None
    if existing is not None and existing.connection is not None:
        old = existing.connection
        old_username = old.origin.username
        old.disconnect(ReasonCode.SESSION_TAKEN_OVER)  # [MQTT-3.1.4-3]
        sessions.end_connection(old, now, taken_over=True)
    if existing is not None and connect.clean_start:
        # The old session ends now, so its pending will goes out [MQTT-3.1.2-8].
        wills.fire_now(client_id)
    else:
        wills.cancel(client_id)  # [MQTT-3.1.3-9]: back within the will delay
    if existing is not None and (connect.clean_start or existing.expiry_interval == 0):
        sessions.discard(existing, "discarded", old_username)
        existing = None
    owner = username if username is not None else connect.username
    if existing is None:
        state = sessions.create(client_id)
        present = False
    else:
        state = existing
        present = True
        if broker.acl is not None:
            _restrict_resumed(broker, state, Origin("mqtt", client_id, session.peer, owner))
    expiry = granted_expiry(connect, broker.limits)
    state.expiry_interval = expiry
    sessions.persist(state)
    session.when_durable = broker.when_durable_hook
    if not session.accept(
        state,
        present,
        now,
        assigned_client_id=assigned,
        session_expiry_interval=expiry,
        keep_alive=keep_alive if keep_alive != connect.keep_alive else None,
        username=owner,
        auth_method=connect.properties.authentication_method,
        auth_data=auth_data,
    ):
        _connack_too_large(broker, state, present, connect, now, answer)
        return
    if will_bytes:
        wills.bytes += will_bytes  # given back by SessionRegistry.end_connection
        session.will_size = will_bytes
        # In the store until the connection ends (released by end_connection): a kill
        # does not lose it. Its delay as end_connection would count it.
        will = session.will
        assert will is not None
        delay = min(will.properties.will_delay_interval or 0, expiry)
        broker.store.will_held(client_id, will, session.origin, delay)
    sessions.went_online(state)
    if log.isEnabledFor(logging.INFO):
        log.info(
            "client %s connected from %s (MQTT level %d, clean_start=%s, session_present=%s)",
            client_id,
            session.peer,
            connect.protocol_level,
            connect.clean_start,
            present,
            extra={"client_id": client_id},
        )
    answer.answered(ReasonCode.SUCCESS)
    observers = broker.observers
    if observers.client_connected:
        observers.emit(
            new_client_connected(
                client_id,
                owner,
                session.peer,
                connect.protocol_level,
                session.keep_alive,
                connect.clean_start,
                expiry,
                present,
                answer.listener,
                clock_now(),
            )
        )
    # What the client sent behind its CONNECT, now that it is connected: a DISCONNECT
    # among it ends a connection that is online with its will registered.
    session.handle_held(now)


def _restrict_resumed(broker: Broker, state: SessionState, owner: Origin) -> None:
    """The resumed session keeps only what its new owner may read (broker_core.resume)."""
    assert broker.acl is not None
    removed, dropped = restrict_to_owner(
        state, owner, broker.acl, broker.router, broker.store, broker.observers
    )
    if removed or dropped:
        log.info(
            "client %s resumed a session holding what user %s may not read: removed %d"
            " subscriptions and %d messages",
            state.client_id,
            owner.username,
            removed,
            dropped,
        )
