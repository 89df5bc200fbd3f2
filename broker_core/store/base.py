"""What the broker persists, and the in-memory store that persists nothing.

A ``Store`` receives the broker's changes as they happen (sessions, subscriptions,
QoS 1/2 deliveries through the ``Journal`` methods, incoming QoS 2 packet ids, the
will of a connected client and the pending will of an offline session, retained and
delayed messages) and writes them in
the background. ``barrier(callback)``
calls back once everything handed over before it is durable: the broker sends PUBACK
and PUBREC only then, so an acknowledged message survives a crash.

``MemoryStore`` (``persistence: memory``) is durable in nothing and calls barriers
back at once; ``open()`` finds nothing to restore.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from broker_core.acks import Durable
from broker_core.context import Context, Origin
from broker_core.mqtt.packets import Will
from broker_core.mqtt.session_state import Delivery, SessionState, Subscription

__all__ = ["MemoryStore", "RestoredSession", "RestoredWill", "Snapshot", "Store"]


@dataclass(slots=True)
class RestoredWill:
    """A will that was pending (its delay running) when the store was last written."""

    due_at: float  # wall-clock time: when its delay runs out, or its session expires
    will: Will
    origin: Origin  # the client that left it: the publish policy judges this publisher


@dataclass(slots=True)
class RestoredSession:
    client_id: str
    expiry_interval: int
    offline_since: float | None
    subscriptions: list[Subscription] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)  # in order; packet_id 0: queued
    incoming_qos2: set[int] = field(default_factory=set)
    will: RestoredWill | None = None


@dataclass(slots=True)
class Snapshot:
    """Everything a store holds, read once at start-up."""

    retained: list[Context] = field(default_factory=list)
    sessions: list[RestoredSession] = field(default_factory=list)
    delayed: list[tuple[int, float, Context]] = field(default_factory=list)  # key, due, message
    #: (client id, will): the wills of clients connected when the process died whose
    #: session ended with the connection (none kept, expiry 0): due at once
    wills: list[tuple[str, RestoredWill]] = field(default_factory=list)


class Store(Protocol):
    durable: bool

    def open(self) -> Snapshot: ...

    def close(self) -> None: ...

    @property
    def pending(self) -> int:
        """Writes handed over and not yet committed."""
        ...

    def backlogged(self) -> bool: ...

    def on_drained(self, callback: Callable[[], None]) -> None: ...

    def barrier(self, callback: Callable[[bool], None]) -> None: ...

    # Journal (see broker_core.mqtt.session_state.Journal)
    def queued(self, state: SessionState, delivery: Delivery) -> None: ...

    def sent(self, state: SessionState, delivery: Delivery) -> None: ...

    def released(self, state: SessionState, delivery: Delivery) -> None: ...

    def completed(self, state: SessionState, delivery: Delivery) -> None: ...

    def incoming_added(self, state: SessionState, packet_id: int) -> None: ...

    # ``incoming_added`` in the commit of the current loop turn's other writes, that commit
    # after every one of ``participants`` has committed what it holds now (left out if one
    # failed; ``store.held``): the QoS 2 packet id of a message the durable taps took.
    # Returns what its PUBREC waits on besides the store (False: left out).
    def incoming_added_after(
        self, state: SessionState, packet_id: int, participants: Sequence[Durable]
    ) -> Durable: ...

    def incoming_removed(self, state: SessionState, packet_id: int) -> None: ...

    # Sessions and subscriptions
    def session_saved(self, state: SessionState) -> None: ...

    def session_offline(self, state: SessionState, now: float) -> None: ...

    def alive(self, now: float) -> None:
        """The broker runs, with clients connected, at ``now`` (its housekeeping says so
        every sweep): a durable store keeps it, at most a few seconds stale, so that a
        session still connected when the process dies counts as offline from then."""

    def session_deleted(self, state: SessionState) -> None: ...

    def subscription_saved(self, state: SessionState, subscription: Subscription) -> None: ...

    def subscription_deleted(self, state: SessionState, topic_filter: str) -> None: ...

    # The will of a connected client: written at its CONNECT, released when the
    # connection ends (then published, dropped, or kept as the pending will below). After
    # a kill, it comes back as a pending will due ``delay_s`` after the broker last ran.
    def will_held(self, client_id: str, will: Will, origin: Origin, delay_s: float) -> None: ...

    def will_released(self, client_id: str) -> None: ...

    # The pending will of an offline session (deleted with the session too); deleting it
    # deletes a will held for the client and restored as pending too
    def will_saved(self, client_id: str, due_at: float, will: Will, origin: Origin) -> None: ...

    def will_deleted(self, client_id: str) -> None: ...

    # Retained and delayed messages
    def retained_set(self, context: Context) -> None: ...

    def retained_cleared(self, topic: str) -> None: ...

    def delayed_added(self, key: int, due_at: float, context: Context) -> None: ...

    def delayed_removed(self, key: int) -> None: ...


class _Recorded:
    """Nothing to wait for (``MemoryStore.incoming_added_after``)."""

    pending = 0

    def barrier(self, callback: Callable[[bool], None]) -> None:
        callback(True)


_RECORDED = _Recorded()


class MemoryStore:
    """``persistence: memory``: nothing is written, nothing survives a restart."""

    durable = False
    pending = 0

    def open(self) -> Snapshot:
        return Snapshot()

    def close(self) -> None:
        pass

    def backlogged(self) -> bool:
        return False

    def on_drained(self, callback: Callable[[], None]) -> None:
        callback()

    def barrier(self, callback: Callable[[bool], None]) -> None:
        callback(True)

    def queued(self, state: SessionState, delivery: Delivery) -> None:
        pass

    def sent(self, state: SessionState, delivery: Delivery) -> None:
        pass

    def released(self, state: SessionState, delivery: Delivery) -> None:
        pass

    def completed(self, state: SessionState, delivery: Delivery) -> None:
        pass

    def incoming_added(self, state: SessionState, packet_id: int) -> None:
        pass

    def incoming_added_after(
        self, state: SessionState, packet_id: int, participants: Sequence[Durable]
    ) -> Durable:
        return _RECORDED

    def incoming_removed(self, state: SessionState, packet_id: int) -> None:
        pass

    def session_saved(self, state: SessionState) -> None:
        pass

    def session_offline(self, state: SessionState, now: float) -> None:
        pass

    def alive(self, now: float) -> None:
        pass

    def session_deleted(self, state: SessionState) -> None:
        pass

    def subscription_saved(self, state: SessionState, subscription: Subscription) -> None:
        pass

    def subscription_deleted(self, state: SessionState, topic_filter: str) -> None:
        pass

    def will_held(self, client_id: str, will: Will, origin: Origin, delay_s: float) -> None:
        pass

    def will_released(self, client_id: str) -> None:
        pass

    def will_saved(self, client_id: str, due_at: float, will: Will, origin: Origin) -> None:
        pass

    def will_deleted(self, client_id: str) -> None:
        pass

    def retained_set(self, context: Context) -> None:
        pass

    def retained_cleared(self, topic: str) -> None:
        pass

    def delayed_added(self, key: int, due_at: float, context: Context) -> None:
        pass

    def delayed_removed(self, key: int) -> None:
        pass
