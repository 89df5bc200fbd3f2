"""Events a ``Session`` reports to its driver; the broker decides what they mean."""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.mqtt.fastinit import frozen_factory
from broker_core.mqtt.packets import Auth, Connect, Publish, Subscribe, Unsubscribe
from broker_core.mqtt.properties import Properties

__all__ = [
    "AuthReceived",
    "ConnectRequested",
    "ConnectionClosing",
    "DisconnectReceived",
    "Event",
    "PublishReceived",
    "SubscribeRequested",
    "UnsubscribeRequested",
]


@dataclass(frozen=True, slots=True)
class ConnectRequested:
    """A valid CONNECT arrived; answer with ``Session.accept``, ``reject`` or ``auth_continue``."""

    connect: Connect


@dataclass(frozen=True, slots=True)
class AuthReceived:
    """An AUTH packet during enhanced authentication or re-authentication."""

    auth: Auth


@dataclass(frozen=True, slots=True)
class PublishReceived:
    """An application message to route; QoS 1/2 wait for ``Session.acknowledge``.

    ``packet`` is the PUBLISH as received; ``topic`` and ``properties`` are the ones to
    route, its Topic Alias resolved and removed. The broker wraps them in its message
    envelope (``broker_core.context``). ``frame`` is the PUBLISH exactly as a subscriber
    of the same protocol family would receive it at QoS 0 without retain, when the
    received bytes can be forwarded unchanged; else None.
    """

    packet: Publish
    topic: str
    properties: Properties
    frame: bytes | None = None

    @property
    def payload(self) -> bytes:
        return self.packet.payload

    @property
    def qos(self) -> int:
        return self.packet.qos

    @property
    def retain(self) -> bool:
        return self.packet.retain

    @property
    def packet_id(self) -> int | None:
        return self.packet.packet_id


@dataclass(frozen=True, slots=True)
class SubscribeRequested:
    """Answer with ``Session.suback``."""

    subscribe: Subscribe


@dataclass(frozen=True, slots=True)
class UnsubscribeRequested:
    """Answer with ``Session.unsuback``."""

    unsubscribe: Unsubscribe


@dataclass(frozen=True, slots=True)
class DisconnectReceived:
    """The client sent DISCONNECT; ``publish_will`` is true only for reason 0x04."""

    reason_code: int
    publish_will: bool


@dataclass(frozen=True, slots=True)
class ConnectionClosing:
    """The session ended the connection (protocol error, keep alive, server action).

    Write what ``data_to_send`` still holds, then close the transport.
    """

    reason_code: int
    message: str


# Every field positionally, fast (one per PUBLISH): see fastinit.
new_publish_received = frozen_factory(PublishReceived)

Event = (
    ConnectRequested
    | AuthReceived
    | PublishReceived
    | SubscribeRequested
    | UnsubscribeRequested
    | DisconnectReceived
    | ConnectionClosing
)
