"""The inbound half of a bridge: remote messages republished locally, acknowledged late.

A message from a remote subscription is published locally with the bridge's origin
(``bridge:<name>``), so the bridge's own tap never sees it: what a bridge brought in
is never forwarded back out on the same bridge.

Acknowledgements wait for the message to be safe locally (``hub.publish(ctx,
on_safe=...)``: in every durable store that takes it), so a crash in between makes the
remote send it again rather than lose it:

- QoS 1: PUBACK once safe, on the connection it came on (if that one is gone, the
  remote sends it again on the next).
- QoS 2, exactly once across a ``kill -9`` (MQTT 5.0 4.3.3, method B, durable): the
  remote's Packet Identifier is recorded in the broker's store (``ReceivedIds``: its
  ``incoming`` table, under a key no MQTT client id can be, ``"\\0bridge/<name>/<client
  id>"``) and PUBREC goes once the message and the record are committed; a resent
  PUBLISH (DUP) with a recorded identifier is answered with PUBREC and not published
  again, in this run or after a restart (the records are read back when the bridge
  starts). PUBREL removes the record, and PUBCOMP goes once that is committed (a remote
  that reuses the identifier must not find it recorded). The record is handed to the
  store in the loop turn that routed the message, so it is in the same transaction as
  the message's queued deliveries (persistent sessions, retained): one commit makes both
  durable, or neither. When durable taps (another bridge's queue, the stream log) have
  writes pending too, that commit waits until they have committed theirs
  (``Store.incoming_added_after``, as for an MQTT client's QoS 2 PUBLISH): a record is
  never committed without the message everywhere it went (the taps may get a message
  twice, when a kill comes between their commit and the store's: at least once there).
  The store's ``open`` leaves these rows alone (they belong to no session); the bridge
  reads its own (``load``). They go with the bridge: removed for good, its client id
  changed, or no longer configured when the gateway starts (``bridge.records``).
- A refusal (the ACL, ``$SYS``): MQTT 5 acknowledges with its reason code; MQTT 3.1.1
  acknowledges it anyway (the message is dropped and counted in ``refused``). A store
  that failed (0x80) is not acknowledged: the link is closed and the remote sends the
  message again.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from bridge.mapping import Inbound, MappingError, forwarded_properties
from bridge.records import StoreKey, forget_bridge, forget_other_client_ids, key_of, read_records
from broker_core.acks import Durable
from broker_core.errors import ProtocolViolation
from broker_core.mqtt.packets import Puback, Pubcomp, Publish, Pubrec
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.store.base import Store
from gateway.config.models.bridges import BridgeConfig
from gateway.hub import HubClient

__all__ = ["ReceivedIds", "Receiver"]

log = logging.getLogger(__name__)

_PENDING, _RECEIVED = 0, 1


class Wire(Protocol):
    level: int

    @property
    def alive(self) -> bool: ...

    def send(self, packet: Puback | Pubrec | Pubcomp) -> None: ...

    def close(self, reason: str, code: int = ...) -> None: ...


class ReceivedIds:
    """The remote's QoS 2 Packet Identifiers a bridge holds between PUBLISH and PUBREL,
    in memory and recorded in the broker's store; kept by the bridge across its runs (a
    run that ended left its records in the store and its state here)."""

    def __init__(self, store: Store, name: str, client_id: str) -> None:
        self.store = store
        self.name = name
        self.key = self.key_of(name, client_id)
        self._session = StoreKey(self.key).session()
        self.held: dict[int, int] = {}  # Packet Identifier -> _PENDING / _RECEIVED
        #: Counts the remote's sessions: a message safe after the remote started a new
        #: one (it forgot the Packet Identifier) is neither recorded nor acknowledged.
        self.generation = 0
        self.loaded = False
        #: The live link of whichever run is attached: a message that a run before it
        #: took in gets its PUBREC (PUBCOMP) there (QoS 2 state is the session's).
        self.wire: Wire | None = None
        #: QoS 2 messages between PUBLISH and PUBREC, in the order they came.
        self.flows: deque[_Flow] = deque()

    key_of = staticmethod(key_of)

    async def load(self) -> None:
        """Reads the records of earlier runs (once): a resent PUBLISH with one of them
        is not published again. What the store holds as written: the barrier first."""
        if self.loaded:
            return
        self.loaded = True
        store = self.store
        path = getattr(store, "path", None)
        if not store.durable or path is None:
            return
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def committed(ok: bool) -> None:
            if not done.done():
                done.set_result(ok)

        store.barrier(committed)
        await done
        try:
            records = await asyncio.to_thread(read_records, Path(path), self.name)
        except (OSError, sqlite3.Error) as exc:
            # Not read: a resent PUBLISH of those is published again (at least once).
            log.warning(
                "bridge %s: cannot read the QoS 2 Packet Identifiers received before"
                " (%s: %s); a message the remote sends again may be delivered twice",
                self.name, type(exc).__name__, exc,
            )  # fmt: skip
            return
        for key, mid in records:
            if key == self.key:
                self.held.setdefault(mid, _RECEIVED)
        # Its name's records under another client id: that remote session is not this
        # bridge's any more (bridge.records).
        forget_other_client_ids(self.store, self.name, self.key, records)

    def record(self, mid: int) -> None:
        """Hands the record of ``mid`` to the store (in its next commit)."""
        self.store.incoming_added(self._session, mid)

    def record_after(self, mid: int, participants: Sequence[Durable]) -> Durable:
        """``record``, in the store's commit of this loop turn's writes, which waits until
        each of ``participants`` (durable taps that took the message) has committed:
        what the PUBREC waits on besides the store (``Store.incoming_added_after``)."""
        return self.store.incoming_added_after(self._session, mid, participants)

    def forget(self, mid: int) -> None:
        """Hands the removal of ``mid``'s record to the store (in its next commit)."""
        self.held.pop(mid, None)
        self.store.incoming_removed(self._session, mid)

    def forget_all(self) -> None:
        """The bridge was removed for good (``bridge.records``): every record it holds is
        removed, and the flows still waiting for their commit end unrecorded and
        unacknowledged (the link is closed)."""
        self.generation += 1
        self.wire = None
        forget_bridge(self.store, self.name, [(self.key, mid) for mid in self.held])
        self.held.clear()

    def new_session(self) -> None:
        """The remote has no session for us: it forgot every Packet Identifier."""
        self.generation += 1
        for mid in list(self.held):
            self.forget(mid)


