"""Broker events and their observers: what the rule engine, webhooks and ``$SYS`` watch.

One mechanism for lifecycle and message events. Each event is a small frozen dataclass
named after EMQX's hook (``NAME``, e.g. ``client.connected``) with the fields its
webhook sends, spelled the Python way (``client_id`` for ``clientid``, ``peer`` for
``ipaddress`` / ``peername``, ``protocol_level`` for ``proto_ver``, ``at`` for the
timestamp, wall-clock seconds). Message events carry the ``Context`` as ``message``
and read ``topic``, ``qos``, ``retain``, ``payload``, ``from_client_id``,
``from_username`` from it.

    undo = broker.observers.observe(ClientConnected, callback)  # or a tuple of kinds
    ...
    undo()  # stop observing

``callback(event)`` runs on the broker's event loop, synchronously, where the event
happens (a ``MessagePublish`` before the message is routed, a ``ClientConnected`` right
after the CONNACK is queued): it must not block; hand work to a bounded queue. An
exception is counted (``errors``, ``edgebus_observer_errors_total``) and logged, and
the broker goes on. An observer may publish (``$SYS`` events do).

Nobody observing costs nothing but a test: ``Observers`` keeps one tuple of callbacks
per kind, under the attribute named after it (``observers.message_delivered``), and
every place an event happens tests that tuple before it builds the event. Sessions test
their kinds through the ``MessageObserver`` protocol (``mqtt.observer``) that
``Observers`` implements.

Message hooks: the cheap path for an observer of every message (the stream log). A
hook is a plain callable called with the ``Context`` itself, no event object built,
possibly a C function such as ``list.append`` (no Python frame per message):

    undo = broker.observers.hook_messages(items.append)

``Broker.publish`` tests the tuple ``observers.message_hooks`` and calls the hooks in
its own loop (no frame of ours in between) where it emits ``message.publish``, just
before it: for every message routed, in publish order, from every publisher, ``$SYS``
included. A hook sees the message before any ``message.publish`` observer runs, so
before whatever such an observer publishes in turn. A hook that raises is counted and
logged like an observer (``failed``).

==========================  ==========================================================
event (``NAME``)            when
==========================  ==========================================================
``client.connect``          a CONNECT arrived, before the broker decides
``client.connack``          the broker answered a CONNECT (``reason_code`` 0: accepted;
                            refusals by the listener's bounds, the client id rules, the
                            authenticator, the will)
``client.connected``        the client is connected (after ``client.connack`` 0)
``client.disconnected``     a connected client's connection ended (``reason_code``)
``client.subscribe``        a SUBSCRIBE asked for a filter, before the checks
``client.unsubscribe``      an UNSUBSCRIBE named a filter
``session.subscribed``      a session subscribed (QoS as granted)
``session.unsubscribed``    a session's subscription was removed by UNSUBSCRIBE
``session.terminated``      a session ended: ``disconnected`` (expiry 0), ``expired``,
                            ``discarded`` (clean start), ``kicked`` (the API)
``message.publish``         a message is about to be routed (after the publish policy;
                            every publisher: MQTT, components, the API, wills, ``$SYS``)
``message.delivered``       a PUBLISH went out to a client (not its resends)
``message.acked``           a client acknowledged a QoS 1 (PUBACK) / 2 (PUBCOMP) message
``message.dropped``         a message was dropped; ``reason`` is one of the reasons of
                            ``edgebus_messages_dropped_total``, or ``no_subscribers``
                            (nobody subscribed: not counted as a drop in the metrics)
==========================  ==========================================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from broker_core.clock import now as clock_now
from broker_core.clock import to_wall_ns
from broker_core.context import Context
from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.reason_codes import ReasonCode

if TYPE_CHECKING:
    from broker_core.mqtt.session import Session

__all__ = [
    "EVENT_KINDS",
    "BrokerEvent",
    "ClientConnack",
    "ClientConnect",
    "ClientConnected",
    "ClientDisconnected",
    "ClientSubscribe",
    "ClientUnsubscribe",
    "MessageAcked",
    "MessageDelivered",
    "MessageDropped",
    "MessagePublish",
    "Observers",
    "SessionSubscribed",
    "SessionTerminated",
    "SessionUnsubscribed",
    "new_client_connected",
    "new_client_disconnected",
]

log = logging.getLogger(__name__)


# -- lifecycle events ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ConnectFields:
    """What a CONNECT asked for (``client.connect``, ``client.connack``)."""

    client_id: str  # as sent: "" when the client asks for one to be assigned
    username: str | None
    peer: str | None  # "host:port"
    protocol_level: int  # 3 (MQTT 3.1), 4 (3.1.1), 5
    keep_alive: int  # as asked for
    clean_start: bool
    expiry_interval: int  # Session Expiry Interval asked for (MQTT 5; else 0)
    listener: str


@dataclass(frozen=True, slots=True)
class ClientConnect(_ConnectFields):
    """A CONNECT arrived; the broker has not decided yet."""

    NAME: ClassVar[str] = "client.connect"
    at: float


@dataclass(frozen=True, slots=True)
class ClientConnack(_ConnectFields):
    """The broker answered a CONNECT: ``reason_code`` 0 accepted, else refused."""

    NAME: ClassVar[str] = "client.connack"
    reason_code: int  # MQTT 5 reason code (3.1.1 clients get the matching return code)
    at: float


@dataclass(frozen=True, slots=True)
class ClientConnected:
    """The client is connected (its CONNACK 0 is queued)."""

    NAME: ClassVar[str] = "client.connected"
    client_id: str  # as assigned, when the client sent none
    username: str | None
    peer: str | None
    protocol_level: int
    keep_alive: int  # as granted
    clean_start: bool
    expiry_interval: int  # as granted
    session_present: bool
    listener: str
    at: float


@dataclass(frozen=True, slots=True)
class ClientDisconnected:
    """A connected client's connection ended."""

    NAME: ClassVar[str] = "client.disconnected"
    client_id: str
    username: str | None
    peer: str | None
    protocol_level: int
    reason_code: int  # the DISCONNECT's, or why the broker closed it
    at: float

    @property
    def reason(self) -> str:
        """The reason code's name, e.g. ``normal_disconnection``, ``session_taken_over``."""
        try:
            return ReasonCode(self.reason_code).name.lower()
        except ValueError:
            return f"0x{self.reason_code:02x}"


