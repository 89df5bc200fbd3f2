"""SUBSCRIBE and UNSUBSCRIBE (mosquitto's handle_subscribe.c / handle_unsubscribe.c).

For each requested filter: shared-subscription rules, its depth (at most
``max_topic_levels`` levels, else 0x8F Topic Filter invalid), the ACL (a refusal is logged at
INFO, rate-limited), the server's capabilities (wildcards, shared subscriptions,
subscription identifiers), the bounds on subscriptions per session and in all (0x97
Quota exceeded), the granted QoS; then the router and the session's own record
(persisted for persistent sessions). Retained messages follow the SUBACK, with RETAIN
set, as the retain handling option says; shared subscriptions get none.

A persistent session's SUBACK and UNSUBACK wait until the store committed the change
(``Broker.when_committed``), in order with its held PUBACKs, so that what a client was
told survives a kill -9; the retained messages go with the SUBACK, matched then. Messages
routed to the new subscription meanwhile may come before the SUBACK (MQTT 5.0 3.8.4).
A failed write disconnects the client instead (0x80), as for a PUBACK. Other sessions
are answered at once.

Broker events: ``ClientSubscribe`` / ``ClientUnsubscribe`` for every filter asked for,
``SessionSubscribed`` for every filter granted, ``SessionUnsubscribed`` for every
subscription removed.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from broker_core.acl import DENY_DISCONNECT, SUBSCRIBE
from broker_core.clock import now as clock_now
from broker_core.mqtt.packets import Subscribe, Unsubscribe
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session import Session
from broker_core.mqtt.topics import is_wildcard_filter, parse_shared, too_deep
from broker_core.observe import (
    ClientSubscribe,
    ClientUnsubscribe,
    SessionSubscribed,
    SessionUnsubscribed,
)
from broker_core.router import Entry

if TYPE_CHECKING:
    from broker_core.broker import Broker
    from broker_core.mqtt.session_state import SessionState

__all__ = ["handle_subscribe", "handle_unsubscribe"]


def handle_subscribe(broker: Broker, session: Session, packet: Subscribe, now: float) -> None:
    """SUBSCRIBE: checks, ACL, the router, SUBACK, then retained messages (3.8.4)."""
    state = session.state
    assert state is not None
    limits = broker.limits
    v5 = session.protocol_level == 5
    sub_ids = packet.properties.subscription_identifiers
    sub_id = sub_ids[0] if sub_ids else None
    if sub_id is not None and not limits.subscription_identifiers:
        session.disconnect(ReasonCode.SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED)
        return
    codes: list[int] = []
    retained_for: list[tuple[str, int, int | None]] = []
    observers = broker.observers
    origin = session.origin
    for request in packet.subscriptions:
        topic_filter = request.topic_filter
        options = request.options
        if observers.client_subscribe:
            observers.emit(
                ClientSubscribe(
                    origin.name,
                    origin.username,
                    session.peer,
                    topic_filter,
                    options.qos,
                    options.no_local,
                    options.retain_as_published,
                    options.retain_handling,
                    sub_id,
                    now,
                )
            )
        shared = parse_shared(topic_filter)
        if shared is not None:
            if v5 and options.no_local:
                session.disconnect(ReasonCode.PROTOCOL_ERROR)  # [MQTT-3.8.3-4]
                return
            if not limits.shared_subscriptions:
                codes.append(ReasonCode.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED)
                continue
        inner = shared.topic_filter if shared else topic_filter
        if too_deep(inner, limits.max_topic_levels):
            # Well formed but not allowed here: a trie node per level (3.1.1: 0x80).
            broker.counters.hit("topic_levels")
            codes.append(ReasonCode.TOPIC_FILTER_INVALID)
            continue
        if broker.acl is not None and not broker.acl.allows(origin, SUBSCRIBE, topic_filter):
            broker.refusal_log.info(
                now,
                "client %s (user %s, %s) may not subscribe to %r (0x87)",
                origin.name,
                origin.username,
                origin.peer,
                topic_filter,
            )
            if broker.acl_deny_action == DENY_DISCONNECT:
                session.disconnect(ReasonCode.NOT_AUTHORIZED)
                return
            codes.append(ReasonCode.NOT_AUTHORIZED)
            continue
        if not limits.wildcard_subscriptions and is_wildcard_filter(inner):
            codes.append(ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED)
            continue
        if state.subscription(topic_filter) is None:
            over = _over_subscription_limit(broker, state.subscription_count)
            if over is not None:
                broker.counters.hit(over)
                codes.append(ReasonCode.QUOTA_EXCEEDED)
                continue
        granted = min(options.qos, limits.max_qos)
        if granted != options.qos:
            options = replace(options, qos=granted)
        if not v5 and options.retain_as_published:
            options = replace(options, retain_as_published=False)
        subscription = Entry(state, topic_filter, options, sub_id)  # the router's and the state's
        existed = broker.router.add(subscription)
        state.add_subscription(subscription)
        if state.journal is not None:
            broker.store.subscription_saved(state, subscription)
        codes.append(granted)
        if observers.session_subscribed:
            observers.emit(
                SessionSubscribed(
                    origin.name,
                    origin.username,
                    session.peer,
                    topic_filter,
                    granted,
                    options.no_local,
                    options.retain_as_published,
                    options.retain_handling,
                    sub_id,
                    now,
                )
            )
        handling = options.retain_handling
        if shared is None and (handling == 0 or (handling == 1 and not existed)):
            retained_for.append((topic_filter, granted, sub_id))
    packet_id = packet.packet_id
    if state.journal is None:
        session.suback(packet_id, codes)
        _send_retained(broker, state, retained_for, now)
        return

    def subscribed() -> None:
        session.suback(packet_id, codes)
        if retained_for and broker.sessions.get(state.client_id) is state:
            _send_retained(broker, state, retained_for, clock_now())

    # A persistent session's SUBACK says its subscriptions survive a crash: sent once
    # their records are committed, in order with its held PUBACKs (``when_committed``).
    broker.when_committed(session, subscribed)


def _send_retained(
    broker: Broker, state: SessionState, retained_for: list[tuple[str, int, int | None]], now: float
) -> None:
    """Retained messages follow the SUBACK, with RETAIN set [MQTT-3.3.1-8, -9]: matched
    when it goes (a persistent session's waits for a commit), so the latest of each."""
    for topic_filter, granted, sub_id in retained_for:
        ids = (sub_id,) if sub_id else ()
        for retained in broker.retained.match(topic_filter, now):
            qos = retained.qos if retained.qos < granted else granted
            state.deliver(retained, qos, True, ids, {}, now)


def _over_subscription_limit(broker: Broker, session_count: int) -> str | None:
    """The bound a new subscription would pass: per session, or in the whole router."""
    limits = broker.limits
    if session_count >= limits.max_subscriptions:
        return "subscriptions"
    if broker.router.count >= limits.max_subscriptions_total:
        return "subscriptions_total"
    return None


def handle_unsubscribe(broker: Broker, session: Session, packet: Unsubscribe, now: float) -> None:
    """UNSUBSCRIBE: one reason code per filter, 0x11 when there was none (3.10.4)."""
    state = session.state
    assert state is not None
    codes: list[int] = []
    observers = broker.observers
    origin = session.origin
    for topic_filter in packet.topic_filters:
        if observers.client_unsubscribe:
            observers.emit(
                ClientUnsubscribe(origin.name, origin.username, session.peer, topic_filter, now)
            )
        removed = broker.router.unsubscribe(state, topic_filter)
        if state.remove_subscription(topic_filter) is not None and state.journal is not None:
            broker.store.subscription_deleted(state, topic_filter)
        if removed and observers.session_unsubscribed:
            observers.emit(
                SessionUnsubscribed(origin.name, origin.username, session.peer, topic_filter, now)
            )
        codes.append(ReasonCode.SUCCESS if removed else ReasonCode.NO_SUBSCRIPTION_EXISTED)
    if state.journal is None:
        session.unsuback(packet.packet_id, codes)
    else:
        # Once the removals are committed: a kill cannot bring back what it acknowledged.
        broker.when_committed(session, partial(session.unsuback, packet.packet_id, codes))