class _Flow:
    """One QoS 2 message between its PUBLISH and its PUBREC."""

    __slots__ = ("code", "done", "generation", "mid", "record", "recorded")

    def __init__(self, mid: int, generation: int) -> None:
        self.mid = mid
        self.generation = generation
        self.recorded = False  # handed to the store
        self.record: Durable | None = None  # what else the record waits on
        self.done = False
        self.code: int | None = None  # the PUBREC's reason code; None: no PUBREC


class Receiver:
    def __init__(
        self, config: BridgeConfig, hub: HubClient, ids: ReceivedIds | None = None
    ) -> None:
        self.name = config.name
        self.inbound = Inbound(config)
        self.hub = hub
        self.wire: Wire | None = None
        self.max_aliases = config.connect_properties.topic_alias_maximum
        self.aliases: dict[int, str] = {}
        broker = hub.hub.broker
        self.acks = broker.acks
        if ids is None:
            ids = ReceivedIds(broker.store, config.name, config.name)
        self.ids = ids
        self.held = ids.held  # QoS 2 Packet Identifier -> _PENDING / _RECEIVED
        self.received = 0
        self.refused = 0
        self.unmatched = 0
        self.dropped_mapping = 0  # a subscription matched, its local template cannot be filled

    def attach(self, wire: Wire, session_present: bool) -> None:
        self.wire = self.ids.wire = wire
        self.aliases = {}
        if not session_present:
            self.ids.new_session()  # the remote forgot its side of QoS 2

    def detach(self) -> None:
        if self.ids.wire is self.wire:
            self.ids.wire = None
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
            log.warning("bridge %s: %s", self.name, exc)
            self.dropped_mapping += 1
            self._acknowledge(wire, qos, mid, ReasonCode.SUCCESS)
            return
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
        if qos == 1:
            self.hub.publish(context, on_safe=lambda code: self._safe(wire, qos, mid, code))
            return
        self.held[mid] = _PENDING
        flow = _Flow(mid, self.ids.generation)
        self.ids.flows.append(flow)
        routed = self.hub.publish(context, on_safe=lambda code: self._safe2(flow, code))
        if routed and not flow.recorded and self.held.get(mid) == _PENDING:
            # The record in this loop turn: the store's commit of the message's writes.
            flow.recorded = True
            participants = self.acks.participants
            waiting = [p for p in participants if p.pending] if participants else None
            if waiting:
                flow.record = self.ids.record_after(mid, waiting)
            else:
                self.ids.record(mid)

    def pubrel(self, mid: int) -> None:
        """The remote released ``mid``: its record is removed, and PUBCOMP goes once that
        is committed (a PUBLISH reusing the identifier is a new message)."""
        self.ids.forget(mid)
        self.ids.store.barrier(lambda ok: self._pubcomp(mid))

    def _pubcomp(self, mid: int) -> None:
        wire = self.ids.wire
        if wire is not None and wire.alive:
            wire.send(Pubcomp(mid))

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
        if wire.alive:
            self._acknowledge(wire, qos, mid, code)

    def _safe2(self, flow: _Flow, code: int) -> None:
        """A QoS 2 message is durable (or refused): PUBREC once its record is committed."""
        ids = self.ids
        mid = flow.mid
        if flow.generation != ids.generation:  # the remote forgot ``mid`` meanwhile
            self._done(flow, None)  # (``new_session`` removed its record)
            return
        if code == ReasonCode.UNSPECIFIED_ERROR:  # a store failed: have it sent again
            self._failed(flow)
            return
        if code >= 0x80:
            self.refused += 1
            self.held.pop(mid, None)
            self._done(flow, code)
            return
        if not flow.recorded:  # safe at once: the message wrote nothing to wait for
            flow.recorded = True
            ids.record(mid)
        record = flow.record
        if record is None:
            ids.store.barrier(lambda ok: self._recorded(flow, code, ok))
        else:
            record.barrier(
                lambda ok: ids.store.barrier(lambda ok2: self._recorded(flow, code, ok and ok2))
            )

    def _recorded(self, flow: _Flow, code: int, ok: bool) -> None:
        mid = flow.mid
        if flow.generation != self.ids.generation or self.held.get(mid) != _PENDING:
            self._done(flow, None)
            return
        if not ok:  # the record was left out or failed: the remote sends it again
            self._failed(flow)
            return
        self.held[mid] = _RECEIVED
        self._done(flow, code)

    def _failed(self, flow: _Flow) -> None:
        """What the message or its record was to be written to failed: not acknowledged,
        not received (the removal of a record that failed too); the link is closed so
        that the remote sends it again."""
        self.ids.forget(flow.mid)
        self._done(flow, None)
        current = self.ids.wire
        if current is not None and current.alive:
            current.close(
                "a local store failed; the remote will send again", ReasonCode.UNSPECIFIED_ERROR
            )

    def _done(self, flow: _Flow, code: int | None) -> None:
        """``flow`` is over: PUBREC with ``code`` (None: none), in the order the PUBLISHes
        came [MQTT-4.6.0-3], on whichever link is live (QoS 2 state is the session's)."""
        flow.code = code
        flow.done = True
        flows = self.ids.flows
        while flows and flows[0].done:
            first = flows.popleft()
            current = self.ids.wire
            if first.code is not None and current is not None and current.alive:
                self._acknowledge(current, 2, first.mid, first.code)

    @staticmethod
    def _acknowledge(wire: Wire, qos: int, mid: int, code: int) -> None:
        if qos == 0:
            return
        if wire.level < 5:
            code = 0  # MQTT 3.1.1 acknowledgements carry no reason code
        packet = Puback(mid, code) if qos == 1 else Pubrec(mid, code)
        wire.send(packet)

    def stats(self) -> dict[str, int]:
        return {
            "received": self.received,
            "refused": self.refused,
            "unmatched": self.unmatched,
            "dropped_mapping_inbound": self.dropped_mapping,
            # The remote's QoS 2 Packet Identifiers held (and recorded in the store)
            # between PUBLISH and PUBREL: at most the Receive Maximum (docs/broker.md).
            "inbound_qos2_pending": len(self.held),
        }