@dataclass(frozen=True, slots=True)
class _SubscriptionFields:
    client_id: str
    username: str | None
    peer: str | None
    topic_filter: str
    qos: int
    no_local: bool
    retain_as_published: bool
    retain_handling: int
    subscription_id: int | None
    at: float


@dataclass(frozen=True, slots=True)
class ClientSubscribe(_SubscriptionFields):
    """A SUBSCRIBE asked for ``topic_filter`` at ``qos``; the ACL and the bounds come after."""

    NAME: ClassVar[str] = "client.subscribe"


@dataclass(frozen=True, slots=True)
class SessionSubscribed(_SubscriptionFields):
    """A session subscribed to ``topic_filter``, with the QoS granted."""

    NAME: ClassVar[str] = "session.subscribed"


@dataclass(frozen=True, slots=True)
class _UnsubscriptionFields:
    client_id: str
    username: str | None
    peer: str | None
    topic_filter: str
    at: float


@dataclass(frozen=True, slots=True)
class ClientUnsubscribe(_UnsubscriptionFields):
    """An UNSUBSCRIBE named ``topic_filter``."""

    NAME: ClassVar[str] = "client.unsubscribe"


@dataclass(frozen=True, slots=True)
class SessionUnsubscribed(_UnsubscriptionFields):
    """A session's subscription to ``topic_filter`` was removed by UNSUBSCRIBE."""

    NAME: ClassVar[str] = "session.unsubscribed"


@dataclass(frozen=True, slots=True)
class SessionTerminated:
    """A session ended, with its subscriptions and queue."""

    NAME: ClassVar[str] = "session.terminated"
    client_id: str
    username: str | None  # of its last connection, when it had one
    reason: str  # disconnected, expired, discarded, kicked
    at: float


