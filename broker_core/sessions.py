"""Sessions: one ``SessionState`` per client id, and what happens to it over time.

A session outlives its connection for its Session Expiry Interval (MQTT 5.0 3.1.2.11;
3.1.1 persistent sessions never expire on their own, here they are capped by
``max_session_expiry``). ``SessionRegistry`` owns that life:

- ``create`` (a CONNECT with no session to resume, or the store's at start-up:
  ``restore``), ``persist`` (a session with an expiry interval is written to a durable
  store);
- ``went_online`` / ``end_connection``: a connection attaches (the CONNECT policy,
  ``broker_core.connect``, which writes its will to the store: ``Store.will_held``) and
  detaches; detaching releases the stored will and schedules it (``will``; a persisted
  session's pending will is persisted too), then the session ends (expiry 0) or its
  expiry timer starts;
- ``discard``: the session ends with its subscriptions and queue (expiry, clean start,
  an administrative kick: ``kick``), a ``SessionTerminated`` event. What it owed at
  QoS 1 through a shared subscription goes to another member of the group (MQTT 5.0
  4.8.2: SHOULD); a QoS 2 message already sent does not [MQTT-4.8.2-5].

Connected clients are counted here (``online``, and the most at once, ``online_max``).
Sessions kept for offline clients are at most ``limits.max_offline_sessions``: past it,
the one offline the longest ends as if it had expired (``offline_limit``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker_core.clock import now as clock_now
from broker_core.lograte import RateLimitedLog
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.mqtt.session_state import NEVER_EXPIRES, Counters, Delivery, SessionState
from broker_core.mqtt.topics import (
    SHARE_PREFIX,
    abbreviate,
    filter_matches,
    parse_shared,
    topic_name_problem,
)
from broker_core.observe import Observers, SessionTerminated, new_client_disconnected
from broker_core.router import Entry

if TYPE_CHECKING:
    from broker_core.mqtt.session import Session
    from broker_core.router import Router
    from broker_core.store.base import Snapshot, Store
    from broker_core.will import WillScheduler

__all__ = ["SessionRegistry"]

log = logging.getLogger(__name__)


class SessionRegistry:
    def __init__(
        self,
        limits: ServerLimits,
        counters: Counters,
        observers: Observers,
        router: Router,
        store: Store,
        wills: WillScheduler,
    ) -> None:
        self.limits = limits
        self.counters = counters
        self.observers = observers
        self.router = router
        self.store = store
        self.wills = wills
        self.online = 0  # sessions with a connection attached: connected clients
        self.online_max = 0  # the most at once since start
        self._sessions: dict[str, SessionState] = {}
        self._expiry: dict[str, asyncio.TimerHandle] = {}
        # Sessions with no connection, the longest offline first (insertion order).
        self._offline: dict[str, SessionState] = {}
        self._offline_log = RateLimitedLog(log)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[SessionState]:
        return iter(list(self._sessions.values()))

    def get(self, client_id: str) -> SessionState | None:
        return self._sessions.get(client_id)

    def online_count(self) -> int:
        return self.online

    def offline_count(self) -> int:
        """Sessions kept for clients that are not connected."""
        return len(self._offline)

    def assign_client_id(self) -> str:
        """A fresh client id for a client that sent none (MQTT 5.0 3.1.3.1)."""
        while True:
            client_id = f"edgebus-{os.urandom(8).hex()}"
            if client_id not in self._sessions:
                return client_id

    # -- the life of a session ----------------------------------------------------------------

    def create(self, client_id: str) -> SessionState:
        state = SessionState(client_id, self.limits, self.counters, self.observers)
        self._sessions[client_id] = state
        return state

    def persist(self, state: SessionState) -> None:
        """A session with an expiry interval is written to a durable store; else forgotten."""
        store = self.store
        if state.expiry_interval and store.durable:
            state.journal = store
            store.session_saved(state)
        elif state.journal is not None:
            store.session_deleted(state)
            state.journal = None

    def went_online(self, state: SessionState) -> None:
        """A connection was attached to ``state`` (``Session.accept``)."""
        self.cancel_expiry(state)
        self._offline.pop(state.client_id, None)
        self.online += 1
        if self.online > self.online_max:
            self.online_max = self.online

    def end_connection(self, session: Session, now: float, taken_over: bool = False) -> None:
        """Detaches a closed connection from its session: will, then expiry."""
        state = session.state
        if state is None or state.connection is not session:
            return
        state.connection = None
        self.online -= 1
        origin = session.origin
        will = session.will
        session.will = None
        held = session.will_size
        if held:
            # The will counted in max_will_bytes_total since its CONNECT (even when a
            # DISCONNECT discarded it): given back before a will due goes to schedule.
            # Held in the store since then too (``broker_core.connect``): released, and
            # stored again below as a pending will if it has one.
            self.wills.bytes -= held
            session.will_size = 0
            self.store.will_released(state.client_id)
        if will is not None:
            # Published after the will delay or when the session ends, whichever is
            # first; a takeover within the delay cancels it (broker_core.connect). A
            # persisted session keeps its pending will across a restart; on a takeover
            # the will is cancelled or published at once, so it is not written.
            delay = min(will.properties.will_delay_interval or 0, state.expiry_interval)
            persist = state.journal is not None and not taken_over
            self.wills.schedule(state.client_id, will, origin, delay, now, persist)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "client %s disconnected (reason 0x%02X)",
                state.client_id,
                session.close_reason or 0,
                extra={"client_id": state.client_id},
            )
        observers = self.observers
        if observers.client_disconnected:
            observers.emit(
                new_client_disconnected(
                    origin.name,
                    origin.username,
                    session.peer,
                    session.protocol_level,
                    session.close_reason or 0,
                    now,
                )
            )
        if taken_over:
            return
        if state.expiry_interval == 0:
            self.discard(state, "disconnected", origin.username)
        else:
            if state.journal is not None:
                self.store.session_offline(state, now)
            self.schedule_expiry(state)
            self._went_offline(state)

    def left_unconnected(self, state: SessionState, present: bool, now: float) -> None:
        """A CONNECT for ``state`` was accepted but its client could not be told
        (``broker_core.connect``: no CONNACK fits it): a session made for it ends; one it
        resumed stays offline, its expiry running from ``now``."""
        if not present or state.expiry_interval == 0:
            self.discard(state, "discarded")
            return
        if state.journal is not None:
            self.store.session_offline(state, now)
        self.schedule_expiry(state)
        self._went_offline(state)

    def kick(self, client_id: str, now: float | None = None) -> bool:
        """Ends a client's session by administrative action (the API).

        A connected client gets DISCONNECT 0x98 (MQTT 5) and its will is published; the
        session, persistent or not, is then gone with its subscriptions and queue.
        False when no session has that client id.
        """
        state = self.get(client_id)
        if state is None:
            return False
        now = clock_now() if now is None else now
        session = state.connection
        username = None if session is None else session.origin.username
        if session is not None:
            session.disconnect(ReasonCode.ADMINISTRATIVE_ACTION)
            self.end_connection(session, now, taken_over=True)
        self.wills.fire_now(client_id)
        if self.get(client_id) is state:
            self.discard(state, "kicked", username)
        return True

    def discard(self, state: SessionState, reason: str, username: str | None = None) -> None:
        """The session ends: its subscriptions leave the router, its queue is dropped.

        Messages it owed through a shared subscription go to the group's other members.
        """
        owed = _owed_to_groups(state)
        if state.journal is not None:
            self.store.session_deleted(state)
            state.journal = None
        for topic_filter in state.subscriptions:
            self.router.unsubscribe(state, topic_filter)
            state.remove_subscription(topic_filter)
        state.unqueue_all()
        state.clear_in_flight()
        self.cancel_expiry(state)
        if self._sessions.get(state.client_id) is state:
            del self._sessions[state.client_id]
        if self._offline.get(state.client_id) is state:
            del self._offline[state.client_id]
        if owed:
            self._redistribute(owed)
        observers = self.observers
        if observers.session_terminated:
            observers.emit(SessionTerminated(state.client_id, username, reason, clock_now()))

    def _redistribute(self, owed: list[tuple[str, Delivery]]) -> None:
        """Each message to the next member of its shared group, if the group has one."""
        now = clock_now()
        for topic_filter, delivery in owed:
            group = self.router.shared_group(topic_filter)
            member = None if group is None else group.pick()
            if member is None:
                continue
            context = delivery.context
            member.subscriber.deliver(
                context,
                member.qos if member.qos < context.qos else context.qos,
                context.retain and member.retain_as_published,
                member.subscription_ids,
                {},
                now,
            )
            self.counters.shared_redelivered += 1

    def restore(self, snapshot: Snapshot, now: float) -> None:
        """Rebuilds the offline sessions of the store at start-up; their expiry resumes,
        and so does a pending will's delay (one due while the gateway was down goes out
        at once). A will held for a client connected at a kill is such a pending will
        (``Store.will_held``); one whose session ended with its connection goes out at
        once (``Snapshot.wills``).

        Beyond ``max_offline_sessions``, those offline the longest end at once.
        """
        for restored in sorted(snapshot.sessions, key=lambda r: r.offline_since or now):
            state = self.create(restored.client_id)
            state.expiry_interval = restored.expiry_interval
            state.journal = self.store
            for restored_subscription in restored.subscriptions:
                entry = Entry(
                    state,
                    restored_subscription.topic_filter,
                    restored_subscription.options,
                    restored_subscription.subscription_id,
                )
                self.router.add(entry)
                state.add_subscription(entry)
            for delivery in restored.deliveries:
                problem = topic_name_problem(delivery.context.topic)
                if problem is not None:  # stored before the hub refused such topics
                    log.warning(
                        "store: message on %s queued for %r dropped: %s",
                        abbreviate(delivery.context.topic), state.client_id, problem,
                    )  # fmt: skip
                    state.discard(delivery)
                    continue
                if delivery.packet_id:
                    state.hold_in_flight(delivery)
                else:
                    if state.queue is None:
                        state.queue = deque()
                    state.queue.append(delivery)
                    state.queued_bytes += delivery.size
                    self.counters.queued_bytes += delivery.size
            if state.outgoing:
                state.next_packet_id = max(state.outgoing) % 0xFFFF + 1
            state.incoming_qos2 = set(restored.incoming_qos2) or None
            if restored.will is not None:
                # Before the expiry and the offline bound, which may end it at once.
                self.wills.restore(state.client_id, restored.will, now)
            offline_for = now - (restored.offline_since or now)
            remaining = max(restored.expiry_interval - offline_for, 0)
            self.schedule_expiry(state, remaining)
            self._went_offline(state)
        for client_id, will in snapshot.wills:
            # Clients connected at a kill whose session ended with the connection.
            self.wills.restore(client_id, will, now)

    # -- expiry ---------------------------------------------------------------------------------

    def _went_offline(self, state: SessionState) -> None:
        """``state`` is kept for an offline client; the bound ends the longest offline."""
        offline = self._offline
        offline[state.client_id] = state
        while len(offline) > self.limits.max_offline_sessions:
            oldest = next(iter(offline.values()))
            self.counters.hit("offline_sessions")
            self._offline_log.warning(
                time.monotonic(),
                "session %s ended: more than %d offline sessions (mqtt.max_offline_sessions)",
                oldest.client_id,
                self.limits.max_offline_sessions,
            )
            self.wills.fire_now(oldest.client_id)
            self.discard(oldest, "offline_limit")

    def schedule_expiry(self, state: SessionState, delay_s: float | None = None) -> None:
        """Starts the expiry timer of a session whose client went offline."""
        self.cancel_expiry(state)
        if state.expiry_interval == NEVER_EXPIRES:
            return
        loop = asyncio.get_running_loop()
        delay = state.expiry_interval if delay_s is None else delay_s
        self._expiry[state.client_id] = loop.call_later(delay, self._expire, state)

    def cancel_expiry(self, state: SessionState) -> None:
        handle = self._expiry.pop(state.client_id, None)
        if handle is not None:
            handle.cancel()

    def _expire(self, state: SessionState) -> None:
        if state.connection is None:
            self.wills.fire_now(state.client_id)
            self.discard(state, "expired")


def _owed_to_groups(state: SessionState) -> list[tuple[str, Delivery]]:
    """(shared filter, delivery) for what ``state`` owes through a shared subscription.

    QoS 1 messages, queued or in flight, and QoS 2 messages not yet sent. A message whose
    topic one of the session's ordinary filters matches as well stays with the session
    (which of its copies came through the group cannot be told).
    """
    subscriptions = state.subscriptions
    shared: list[tuple[str, str]] = []
    for topic_filter in subscriptions:
        if topic_filter.startswith(SHARE_PREFIX):
            parsed = parse_shared(topic_filter)
            if parsed is not None:
                shared.append((topic_filter, parsed.topic_filter))
    if not shared:
        return []
    ordinary = [f for f in subscriptions if not f.startswith(SHARE_PREFIX)]
    owed: list[tuple[str, Delivery]] = []
    for delivery in (*state.outgoing.values(), *(state.queue or ())):
        if not delivery.qos or delivery.released or (delivery.qos == 2 and delivery.packet_id):
            continue
        topic = delivery.context.topic
        for topic_filter, inner in shared:
            if filter_matches(inner, topic):
                if not any(filter_matches(f, topic) for f in ordinary):
                    owed.append((topic_filter, delivery))
                break
    return owed
