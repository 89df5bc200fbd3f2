"""``Broker``: composes the router, retained store, sessions and will scheduler.

The publish path reads as a pipeline (mosquitto's handle_publish): the session has
parsed, validated and resolved the topic alias; here come ACL, message hooks (rules,
webhooks, stream log), the retained store, the router's match, and the fan-out that
encodes each wire variant once; then the session acknowledges.

One publish policy (``publish_checked``) serves an MQTT client's PUBLISH and the
gateway's hub alike: ``$delayed/``, the ``$SYS`` refusal, the ACL, then routing.

In-process API for adapters, bridges and sinks: ``publish(context)``, ``subscribe(origin,
filters)`` returning a ``LocalSubscription``, with the same semantics as an MQTT client,
and ``tap(origin, filters, callback, durable)``, a synchronous subscriber whose store
the acknowledgements wait for (``broker_core.acks``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.acks import Acknowledgements, Durable
from broker_core.acl import DENY_DISCONNECT, DENY_IGNORE, PUBLISH, Acl
from broker_core.auth import Authenticator, AuthRequest, ListenerPolicy
from broker_core.auth_exchange import AuthExchanges
from broker_core.context import Context, Origin
from broker_core.delayed import DELAYED_PREFIX, DelayedPublisher, parse_delayed_topic
from broker_core.listeners.pending import PendingSockets
from broker_core.listeners.settings import ListenerSettings
from broker_core.local import LocalSubscription
from broker_core.login_throttle import LoginThrottle
from broker_core.lograte import RateLimitedLog
from broker_core.memory import TRIM_INTERVAL_S, release_free_memory
from broker_core.mqtt.events import PublishReceived
from broker_core.mqtt.limits import DROP_OLDEST, ServerLimits
from broker_core.mqtt.packets import (
    Auth,
    Connect,
    Subscribe,
    SubscriptionOptions,
    Unsubscribe,
)
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session import Session
from broker_core.mqtt.session_state import NEVER_EXPIRES, Counters, SessionState
from broker_core.mqtt.topics import parse_shared, validate_topic_filter
from broker_core.ratelimit import TokenBucket
from broker_core.resume import restrict_to_owner
from broker_core.retained import RetainedStore
from broker_core.router import Router, Subscriber
from broker_core.sessions import SessionRegistry
from broker_core.store.base import MemoryStore, Snapshot, Store
from broker_core.subscribe import handle_subscribe, handle_unsubscribe
from broker_core.tap import Tap
from broker_core.will import WillScheduler

if TYPE_CHECKING:
    from broker_core.listeners.connection import MqttConnection
    from broker_core.sys_topics import SysTopics

__all__ = ["Broker", "MessageHook"]

log = logging.getLogger(__name__)

VERSION = "0.1.0"

# Plain ints: an IntEnum member lookup costs more than the rest of the ack decision.
_SUCCESS = int(ReasonCode.SUCCESS)
_NO_MATCHING_SUBSCRIBERS = int(ReasonCode.NO_MATCHING_SUBSCRIBERS)
_NOT_AUTHORIZED = int(ReasonCode.NOT_AUTHORIZED)
_TOPIC_NAME_INVALID = int(ReasonCode.TOPIC_NAME_INVALID)
_QUOTA_EXCEEDED = int(ReasonCode.QUOTA_EXCEEDED)


class MessageHook(Protocol):
    """Called with every message the broker accepts, before routing."""

    def __call__(self, context: Context) -> None: ...


def _has_unread_input(conn: MqttConnection) -> bool:
    return conn.has_unread_input()


class Broker:
    def __init__(
        self,
        limits: ServerLimits | None = None,
        node_name: str = "edgebus",
        write_high_water: int = 1024 * 1024,
        store: Store | None = None,
    ) -> None:
        self.limits = limits or ServerLimits()
        self.node_name = node_name
        self.write_high_water = write_high_water
        self.counters = Counters()
        self.router = Router()
        self.retained = RetainedStore(
            self.limits.max_retained_messages, self.limits.max_retained_bytes, self.counters.hit
        )
        self.sessions = SessionRegistry(self.limits, self.counters)
        self.wills = WillScheduler(self._publish_will)
        self.connections: set[MqttConnection] = set()
        self.pending: PendingSockets[MqttConnection] = PendingSockets()
        self._closed_since_trim = 0
        self.hooks: list[MessageHook] = []
        self.store: Store = store if store is not None else MemoryStore()
        self.acks = Acknowledgements(self.store)
        self.delayed = DelayedPublisher(
            self._publish_delayed, self.store, self.limits.max_delayed_messages
        )
        self.sys_topics: SysTopics | None = None
        self._listener_counts: dict[str, int] = {}
        self._connection_buckets: dict[str, TokenBucket] = {}
        self.authenticator: Authenticator = ListenerPolicy()
        self.auth_exchanges = AuthExchanges(self.limits.connect_timeout_s)
        self.acl: Acl | None = None
        self.login_throttle: LoginThrottle | None = LoginThrottle(on_throttled=self.counters.hit)
        self.refusal_log = RateLimitedLog(log)  # ACL refusals a client can repeat at will
        self.acl_deny_action = DENY_IGNORE
        self.started_at = time.time()
        self.clients_total = 0

    # -- in-process API -------------------------------------------------------------------

    def publish(
        self,
        context: Context,
        sender: Subscriber | None = None,
        now: float | None = None,
        frame: bytes | None = None,
        frame_v5: bool = False,
    ) -> int:
        """Routes ``context``; returns how many subscribers it reached (0: PUBACK 0x10).

        ``frame``: the received PUBLISH when it can be forwarded byte for byte to
        subscribers of its protocol family at QoS 0 (see ``PublishReceived``).
        """
        if now is None:
            now = time.time()
        for hook in self.hooks:
            hook(context)
        if context.retain and self.retained.set(context) and context.origin.protocol != "sys":
            if context.payload:
                self.store.retained_set(context)
            else:
                self.store.retained_cleared(context.topic)
        targets = self.router.match(context.topic)
        if targets.empty:
            return 0
        # One encoding per wire variant, shared by every subscriber of that variant.
        cache: dict[Any, Any] = {} if frame is None else {(frame_v5, 0, False, ()): (frame, b"")}
        qos_in = context.qos
        retain_in = context.retain
        count = 0
        for subscriber, entries in targets.subscribers:
            if len(entries) == 1:
                entry = entries[0]
                if entry.no_local and subscriber is sender:
                    continue  # [MQTT-3.8.3-3]
                qos = entry.qos if entry.qos < qos_in else qos_in
                subscriber.deliver(
                    context,
                    qos,
                    retain_in and entry.retain_as_published,
                    entry.subscription_ids,
                    cache,
                    now,
                )
            else:
                # Overlapping subscriptions: one message, the maximum QoS, every
                # subscription identifier [MQTT-3.3.4-2, -3, -5].
                qos = -1
                rap = False
                ids: tuple[int, ...] = ()
                for entry in entries:
                    if entry.no_local and subscriber is sender:
                        continue
                    granted = entry.qos if entry.qos < qos_in else qos_in
                    if granted > qos:
                        qos = granted
                    rap = rap or entry.retain_as_published
                    ids += entry.subscription_ids
                if qos < 0:
                    continue
                subscriber.deliver(context, qos, retain_in and rap, ids, cache, now)
            count += 1
        for group in targets.groups:
            member = group.pick()
            if member is None:
                continue
            qos = member.qos if member.qos < qos_in else qos_in
            member.subscriber.deliver(
                context,
                qos,
                retain_in and member.retain_as_published,
                member.subscription_ids,
                cache,
                now,
            )
            count += 1
        return count

    def publish_checked(
        self,
        context: Context,
        publisher: Origin,
        sender: Subscriber | None = None,
        now: float | None = None,
        frame: bytes | None = None,
        frame_v5: bool = False,
        can_refuse: bool = True,
    ) -> int:
        """The publish policy of every publisher, an MQTT client or a hub client.

        ``$delayed/<s>/<topic>`` is scheduled (Quota exceeded, 0x97, past the limit; an
        invalid one is Topic Name invalid, 0x90); ``$SYS`` belongs to the broker (Not
        authorized, 0x87, MQTT 4.7.2); the ACL checks ``publisher`` (0x87); then the
        message is routed. A QoS 1/2 retained message over the retained store's bounds is
        refused (Quota exceeded, 0x97) when the publisher ``can_refuse`` (not MQTT 3.1.1,
        which has no reason codes: delivered, not retained, counted). Returns the reason
        code of the publisher's acknowledgement: Success or No matching subscribers (0x10)
        when accepted. Refusals are counted once, here, in ``publish_denied``.
        """
        if now is None:
            now = time.time()
        topic = context.topic
        delay = None
        if topic[0] == "$":
            if topic.startswith(DELAYED_PREFIX):
                delay = parse_delayed_topic(topic)
                if delay is None:
                    self.counters.publish_denied += 1
                    return _TOPIC_NAME_INVALID
                context = replace(context, topic=delay[1])
            elif topic.startswith("$SYS"):
                self.counters.publish_denied += 1
                return _NOT_AUTHORIZED
        acl = self.acl
        if acl is not None and not acl.allows(publisher, PUBLISH, context.topic):
            self.counters.publish_denied += 1
            return _NOT_AUTHORIZED
        if context.retain and context.qos and can_refuse:
            limit = self.retained.over_limit(context)
            if limit is not None:
                self.retained.refuse(limit)
                return _QUOTA_EXCEEDED
        if delay is not None:
            if self.delayed.schedule(context, delay[0], now):
                return _SUCCESS
            return _QUOTA_EXCEEDED
        if self.publish(context, sender, now, frame, frame_v5):
            return _SUCCESS
        return _NO_MATCHING_SUBSCRIBERS

    def subscribe(
        self,
        origin: Origin,
        filters: Iterable[str],
        qos: int = 2,
        *,
        no_local: bool = True,
        retain_as_published: bool = True,
        send_retained: bool = True,
        maxsize: int = 10_000,
        overflow: str = DROP_OLDEST,
        on_message: Callable[[Context], None] | None = None,
    ) -> LocalSubscription:
        """A local consumer of ``filters`` (``$share/...`` allowed).

        ``no_local``: messages whose origin has ``origin``'s protocol and name are skipped
        before they take a place in the queue.
        """
        sub = LocalSubscription(
            origin, maxsize, overflow, on_message, self._unsubscribe_local, no_local
        )
        self._add_local(sub, filters, qos, no_local, retain_as_published, send_retained)
        return sub

    def tap(
        self,
        origin: Origin,
        filters: Iterable[str],
        callback: Callable[[Context], None],
        qos: int = 2,
        *,
        durable: Durable | None = None,
        no_local: bool = True,
        retain_as_published: bool = True,
        send_retained: bool = False,
    ) -> Tap:
        """A synchronous subscriber of ``filters`` (see ``broker_core.tap``).

        With ``durable``, that store takes part in every acknowledgement from now until
        the tap is closed: a publisher is acknowledged once its message is in it.
        """
        tap = Tap(origin, callback, durable, no_local, self._unsubscribe_local)
        self._add_local(tap, filters, qos, no_local, retain_as_published, send_retained)
        if durable is not None:
            self.acks.add(durable)
        return tap

    def _add_local(
        self,
        sub: LocalSubscription | Tap,
        filters: Iterable[str],
        qos: int,
        no_local: bool,
        retain_as_published: bool,
        send_retained: bool,
    ) -> None:
        options = SubscriptionOptions(qos, no_local, retain_as_published)
        now = time.time()
        for topic_filter in filters:
            shared = parse_shared(topic_filter)
            validate_topic_filter(shared.topic_filter if shared else topic_filter)
            self.router.subscribe(sub, topic_filter, options)
            sub.filters.append(topic_filter)
            if send_retained and shared is None:
                for retained in self.retained.match(topic_filter):
                    sub.deliver(retained, min(retained.qos, qos), True, (), {}, now)

    def add_local_filters(
        self,
        sub: LocalSubscription,
        filters: Iterable[str],
        qos: int = 2,
        *,
        no_local: bool = True,
        retain_as_published: bool = True,
        send_retained: bool = True,
    ) -> None:
        """Adds ``filters`` to a live local subscription (those it has already are
        skipped); a message matching several of its filters is still delivered once."""
        if sub.closed:
            return
        new = [f for f in dict.fromkeys(filters) if f not in sub.filters]
        self._add_local(sub, new, qos, no_local, retain_as_published, send_retained)

    def remove_local_filters(self, sub: LocalSubscription, filters: Iterable[str]) -> None:
        """Removes ``filters`` from a live local subscription; what it queued stays."""
        for topic_filter in filters:
            if topic_filter in sub.filters:
                self.router.unsubscribe(sub, topic_filter)
                sub.filters.remove(topic_filter)

    def _unsubscribe_local(self, sub: LocalSubscription | Tap) -> None:
        for topic_filter in sub.filters:
            self.router.unsubscribe(sub, topic_filter)
        sub.filters.clear()
        if isinstance(sub, Tap) and sub.durable is not None:
            self.acks.remove(sub.durable)

    # -- MQTT connections (called by listeners.connection) ----------------------------------

    def connection_made(self, conn: MqttConnection) -> None:
        """Registers a new socket, pending until it sends CONNECT (listeners.pending)."""
        self.connections.add(conn)
        listener = conn.listener
        oldest = self.pending.add(
            listener.name, conn, listener.max_pending_connections, _has_unread_input
        )
        if oldest is not None:
            self.counters.hit("pending_connections")
            oldest.evict()

    def connect_received(self, conn: MqttConnection) -> int | None:
        """A socket sent CONNECT; returns a reason to refuse it, if any.

        Per listener: at most ``max_connections`` clients that sent CONNECT at once
        (Quota exceeded, 0x97), and at most ``connection_rate`` CONNECTs per second (0x9F).
        """
        listener = conn.listener
        if not self.pending.remove(listener.name, conn):
            return ReasonCode.UNSPECIFIED_ERROR  # evicted or closed meanwhile
        conn.counted = True
        count = self._listener_counts.get(listener.name, 0) + 1
        self._listener_counts[listener.name] = count
        if count > listener.max_connections:
            self.counters.hit("max_connections")
            return ReasonCode.QUOTA_EXCEEDED
        if listener.connection_rate is not None:
            now = time.time()
            bucket = self._connection_buckets.get(listener.name)
            if bucket is None:
                burst = max(1.0, listener.connection_rate)
                bucket = self._connection_buckets[listener.name] = TokenBucket(
                    listener.connection_rate, burst, now
                )
            if not bucket.try_take(now):
                self.counters.hit("connection_rate")
                return ReasonCode.CONNECTION_RATE_EXCEEDED
        return None

    async def connect(
        self,
        session: Session,
        connect: Connect,
        now: float,
        listener: ListenerSettings | None = None,
        certificate_identity: str | None = None,
    ) -> None:
        """Decides on a CONNECT: client id, credentials, keep alive, session, takeover."""
        limits = self.limits
        v5 = connect.protocol_level == 5
        client_id = connect.client_id
        assigned: str | None = None
        if not client_id:
            if connect.protocol_level == 3 or (not v5 and not connect.clean_start):
                # [MQTT-3.1.3-8] (3.1.1); MQTT 3.1 requires 1 to 23 characters.
                session.reject(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)
                return
            client_id = self.sessions.assign_client_id()
            if v5:
                assigned = client_id  # [MQTT-3.2.2-16]
        if len(client_id) > limits.max_client_id_length or (
            connect.protocol_level == 3 and len(client_id) > 23  # MQTT 3.1: 1 to 23 characters
        ):
            session.reject(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)
            return
        method = connect.properties.authentication_method if v5 else None
        request = AuthRequest(
            client_id,
            connect.username,
            connect.password,
            session.peer,
            listener or ListenerSettings(),
            connect.protocol_level,
            certificate_identity,
            auth_method=method,
            auth_data=None if method is None else connect.properties.authentication_data,
            exchange=None if method is None else self.auth_exchanges.exchange(session, method),
        )
        throttle = self.login_throttle
        if throttle is None:
            result = await self.authenticator.authenticate(request)
        else:
            deadline = session.next_deadline()
            budget = limits.connect_timeout_s if deadline is None else deadline - now
            result = await throttle.authenticate(self.authenticator, request, now, budget)
        if not result.allowed:
            log.info(
                "client %s from %s refused (0x%02X)",
                client_id,
                session.peer,
                result.reason_code,
                extra={"client_id": client_id},
            )
            session.reject(result.reason_code)
            return
        will = connect.will
        if will is not None and (
            will.qos > limits.max_qos or (will.retain and not limits.retain_available)
        ):
            if v5:
                # [MQTT-3.2.2-12, -13]: refuse a will the server cannot honour.
                code = (
                    ReasonCode.QOS_NOT_SUPPORTED
                    if will.qos > limits.max_qos
                    else ReasonCode.RETAIN_NOT_SUPPORTED
                )
                session.reject(code)
                return
            # MQTT 3.1.1 cannot be told: the will is published as the server can.
            connect = replace(
                connect,
                will=replace(
                    will,
                    qos=min(will.qos, limits.max_qos),
                    retain=will.retain and limits.retain_available,
                ),
            )
            session.connect = connect
        keep_alive = connect.keep_alive
        if v5 and limits.server_keep_alive is not None:
            keep_alive = limits.server_keep_alive
        elif keep_alive > limits.max_keepalive or (
            keep_alive == 0 and limits.max_keepalive < 65535
        ):
            if not v5:
                session.reject(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)
                return
            keep_alive = limits.max_keepalive
        if session.closed:
            return  # the client went away while we decided
        if v5:
            expiry = min(connect.properties.session_expiry_interval or 0, limits.max_session_expiry)
            if (
                connect.properties.session_expiry_interval == NEVER_EXPIRES
                and limits.max_session_expiry >= NEVER_EXPIRES
            ):
                expiry = NEVER_EXPIRES
        else:
            expiry = 0 if connect.clean_start else limits.max_session_expiry
        self._accept(
            session,
            connect,
            client_id,
            assigned,
            keep_alive,
            expiry,
            now,
            result.username,
            result.auth_data,
        )

    def _accept(
        self,
        session: Session,
        connect: Connect,
        client_id: str,
        assigned: str | None,
        keep_alive: int,
        expiry: int,
        now: float,
        username: str | None = None,
        auth_data: bytes | None = None,
    ) -> None:
        existing = self.sessions.get(client_id)
        if existing is not None and existing.connection is not None:
            old = existing.connection
            old.disconnect(ReasonCode.SESSION_TAKEN_OVER)  # [MQTT-3.1.4-3]
            self._end_connection(old, now, taken_over=True)
        if existing is not None and connect.clean_start:
            # The old session ends now, so its pending will goes out [MQTT-3.1.2-8].
            self.wills.fire_now(client_id)
        else:
            self.wills.cancel(client_id)  # [MQTT-3.1.3-9]: back within the will delay
        if existing is not None and (connect.clean_start or existing.expiry_interval == 0):
            self._discard(existing)
            existing = None
        if existing is None:
            state = self.sessions.create(client_id)
            present = False
        else:
            state = existing
            self.sessions.cancel_expiry(state)
            present = True
            if self.acl is not None:
                owner = username if username is not None else connect.username
                self._restrict_resumed(state, Origin("mqtt", client_id, session.peer, owner))
        state.expiry_interval = expiry
        self._persist_session(state)
        self.clients_total += 1
        session.accept(
            state,
            present,
            now,
            assigned_client_id=assigned,
            session_expiry_interval=expiry,
            keep_alive=keep_alive if keep_alive != connect.keep_alive else None,
            username=username if username is not None else connect.username,
            auth_method=connect.properties.authentication_method,
            auth_data=auth_data,
        )
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
        if self.sys_topics is not None:
            self.sys_topics.client_connected(session)

    def _restrict_resumed(self, state: SessionState, owner: Origin) -> None:
        """The resumed session keeps only what its new owner may read (broker_core.resume)."""
        assert self.acl is not None
        removed, dropped = restrict_to_owner(state, owner, self.acl, self.router, self.store)
        if removed or dropped:
            log.info(
                "client %s resumed a session holding what user %s may not read: removed %d"
                " subscriptions and %d messages",
                state.client_id,
                owner.username,
                removed,
                dropped,
            )

    def on_publish(self, session: Session, event: PublishReceived, now: float) -> None:
        """A client's PUBLISH: the publish policy, then the acknowledgement."""
        context = event.context
        code = self.publish_checked(
            context,
            session.origin,
            session.state,
            now,
            event.frame,
            event.frame_v5,
            can_refuse=session.protocol_level == 5,
        )
        if (
            code == _NOT_AUTHORIZED
            and self.acl_deny_action == DENY_DISCONNECT
            and not context.topic.startswith("$SYS")
        ):
            session.disconnect(ReasonCode.NOT_AUTHORIZED)
            return
        if context.qos:
            self._acknowledge(session, event.packet_id or 0, context.qos, code)

    def _acknowledge(self, session: Session, packet_id: int, qos: int, code: int) -> None:
        """PUBACK/PUBREC once what the message changed is durable, in arrival order."""
        acks = self.acks
        if (
            not session.acks_held
            and not self.store.pending
            and (not acks.participants or acks.idle())
        ):
            session.acknowledge(packet_id, qos, code)
            return
        session.acks_held += 1

        def committed(ok: bool) -> None:
            session.acks_held -= 1
            if ok:
                session.acknowledge(packet_id, qos, code)
            else:
                session.disconnect(ReasonCode.UNSPECIFIED_ERROR, "store write failed")

        self.acks.after(session, committed)

    def on_subscribe(self, session: Session, packet: Subscribe, now: float) -> None:
        handle_subscribe(self, session, packet, now)

    def on_auth(
        self,
        session: Session,
        auth: Auth,
        listener: ListenerSettings | None = None,
        certificate_identity: str | None = None,
    ) -> None:
        """A client's AUTH: the next step of enhanced authentication, or re-authentication."""
        self.auth_exchanges.received(
            session, auth, self.authenticator, listener or ListenerSettings(), certificate_identity
        )

    def on_unsubscribe(self, session: Session, packet: Unsubscribe) -> None:
        handle_unsubscribe(self, session, packet)

    def connection_lost(self, conn: MqttConnection, now: float) -> None:
        self.connections.discard(conn)
        self._closed_since_trim += 1
        if conn.counted:
            self._listener_counts[conn.listener.name] -= 1
        else:
            self.pending.remove(conn.listener.name, conn)
        self._end_connection(conn.session, now, taken_over=False)

    # -- internals ---------------------------------------------------------------------------

    def _end_connection(self, session: Session, now: float, taken_over: bool) -> None:
        """Detaches a closed connection from its session: will, then expiry."""
        state = session.state
        if state is None or state.connection is not session:
            return
        state.connection = None
        will = session.will
        session.will = None
        if will is not None:
            # Published after the will delay or when the session ends, whichever is
            # first; a takeover within the delay cancels it in _accept.
            delay = min(will.properties.will_delay_interval or 0, state.expiry_interval)
            self.wills.schedule(state.client_id, will, session.origin, delay)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "client %s disconnected (reason 0x%02X)",
                state.client_id,
                session.close_reason or 0,
                extra={"client_id": state.client_id},
            )
        if self.sys_topics is not None:
            self.sys_topics.client_disconnected(session)
        if taken_over:
            return
        if state.expiry_interval == 0:
            self._discard(state)
        else:
            if state.journal is not None:
                self.store.session_offline(state, now)
            self.sessions.schedule_expiry(state, self._expire)

    def discard_session(self, client_id: str, now: float | None = None) -> bool:
        """Ends a client's session by administrative action (the API's kick).

        A connected client gets DISCONNECT 0x98 (MQTT 5) and its will is published; the
        session, persistent or not, is then gone with its subscriptions and queue.
        False when no session has that client id.
        """
        state = self.sessions.get(client_id)
        if state is None:
            return False
        now = time.time() if now is None else now
        session = state.connection
        if session is not None:
            session.disconnect(ReasonCode.ADMINISTRATIVE_ACTION)
            self._end_connection(session, now, taken_over=False)
        self.wills.fire_now(client_id)
        if self.sessions.get(client_id) is state:
            self._discard(state)
        return True

    def _expire(self, state: SessionState) -> None:
        if state.connection is None:
            self.wills.fire_now(state.client_id)
            self._discard(state)

    def _persist_session(self, state: SessionState) -> None:
        """A session with an expiry interval is written to a durable store; else forgotten."""
        if state.expiry_interval and self.store.durable:
            state.journal = self.store
            self.store.session_saved(state)
        elif state.journal is not None:
            self.store.session_deleted(state)
            state.journal = None

    def restore(self, snapshot: Snapshot, now: float) -> None:
        """Rebuilds retained messages and offline sessions from the store at start-up."""
        for context in snapshot.retained:
            self.retained.set(context)
        for restored in snapshot.sessions:
            state = self.sessions.create(restored.client_id)
            state.expiry_interval = restored.expiry_interval
            state.journal = self.store
            for subscription in restored.subscriptions:
                self.router.subscribe(
                    state,
                    subscription.topic_filter,
                    subscription.options,
                    subscription.subscription_id,
                )
                state.subscriptions[subscription.topic_filter] = subscription
            for delivery in restored.deliveries:
                if delivery.packet_id:
                    state.outgoing[delivery.packet_id] = delivery
                else:
                    state.queue.append(delivery)
                    state.queued_bytes += delivery.size()
            if state.outgoing:
                state.next_packet_id = max(state.outgoing) % 0xFFFF + 1
            state.incoming_qos2 = set(restored.incoming_qos2)
            offline_for = now - (restored.offline_since or now)
            remaining = max(restored.expiry_interval - offline_for, 0)
            self.sessions.schedule_expiry(state, self._expire, remaining)
        self.delayed.restore(snapshot.delayed, now)

    def _discard(self, state: SessionState) -> None:
        if state.journal is not None:
            self.store.session_deleted(state)
            state.journal = None
        for topic_filter in state.subscriptions:
            self.router.unsubscribe(state, topic_filter)
        state.subscriptions.clear()
        state.queue.clear()
        state.queued_bytes = 0
        state.outgoing.clear()
        self.sessions.remove(state)

    def _publish_delayed(self, context: Context) -> None:
        self.publish(context)

    def _publish_will(self, context: Context) -> None:
        if self.acl is not None and not self.acl.allows(context.origin, PUBLISH, context.topic):
            self.counters.publish_denied += 1
            return
        self.publish(context)

    def sweep(self, now: float) -> None:
        """Keep alive and connect timeouts of every connection."""
        for conn in list(self.connections):
            session = conn.session
            deadline = session.next_deadline()
            if deadline is not None and now >= deadline:
                session.handle_timeout(now)
                conn.after_session_update(now)

    async def run(self, sweep_interval_s: float = 0.5) -> None:
        """Housekeeping until cancelled: keep alive, connect timeouts, and memory freed
        by closed connections given back to the system (broker_core.memory)."""
        trimmed_at = time.monotonic()
        while True:
            await asyncio.sleep(sweep_interval_s)
            self.sweep(time.time())
            if self._closed_since_trim and time.monotonic() - trimmed_at >= TRIM_INTERVAL_S:
                self._closed_since_trim = 0
                # In a worker thread: walking a large heap takes a while.
                await asyncio.to_thread(release_free_memory)
                trimmed_at = time.monotonic()