# -- message events -----------------------------------------------------------------------


class _MessageFields:
    """The message's fields, read from its Context (``message``)."""

    __slots__ = ()
    message: Context

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def payload(self) -> bytes:
        return self.message.payload

    @property
    def message_id(self) -> int:
        return self.message.id

    @property
    def from_client_id(self) -> str:
        """The publisher: an MQTT client id, or a component, rule or API caller's name."""
        return self.message.origin.name

    @property
    def from_username(self) -> str | None:
        return self.message.origin.username

    @property
    def from_protocol(self) -> str:
        return self.message.origin.protocol

    @property
    def publish_received_at(self) -> float:
        """When the message entered the broker, wall-clock seconds (its ``received_at``,
        on the broker's clock, converted: ``broker_core.clock.to_wall_ns``)."""
        return to_wall_ns(self.message.received_at) / 1e9


@dataclass(frozen=True, slots=True)
class MessagePublish(_MessageFields):
    """A message is about to be routed (the publish policy accepted it)."""

    NAME: ClassVar[str] = "message.publish"
    message: Context
    at: float

    @property
    def qos(self) -> int:
        return self.message.qos

    @property
    def retain(self) -> bool:
        return self.message.retain

    @property
    def peer(self) -> str | None:
        """The publisher's address, when it has one."""
        return self.message.origin.peer


@dataclass(frozen=True, slots=True)
class MessageDelivered(_MessageFields):
    """A PUBLISH of ``message`` went out to ``client_id`` (QoS and retain as sent)."""

    NAME: ClassVar[str] = "message.delivered"
    client_id: str
    username: str | None
    peer: str | None
    qos: int
    retain: bool
    message: Context
    at: float


@dataclass(frozen=True, slots=True)
class MessageAcked(_MessageFields):
    """``client_id`` acknowledged ``message``: PUBACK (QoS 1) or PUBCOMP (QoS 2)."""

    NAME: ClassVar[str] = "message.acked"
    client_id: str
    username: str | None
    peer: str | None
    qos: int
    packet_id: int
    message: Context
    at: float


@dataclass(frozen=True, slots=True)
class MessageDropped(_MessageFields):
    """``message`` was dropped for ``reason``; ``client_id`` is the session it was for
    (None: for no session, e.g. ``no_subscribers``, ``retained_limit``)."""

    NAME: ClassVar[str] = "message.dropped"
    reason: str
    client_id: str | None
    username: str | None
    message: Context
    at: float

    @property
    def qos(self) -> int:
        return self.message.qos

    @property
    def retain(self) -> bool:
        return self.message.retain


BrokerEvent = (
    ClientConnect
    | ClientConnack
    | ClientConnected
    | ClientDisconnected
    | ClientSubscribe
    | ClientUnsubscribe
    | SessionSubscribed
    | SessionUnsubscribed
    | SessionTerminated
    | MessagePublish
    | MessageDelivered
    | MessageAcked
    | MessageDropped
)

#: Every kind of event, in the order of the table above.
EVENT_KINDS: tuple[type[BrokerEvent], ...] = (
    ClientConnect,
    ClientConnack,
    ClientConnected,
    ClientDisconnected,
    ClientSubscribe,
    ClientUnsubscribe,
    SessionSubscribed,
    SessionUnsubscribed,
    SessionTerminated,
    MessagePublish,
    MessageDelivered,
    MessageAcked,
    MessageDropped,
)

Callback = Callable[[Any], None]


def _attribute(kind: type[BrokerEvent]) -> str:
    return kind.NAME.replace(".", "_")


# Every field positionally, fast (two per connection: see fastinit).
new_client_connected = frozen_factory(ClientConnected)
new_client_disconnected = frozen_factory(ClientDisconnected)

_ATTRIBUTES: dict[type[BrokerEvent], str] = {kind: _attribute(kind) for kind in EVENT_KINDS}


