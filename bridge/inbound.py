"""The inbound half of a bridge: remote messages republished locally, acknowledged late.

A message from a remote subscription is published locally with the bridge's origin
(``bridge:<name>``), so the bridge's own tap never sees it: what a bridge brought in
is never forwarded back out on the same bridge.

Acknowledgements wait for the message to be safe locally (``hub.publish(ctx,
on_safe=...)``: in every durable store that takes it), so a crash in between makes the
remote send it again rather than lose it:

- QoS 1: PUBACK once safe, on the connection it came on (if that one is gone, the
  remote sends it again on the next).
- QoS 2: PUBREC once safe; the Packet Identifier is held until PUBREL, so a resent
  PUBLISH (DUP) is answered again and not published twice (while the gateway runs);
  PUBCOMP answers PUBREL.
- A refusal (the ACL, ``$SYS``): MQTT 5 acknowledges with its reason code; MQTT 3.1.1
  acknowledges it anyway (the message is dropped and counted in ``refused``). A store
  that failed (0x80) is not acknowledged: the link is closed and the remote sends the
  message again.
"""

from __future__ import annotations

import logging
from typing import Protocol

from bridge.mapping import Inbound, MappingError, forwarded_properties
from broker_core.errors import ProtocolViolation
from broker_core.mqtt.packets import Puback, Pubcomp, Publish, Pubrec
from broker_core.mqtt.reason_codes import ReasonCode
from gateway.config.models.bridges import BridgeConfig
from gateway.hub import HubClient

__all__ = ["Receiver"]

log = logging.getLogger(__name__)

_PENDING, _RECEIVED = 0, 1


class Wire(Protocol):
    level: int

    @property
    def alive(self) -> bool: ...

    def send(self, packet: Puback | Pubrec | Pubcomp) -> None: ...

    def close(self, reason: str, code: int = ...) -> None: ...


class Receiver:
    def __init__(self, config: BridgeConfig, hub: HubClient) -> None:
        self.name = config.name
        self.inbound = Inbound(config)
        self.hub = hub
        self.wire: Wire | None = None
        self.max_aliases = config.connect_properties.topic_alias_maximum
        self.aliases: dict[int, str] = {}
        self.held: dict[int, int] = {}  # QoS 2 Packet Identifier -> _PENDING / _RECEIVED
        self.received = 0
        self.refused = 0
        self.unmatched = 0

    def attach(self, wire: Wire, session_present: bool) -> None:
        self.wire = wire
        self.aliases = {}
        if not session_present:
            self.held.clear()  # the remote forgot its side of QoS 2

    def detach(self) -> None:
        self.wire = None

    def publish(self, packet: Publish) -> None:
        wire = self.wire
        if wire is None:  # the link delivers only once attached (``Link.start``)
            log.warning(
                "bridge %s: a PUBLISH from the remote with no link attached is dropped"
                " (QoS 1/2: unacknowledged, the remote sends it again)",
                self.name,
            )
            return
        topic = self._topic(packet)
        mid = packet.packet_id or 0
        qos = packet.qos
        if qos == 2:
            state = self.held.get(mid)
            if state is not None:
                if state == _RECEIVED:
                    wire.send(Pubrec(mid))
                return  # a resend of what is being published (or was)
        self.received += 1
        try:
            route = self.inbound.route(topic, packet.retain, qos)
        except MappingError as exc:
            route = None
            log.warning("bridge %s: %s", self.name, exc)
        if route is None:
            self.unmatched += 1
            self._acknowledge(wire, qos, mid, ReasonCode.SUCCESS)
            return
        context = self.hub.context(
            route.topic,
            packet.payload,
            qos,
            route.retain,
            properties=forwarded_properties(packet.properties),
            meta={"bridge.remote_topic": topic},
        )
        if qos == 0:
            self.hub.publish(context)
            return
        if qos == 2:
            self.held[mid] = _PENDING
        self.hub.publish(context, on_safe=lambda code: self._safe(wire, qos, mid, code))

    def pubrel(self, mid: int) -> None:
        self.held.pop(mid, None)
        if self.wire is not None:
            self.wire.send(Pubcomp(mid))

    def _topic(self, packet: Publish) -> str:
        alias = packet.properties.topic_alias
        if alias is None:
            return packet.topic
        if not 0 < alias <= self.max_aliases:
            raise ProtocolViolation(f"topic alias {alias} beyond our maximum {self.max_aliases}")
        if packet.topic:
            self.aliases[alias] = packet.topic
            return packet.topic
        topic = self.aliases.get(alias)
        if topic is None:
            raise ProtocolViolation(f"unknown topic alias {alias}")
        return topic

    def _safe(self, wire: Wire, qos: int, mid: int, code: int) -> None:
        """The local publish is durable (or refused): acknowledge the remote."""
        if code == ReasonCode.UNSPECIFIED_ERROR:  # a store failed: have it sent again
            self.held.pop(mid, None)
            if wire.alive:
                wire.close("a local store failed; the remote will send again", code)
            return
        if code >= 0x80:
            self.refused += 1
        if qos == 2:
            if code >= 0x80:
                self.held.pop(mid, None)
            else:
                self.held[mid] = _RECEIVED
            current = self.wire  # QoS 2 state is the session's: any live link answers
            if current is not None and current.alive:
                self._acknowledge(current, qos, mid, code)
            return
        if wire.alive:
            self._acknowledge(wire, qos, mid, code)

    @staticmethod
    def _acknowledge(wire: Wire, qos: int, mid: int, code: int) -> None:
        if qos == 0:
            return
        if wire.level < 5:
            code = 0  # MQTT 3.1.1 acknowledgements carry no reason code
        packet = Puback(mid, code) if qos == 1 else Pubrec(mid, code)
        wire.send(packet)

    def stats(self) -> dict[str, int]:
        return {"received": self.received, "refused": self.refused, "unmatched": self.unmatched}
