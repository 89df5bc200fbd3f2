"""``Broker``: composes the router, retained store, sessions, connections and wills.

The publish path reads as a pipeline (mosquitto's handle_publish): the session has
parsed, validated and resolved the topic alias; here the message gets its envelope
(``Context``), then come the publish policy, the message hooks and ``message.publish``
observers, the retained store, the router's match, and the fan-out that encodes each
wire variant once; then the session acknowledges, once what the message changed is
durable.

One publish policy (``publish_checked``) serves an MQTT client's PUBLISH and the
gateway's hub alike: ``$delayed/``, the ``$SYS`` refusal, the ACL, then routing.

The rest is delegated, one module per job: the listeners' connections, bounds and
timeouts (``listeners.connections``), the CONNECT policy (``connect``), SUBSCRIBE and
UNSUBSCRIBE (``subscribe``), the life of sessions (``sessions``), broker events
(``observe``) and the statistics every reader shares (``stats``: ``Broker.stats()``).

In-process API for adapters, bridges and sinks: ``publish(context)``, ``subscribe(origin,
filters)`` returning a ``LocalSubscription``, with the same semantics as an MQTT client,
and ``tap(origin, filters, callback, durable)``, a synchronous subscriber whose store
the acknowledgements wait for (``broker_core.acks``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import replace
from typing import Any, Protocol

from broker_core.acks import Acknowledgements, Durable
from broker_core.acl import DENY_DISCONNECT, DENY_IGNORE, PUBLISH, Acl
from broker_core.auth import Authenticator, ListenerPolicy
from broker_core.auth_exchange import AuthExchanges
from broker_core.clock import BASE as _CLOCK_BASE
from broker_core.clock import monotonic as _monotonic
from broker_core.clock import now as clock_now
from broker_core.connect import handle_connect
from broker_core.context import EMPTY_META, Context, Origin, new_context, next_message_id
from broker_core.delayed import DELAYED_PREFIX, DelayedPublisher, parse_delayed_topic
from broker_core.listeners.connections import WRITE_TIMEOUT_S, Connections
from broker_core.listeners.settings import ListenerSettings
from broker_core.local import LocalSubscription
from broker_core.login_throttle import LoginThrottle
from broker_core.lograte import RateLimitedLog
from broker_core.mqtt.events import PublishReceived
from broker_core.mqtt.limits import DROP_OLDEST, ServerLimits
from broker_core.mqtt.packets import Auth, Connect, Subscribe, SubscriptionOptions, Unsubscribe
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session import Session
from broker_core.mqtt.session_state import Counters, SessionState
from broker_core.mqtt.topics import (
    SHARE_PREFIX,
    abbreviate,
    parse_shared,
    too_deep,
    topic_name_problem,
    validate_topic_filter,
)
from broker_core.observe import MessagePublish, Observers
from broker_core.retained import SWEEP_BATCH, RetainedStore, clears
from broker_core.router import Router, Subscriber
from broker_core.sessions import SessionRegistry
from broker_core.stats import BrokerStats, collect_stats
from broker_core.store.base import MemoryStore, Snapshot, Store
from broker_core.subscribe import handle_subscribe, handle_unsubscribe
from broker_core.tap import Tap
from broker_core.version import VERSION
from broker_core.will import WillScheduler

__all__ = ["VERSION", "Broker", "Refuser"]

log = logging.getLogger(__name__)

# Plain ints: an IntEnum member lookup costs more than the rest of the ack decision.
_SUCCESS = int(ReasonCode.SUCCESS)
_NO_MATCHING_SUBSCRIBERS = int(ReasonCode.NO_MATCHING_SUBSCRIBERS)
_NOT_AUTHORIZED = int(ReasonCode.NOT_AUTHORIZED)
_TOPIC_NAME_INVALID = int(ReasonCode.TOPIC_NAME_INVALID)
_QUOTA_EXCEEDED = int(ReasonCode.QUOTA_EXCEEDED)
_UNSPECIFIED_ERROR = int(ReasonCode.UNSPECIFIED_ERROR)
# For ``Broker.when_durable``: not a packet but the DISCONNECT of a refused QoS 2 message.
_REFUSED = b""


class Broker:
    def __init__(
        self,
        limits: ServerLimits | None = None,
        node_name: str = "edgebus",
        write_high_water: int = 1024 * 1024,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        store: Store | None = None,
    ) -> None:
        self.limits = limits = limits or ServerLimits()
        self._max_topic_levels = limits.max_topic_levels  # read on every publish
        self.node_name = node_name
        self.write_high_water = write_high_water
        self.started_at = clock_now()
        self.counters = Counters()
        self.observers = Observers()
        self.router = Router(self.counters.hit)
        self.retained = RetainedStore(
            limits.max_retained_messages,
            limits.max_retained_bytes,
            self.counters.hit,
            self._retained_expired,
        )
        self.store: Store = store if store is not None else MemoryStore()
        self.acks = Acknowledgements(self.store)
        # Durable components that cannot take what they should (a bridge whose queue
        # cannot be opened: ``gateway.components.refusal``): a QoS 1/2 message one of them
        # ``refuses`` is refused whole before the retained store and routing, 0x80.
        self.refusals: list[Refuser] = []
        # Every session's ``when_durable`` (connect): one bound method, not one a client.
        self.when_durable_hook = self.when_durable
        self.wills = WillScheduler(
            self._publish_will,
            self.store,
            limits.max_will_bytes_total,
            on_full=lambda: self.counters.hit("will_bytes_total"),
        )
        self.sessions = SessionRegistry(
            limits, self.counters, self.observers, self.router, self.store, self.wills
        )
        self.connections = Connections(self.counters, write_timeout_s)
        self.delayed = DelayedPublisher(
            self._publish_delayed,
            self.store,
            limits.max_delayed_messages,
            on_refused=lambda context: self._dropped(context, "delayed_limit"),
            max_bytes=limits.max_delayed_bytes,
        )
        self.authenticator: Authenticator = ListenerPolicy()
        self.auth_exchanges = AuthExchanges(limits.connect_timeout_s)
        self.acl: Acl | None = None
        self.login_throttle: LoginThrottle | None = LoginThrottle(on_throttled=self.counters.hit)
        self.refusal_log = RateLimitedLog(log)  # ACL refusals a client can repeat at will
        self.acl_deny_action = DENY_IGNORE

    def stats(self) -> BrokerStats:
        """What the broker counts, one definition for ``$SYS``, ``/metrics`` and the API."""
        return collect_stats(self)

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
            now = _CLOCK_BASE + _monotonic()  # broker_core.clock, inline (per message)
        observers = self.observers
        if observers.message_hooks:
            for hook in observers.message_hooks:  # not in a method: no frame per message
                try:
                    hook(context)
                except Exception:
                    observers.failed(hook, "message hook")
        if observers.message_publish:
            observers.emit(MessagePublish(context, now))
        if context.retain:
            self._retain(context, now)
        targets = self.router.match(context.topic)
        if targets.empty:
            if observers.message_dropped:
                observers.report_dropped(context, "no_subscribers", None, None, now)
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
                # subscription identifier [MQTT-3.3.4-2, -3, -4]. A retained message
                # matching subscriptions with and without Retain As Published goes to an
                # MQTT client twice: retain 1 for the first [MQTT-3.3.1-13], 0 for the
                # others [MQTT-3.3.1-12], each copy at its subscriptions' maximum QoS
                # with their identifiers (3.3.4 allows a copy per subscription,
                # [MQTT-3.3.4-5]; mosquitto does the same).
                qos = kept_qos = -1
                ids: tuple[int, ...] = ()
                kept_ids: tuple[int, ...] = ()
                for entry in entries:
                    if entry.no_local and subscriber is sender:
                        continue
                    granted = entry.qos if entry.qos < qos_in else qos_in
                    if retain_in and entry.retain_as_published:
                        if granted > kept_qos:
                            kept_qos = granted
                        kept_ids += entry.subscription_ids
                    else:
                        if granted > qos:
                            qos = granted
                        ids += entry.subscription_ids
                if kept_qos >= 0:
                    if qos >= 0 and not isinstance(subscriber, SessionState):
                        # In-process subscribers get a message once (``add_local_filters``)
                        kept_qos = max(qos, kept_qos)
                        kept_ids += ids
                        qos = -1
                    subscriber.deliver(context, kept_qos, True, kept_ids, cache, now)
                elif qos < 0:
                    continue
                if qos >= 0:
                    subscriber.deliver(context, qos, False, ids, cache, now)
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
        authorized, 0x87, MQTT 4.7.2); ``$share/...`` is Topic Name invalid (0x90: the
        form of a shared subscription, ``mqtt.topics``); a topic deeper than
        ``max_topic_levels`` is Topic Name invalid (0x90, limit ``topic_levels``); the ACL
        checks ``publisher`` (0x87); then the message is routed (an MQTT 3.1.1 or 3.1
        client's PUBLISH refused Topic Name invalid closes its connection: ``on_publish``).
        A QoS 1/2 retained message over the retained store's bounds is refused (Quota
        exceeded, 0x97) when the publisher ``can_refuse`` (not MQTT 3.1.1,
        which has no reason codes: delivered, not retained, counted). Returns the reason
        code of the publisher's acknowledgement: Success or No matching subscribers (0x10)
        when accepted. Refusals are counted once, here, in ``publish_denied``; a QoS 1/2
        message a durable component ``refuses`` (``refusals``) is Unspecified error (0x80),
        neither retained nor routed, counted by that component.
        """
        if now is None:
            now = _CLOCK_BASE + _monotonic()  # broker_core.clock, inline (per message)
        topic = context.topic
        delay = None
        if topic[0] == "$":
            if topic.startswith(DELAYED_PREFIX):
                delay = parse_delayed_topic(topic)
                if delay is None:
                    self.counters.publish_denied += 1
                    return _TOPIC_NAME_INVALID
                topic = delay[1]
                context = replace(context, topic=topic)
            elif topic.startswith("$SYS"):
                self.counters.publish_denied += 1
                return _NOT_AUTHORIZED
            elif topic.startswith(SHARE_PREFIX):
                self.counters.publish_denied += 1
                return _TOPIC_NAME_INVALID  # a shared subscription's form (topics)
        # topics.too_deep, inlined (the hot path): a topic shorter than the bound pays one
        # comparison. Before the retained store (a trie node per level) and the router.
        max_levels = self._max_topic_levels
        if len(topic) >= max_levels and topic.count("/") >= max_levels:
            self.counters.hit("topic_levels")
            self.counters.publish_denied += 1
            return _TOPIC_NAME_INVALID
        acl = self.acl
        if acl is not None and not acl.allows(publisher, PUBLISH, context.topic):
            self.counters.publish_denied += 1
            return _NOT_AUTHORIZED
        if context.retain and context.qos and can_refuse:
            limit = self.retained.over_limit(context)
            if limit is not None:
                self.retained.refuse(limit)
                self._dropped(context, "retained_limit", now)
                return _QUOTA_EXCEEDED
        if self.refusals and context.qos:
            for refusal in self.refusals:
                if refusal.refuses(context):
                    return _UNSPECIFIED_ERROR
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
            origin, maxsize, overflow, on_message, self._unsubscribe_local, no_local, self.observers
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
        now = clock_now()
        for topic_filter in filters:
            shared = parse_shared(topic_filter)
            validate_topic_filter(shared.topic_filter if shared else topic_filter)
            self.router.subscribe(sub, topic_filter, options)
            sub.filters.append(topic_filter)
            if send_retained and shared is None:
                for retained in self.retained.match(topic_filter, now):
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

    # -- MQTT clients (called by listeners.connection, a ``Server``) -----------------------

    def connect(
        self,
        session: Session,
        connect: Connect,
        now: float,
        listener: ListenerSettings | None = None,
        certificate_identity: str | None = None,
        refusal: int | None = None,
    ) -> Coroutine[Any, Any, None] | None:
        """Decides on a CONNECT (``broker_core.connect``): None when decided now, else
        the rest of the decision to await (authentication that must wait)."""
        return handle_connect(self, session, connect, now, listener, certificate_identity, refusal)

    def on_publish(self, session: Session, event: PublishReceived, now: float) -> None:
        """A client's PUBLISH: the publish policy, then the acknowledgement."""
        origin = session.origin
        packet = event.packet
        qos = packet.qos
        context = new_context(
            event.topic,
            packet.payload,
            qos,
            packet.retain,
            event.properties,
            origin,
            EMPTY_META,
            next_message_id(),
            int(now * 1e9),
        )
        v5 = session.protocol_level == 5
        code = self.publish_checked(context, origin, session.state, now, event.frame, v5, v5)
        if code >= 0x80:
            if code == _UNSPECIFIED_ERROR:
                # Refused whole by a durable component (``refusals``): not acknowledged,
                # the packet id not received; the client is disconnected (0x80), after
                # its earlier acknowledgements, to send it again, as after a failed write.
                if qos == 2 and session.state is not None:
                    session.state.remove_incoming(packet.packet_id or 0)
                self.when_durable(session, _REFUSED)
                return
            if code == _TOPIC_NAME_INVALID and not v5:
                # MQTT 3.1.1 and 3.1 have no reason code to refuse it with, and a PUBACK
                # would say it was taken: not acknowledged, the connection closes
                # ([MQTT-3.3.5-2]), the packet id not received (a resend is judged again).
                if qos == 2 and session.state is not None:
                    session.state.remove_incoming(packet.packet_id or 0)
                session.disconnect(ReasonCode.TOPIC_NAME_INVALID)
                return
            if (
                code == _NOT_AUTHORIZED
                and self.acl_deny_action == DENY_DISCONNECT
                and not context.topic.startswith("$SYS")
            ):
                session.disconnect(ReasonCode.NOT_AUTHORIZED)
                return
        if qos:
            if qos == 2:
                self._acknowledge_qos2(session, packet.packet_id or 0, code)
            else:
                self._acknowledge(session, packet.packet_id or 0, qos, code)

    def _acknowledge_qos2(self, session: Session, packet_id: int, code: int) -> None:
        """PUBREC, after the packet id is recorded as received (a persistent session) in
        the store's commit that holds what the message changed there (its queue entries
        for persistent subscribers, its retained copy): the same loop turn, so one commit
        (``store.held``). When durable participants (a bridge queue, the stream log) took
        it, that commit waits until they committed it (``Store.incoming_added_after``).
        A kill thus leaves the id received and the message everywhere it went, or neither:
        the publisher's resend (DUP) is then routed again, and QoS 2 subscribers of
        persistent sessions, whose PUBLISH waits for that commit (``Outgoing._send_qos2``),
        get the message once [MQTT-4.3.3]."""
        state = session.state
        if code >= 0x80:
            # A refusing PUBREC ends the flow: the id is free once its removal is
            # committed, which this acknowledgement then waits for (as PUBCOMP does).
            if state is not None:
                state.remove_incoming(packet_id)
        elif state is not None and state.journal is not None:
            participants = self.acks.participants
            waiting = [p for p in participants if p.pending] if participants else None
            if waiting:
                # Also waited for: a participant that failed (the record left out)
                # answers only its first barrier, the record's (``Refusal``).
                record = self.store.incoming_added_after(state, packet_id, waiting)
                self._acknowledge(session, packet_id, 2, code, record)
                return
            state.record_incoming(packet_id)
        self._acknowledge(session, packet_id, 2, code)

    def _acknowledge(
        self, session: Session, packet_id: int, qos: int, code: int, record: Durable | None = None
    ) -> None:
        """PUBACK/PUBREC once what the message changed is durable, in arrival order."""
        acks = self.acks
        if (
            record is None
            and not session.acks_held
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
            elif qos == 2 and session.state is not None:
                # Refused (a failed write, a refusal): the packet id is not received,
                # so that the client's resend is routed again, not taken for a
                # duplicate; the client is told (DISCONNECT) once that is committed.
                session.state.remove_incoming(packet_id)
                self.when_durable(session, _REFUSED)
            else:
                session.disconnect(ReasonCode.UNSPECIFIED_ERROR, "store write failed")

        self.acks.after(session, committed, record)

    def when_durable(self, session: Session, data: bytes) -> None:
        """Sends ``data``, a QoS 2 flow's PUBCOMP or PUBREL (``Session.when_durable``),
        once what the packet changed in the store is committed, in order with the
        session's held acknowledgements; a failed write disconnects instead, as for a
        PUBACK. ``_REFUSED``: the DISCONNECT of a refused QoS 2 message."""
        acks = self.acks
        if data is not _REFUSED and (
            not session.acks_held
            and not self.store.pending
            and (not acks.participants or acks.idle())
        ):
            session.send_acknowledgement(data)
            return
        session.acks_held += 1

        def committed(ok: bool) -> None:
            session.acks_held -= 1
            if ok and data is not _REFUSED:
                session.send_acknowledgement(data)
            else:
                session.disconnect(ReasonCode.UNSPECIFIED_ERROR, "store write failed")

        acks.after(session, committed)

    def when_committed(self, session: Session, send: Callable[[], None]) -> None:
        """Calls ``send`` (a persistent session's SUBACK or UNSUBACK, ``broker_core.
        subscribe``) once what the packet changed in the store is committed, in order
        with the session's held acknowledgements; a failed write disconnects instead, as
        for a PUBACK."""
        acks = self.acks
        if (
            not session.acks_held
            and not self.store.pending
            and (not acks.participants or acks.idle())
        ):
            send()
            return
        session.acks_held += 1

        def committed(ok: bool) -> None:
            session.acks_held -= 1
            if ok:
                send()
            else:
                session.disconnect(ReasonCode.UNSPECIFIED_ERROR, "store write failed")

        acks.after(session, committed)

    def on_subscribe(self, session: Session, packet: Subscribe, now: float) -> None:
        handle_subscribe(self, session, packet, now)

    def on_unsubscribe(self, session: Session, packet: Unsubscribe, now: float) -> None:
        handle_unsubscribe(self, session, packet, now)

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

    def connection_closed(self, session: Session, now: float) -> None:
        """A client's connection closed: its session goes on offline, or ends."""
        self.sessions.end_connection(session, now)

    def discard_session(self, client_id: str, now: float | None = None) -> bool:
        """Ends a client's session by administrative action (the API's kick): see
        ``SessionRegistry.kick``. False when no session has that client id."""
        return self.sessions.kick(client_id, now)

    # -- start-up, housekeeping ---------------------------------------------------------------

    def restore(self, snapshot: Snapshot, now: float) -> None:
        """Rebuilds retained messages, offline sessions (with their pending wills) and
        delayed messages at start-up.

        A message whose topic is not a valid topic name (``topic_name_problem``: one a
        rule or an adapter made before the hub refused those, over 65535 bytes, say) can
        be sent to nobody, nor can one deeper than ``max_topic_levels``: it is dropped
        with a warning, and deleted from the store. So
        is a retained message whose Message Expiry Interval has passed since it was
        published (the store keeps that time: the downtime counts).
        """
        expired = 0
        max_levels = self.limits.max_topic_levels
        for context in snapshot.retained:
            if _unsendable(context, "retained message", max_levels):
                self.store.retained_cleared(context.topic)
                continue
            remaining = context.expiry_remaining(now)
            if remaining is not None and remaining <= 0:
                self.store.retained_cleared(context.topic)
                expired += 1
                continue
            self.retained.set(context)
        if expired:
            log.info("store: %d retained messages expired while the broker was down", expired)
        delayed = []
        for key, due_at, context in snapshot.delayed:
            if _unsendable(context, "delayed message", max_levels):
                self.store.delayed_removed(key)
                continue
            delayed.append((key, due_at, context))
        self.sessions.restore(snapshot, now)
        self.delayed.restore(delayed, now)

    async def run(self, sweep_interval_s: float = 0.5) -> None:
        """Housekeeping until cancelled: keep alive, connect timeouts, memory given back
        (``listeners.connections``), and on the same sweep, expired retained messages
        removed (at most ``SWEEP_BATCH`` a sweep; reading them removes them too) and,
        while clients are connected, the store told the broker is alive (``Store.alive``)."""
        await self.connections.run(sweep_interval_s, self._sweep)

    def _sweep(self, now: float) -> None:
        self.retained.expire(now, SWEEP_BATCH)
        if self.sessions.online:
            self.store.alive(now)  # sessions connected at a crash: offline from then

    # -- internals ------------------------------------------------------------------------------

    def _retain(self, context: Context, now: float) -> None:
        """A retained message: stored (persisted unless it is the broker's own ``$SYS``),
        replaced or cleared; refused past the retained store's bounds."""
        if not self.retained.set(context):
            self._dropped(context, "retained_limit", now)
        elif context.origin.protocol != "sys":
            if clears(context):
                self.store.retained_cleared(context.topic)
            else:
                self.store.retained_set(context)

    def _retained_expired(self, context: Context) -> None:
        """A retained message expired (``RetainedStore``): gone from the store too."""
        if context.origin.protocol != "sys":  # never stored (``_retain``)
            self.store.retained_cleared(context.topic)

    def _dropped(self, context: Context, reason: str, now: float | None = None) -> None:
        """A message for no session was dropped (already counted): tell the observers."""
        if self.observers.message_dropped:
            self.observers.report_dropped(context, reason, None, None, now)

    def _publish_delayed(self, context: Context) -> None:
        if context.properties.message_expiry_interval == 0:
            # Its lifetime passed while it waited here: no delivery starts at once
            # (MQTT 5.0 3.3.2.3.3). A retained one still replaces the topic's, and
            # expires with it (``retained.clears``).
            now = clock_now()
            if context.retain:
                self._retain(context, now)
            self.counters.dropped_expired += 1
            self._dropped(context, "expired", now)
            return
        self.publish(context)

    def _publish_will(self, context: Context) -> None:
        """A will goes through the publish policy of its client's PUBLISH (``$SYS``
        refused, the ACL, ``$delayed/``); nobody is left to refuse: a retained one over
        the retained store's bounds is delivered, not retained."""
        self.publish_checked(context, context.origin, can_refuse=False)


class Refuser(Protocol):
    """A durable component's stand-in while its store cannot be opened (``refusals``)."""

    def refuses(self, context: Context) -> bool: ...


def _unsendable(context: Context, what: str, max_levels: int) -> bool:
    """True (and a warning logged) when a stored message's topic is no valid topic name,
    or has more levels than ``mqtt.max_topic_levels`` (stored before that bound, or with
    a larger one)."""
    problem = topic_name_problem(context.topic)
    if problem is None and too_deep(context.topic, max_levels):
        problem = f"more than mqtt.max_topic_levels ({max_levels}) levels"
    if problem is None:
        return False
    log.warning(
        "store: %s on %s from %s %r dropped: %s",
        what, abbreviate(context.topic), context.origin.protocol, context.origin.name, problem,
    )  # fmt: skip
    return True