class Observers:
    """The observers of every kind of broker event; see the module docstring."""

    # One tuple of callbacks per kind, e.g. ``client_connected``; empty: nobody observes.
    client_connect: tuple[Callback, ...]
    client_connack: tuple[Callback, ...]
    client_connected: tuple[Callback, ...]
    client_disconnected: tuple[Callback, ...]
    client_subscribe: tuple[Callback, ...]
    client_unsubscribe: tuple[Callback, ...]
    session_subscribed: tuple[Callback, ...]
    session_unsubscribed: tuple[Callback, ...]
    session_terminated: tuple[Callback, ...]
    message_publish: tuple[Callback, ...]
    message_delivered: tuple[Callback, ...]
    message_acked: tuple[Callback, ...]
    message_dropped: tuple[Callback, ...]

    # Called with the Context of every message routed, before ``message_publish``.
    message_hooks: tuple[Callable[[Context], object], ...]

    def __init__(self) -> None:
        for kind in EVENT_KINDS:
            setattr(self, _attribute(kind), ())
        self.message_hooks = ()
        self.errors = 0  # observer callbacks and message hooks that raised

    def hook_messages(self, hook: Callable[[Context], object]) -> Callable[[], None]:
        """Calls ``hook(context)`` for every message routed from now on (see the module
        docstring); returns a function that stops it."""
        self.message_hooks = (*self.message_hooks, hook)

        def undo() -> None:
            hooks = list(self.message_hooks)
            for index, present in enumerate(hooks):
                if present is hook:  # identity: bound methods of equal lists compare equal
                    del hooks[index]
                    break
            self.message_hooks = tuple(hooks)

        return undo

    def observe(
        self, kinds: type[BrokerEvent] | Iterable[type[BrokerEvent]], callback: Callback
    ) -> Callable[[], None]:
        """Calls ``callback(event)`` for every event of ``kinds`` from now on; returns a
        function that stops it."""
        chosen = (kinds,) if isinstance(kinds, type) else tuple(kinds)
        for kind in chosen:
            if kind not in EVENT_KINDS:
                raise ValueError(f"not a broker event: {kind!r}")
            name = _attribute(kind)
            setattr(self, name, (*getattr(self, name), callback))

        def undo() -> None:
            for kind in chosen:
                name = _attribute(kind)
                callbacks = list(getattr(self, name))
                if callback in callbacks:
                    callbacks.remove(callback)
                setattr(self, name, tuple(callbacks))

        return undo

    def observed(self, kind: type[BrokerEvent]) -> bool:
        """Someone observes ``kind`` (places that are not hot may ask this way)."""
        return bool(getattr(self, _attribute(kind)))

    def emit(self, event: BrokerEvent) -> None:
        """Calls the observers of ``event``'s kind; test the kind's tuple first."""
        for callback in getattr(self, _ATTRIBUTES[type(event)]):
            try:
                callback(event)
            except Exception:
                self.failed(callback, event.NAME)

    def failed(self, callback: Callable[..., object], what: str) -> None:
        """Counts and logs (the first failure, then every 1000th) a callback that raised;
        call from its ``except`` block."""
        self.errors += 1
        if self.errors == 1 or self.errors % 1000 == 0:
            log.exception(
                "observer %r of %s failed (%d failures so far)", callback, what, self.errors
            )

    # -- mqtt.observer.MessageObserver: what sessions report ------------------------------

    def report_delivered(
        self, client: Session, context: Context, qos: int, retain: bool, now: float
    ) -> None:
        origin = client.origin
        self.emit(
            MessageDelivered(origin.name, origin.username, client.peer, qos, retain, context, now)
        )

    def report_acked(
        self, client: Session, context: Context, qos: int, packet_id: int, now: float
    ) -> None:
        origin = client.origin
        self.emit(
            MessageAcked(origin.name, origin.username, client.peer, qos, packet_id, context, now)
        )

    def report_dropped(
        self,
        context: Context,
        reason: str,
        client_id: str | None,
        username: str | None,
        now: float | None,
    ) -> None:
        at = clock_now() if now is None else now
        self.emit(MessageDropped(reason, client_id, username, context, at))
