"""The outbound half of a bridge: local messages into the disk queue, out to the remote.

``offer(context)`` is the bridge's durable tap: it runs while the local broker routes a
message, before the local publisher's PUBACK, and appends the message to the
``DiskQueue`` (QoS 1/2, and QoS 0 with ``queue.qos0`` while it cannot be sent at once).
The publisher's PUBACK then waits for that row's commit.

Where a queued message is, in the order of the queue (``seq``)::

    inflight (sent, not acknowledged)  <  ready (in memory, to send)  <  on disk only

- ``ready`` holds what arrived while the link keeps up, and what was read back from the
  disk in batches (``queue.batch_size``) when a backlog did not fit in memory
  (``spilled``). QoS 1 goes out at once, its row's commit under way; QoS 2 only once
  its row is committed, so that a sequence number (a Packet Identifier, below) never
  names two messages in the remote's QoS 2 state after a crash. (A QoS 1 message sent
  and lost with an uncommitted row was not acknowledged to its publisher either, which
  sends it again.)
- ``inflight`` holds at most the window: ``max_inflight``, and at most the remote's
  Receive Maximum. A message acknowledged by the remote keeps its place in the window
  until its row's delete is committed, so that after a crash at most the window is on
  disk and sent before. Deletes wait for the queue's next commit (``COMMIT_DELAY_S``)
  unless half the window waits on them: then they are committed at once, so the window
  does not stall on the timer. Its Packet Identifier follows from the sequence number
  (``seq % 65000 + 1``), so a message keeps its identifier across reconnects and
  restarts; Packet Identifiers above 65000 are left for SUBSCRIBE.
- The remote's PUBACK (QoS 1) or PUBCOMP (QoS 2) deletes the row; a PUBACK or PUBREC
  with a reason code >= 0x80 is a refusal: the row is deleted and counted as
  ``rejected``.
- QoS 2 after PUBREC: the remote owns the message, and must never see its PUBLISH again
  in that session. The row is marked *released* on disk and the PUBREL goes out once
  that commit is made; a released message is sent again as a PUBREL when the session
  is present, as a PUBLISH (at least once, never lost) once its mark is undone when it
  is not. The marks' bookkeeping is ``bridge.qos2_release`` (``Releases``); this module
  writes the PUBRELs.
- MQTT 3.1.1 has no Receive Maximum, and a remote refusing a PUBLISH over its quota
  answers with a PUBACK or PUBREC that 3.1.1 cannot mark as a refusal: the message is
  gone (a PUBREL gets its PUBCOMP as any other). Mosquitto 2.0 (Debian's 2.0.11, and
  upstream since 2.0.16) refuses a client's QoS 1 or QoS 2 PUBLISH while
  ``max_inflight_messages`` (20 by default) of its QoS 2 messages await their PUBCOMP
  (QoS 1 holds no place: it is acknowledged at once); EMQX a QoS 2 one beyond
  ``max_awaiting_rel`` (100 by default). So on a 3.1.1 link at most
  ``QOS2_INFLIGHT_V311`` QoS 2 messages are in flight (sent, no PUBCOMP yet), and no
  QoS 1/2 PUBLISH goes while that many are; an MQTT 5 link follows the remote's
  Receive Maximum (a refusal there, 0x97, is counted as ``rejected``).
- When the link is lost, the inflight messages go back to the front of ``ready`` with
  DUP set; after a restart the first ``max_inflight`` messages are sent with DUP set,
  because they may have been sent before. That is all that is ever sent twice.

Bounds: ``queue.max_messages`` and ``queue.max_bytes`` (``queue.overflow``:
``drop_oldest`` drops the oldest message not in flight, ``drop_new`` refuses the new
one); ``ready`` holds at most ``READY_MESSAGES`` / ``READY_BYTES`` in memory. Every
message dropped is counted by reason (``DROP_REASONS``). ``queue.rate_limit`` is a token
bucket (``bridge.rate_limit``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol

from bridge.mapping import MappingError, Outbound, Queued, expiry_left
from bridge.qos2_release import Releases
from bridge.queue import DiskQueue
from bridge.rate_limit import RateLimit
from broker_core.clock import BASE as _CLOCK_BASE
from broker_core.clock import monotonic as _monotonic
from broker_core.context import Context
from broker_core.mqtt.encoder import encode, fixed_header
from broker_core.mqtt.packets import Pubrel, new_publish
from broker_core.mqtt.properties import EMPTY, Properties
from broker_core.mqtt.wire import encode_utf8
from gateway.config.models.bridges import BridgeConfig

__all__ = [
    "DROP_REASONS",
    "MID_SPAN",
    "QOS2_INFLIGHT_V311",
    "READY_BYTES",
    "READY_MESSAGES",
    "Forwarder",
    "Wire",
]

log = logging.getLogger(__name__)

#: Packet Identifiers 1..MID_SPAN carry queued messages; the rest are SUBSCRIBE's.
MID_SPAN = 65000
#: Messages waiting to be sent held in memory, at most, and their topics' and payloads'
#: bytes (more waits on disk only, read back in batches): a remote that keeps up never
#: makes the bridge read back what it has just written.
READY_MESSAGES = 50_000
READY_BYTES = 16 * 1024 * 1024
#: QoS 2 messages in flight on an MQTT 3.1.1 link, at most (and while that many are, no
#: QoS 1 PUBLISH goes either): mosquitto's default ``max_inflight_messages``, at which it
#: drops a 3.1.1 client's QoS 1/2 message behind a plain PUBACK / PUBREC (see the module
#: docstring). MQTT 5 says its limit (Receive Maximum).
QOS2_INFLIGHT_V311 = 20

#: Why messages are dropped: ``dropped_<reason>`` in the bridge's stats.
DROP_REASONS = (
    "overflow",  # the queue was full (queue.max_messages / queue.max_bytes)
    "expired",  # its Message Expiry Interval passed while queued, or was 0 (not sent at once)
    "too_large",  # over the remote's Maximum Packet Size, or the whole queue's bytes
    "qos0",  # QoS 0 that could not be sent at once (queue.qos0: false)
    "mapping",  # its remote topic could not be made (template, AWS IoT Core's limits)
)


class Wire(Protocol):
    """What the forwarder needs of a live link to the remote broker."""

    level: int
    writable: bool

    def write(self, data: bytes) -> None: ...


class Forwarder:
    def __init__(
        self, config: BridgeConfig, queue: DiskQueue, outbound: Outbound | None = None
    ) -> None:
        self.name = config.name
        self.config = config
        self.queue = queue
        self.outbound = outbound or Outbound(config)
        self.overflow = config.queue.overflow
        self.max_messages = config.queue.max_messages
        self.max_bytes = config.queue.max_bytes
        self.batch = config.queue.batch_size
        self.queue_qos0 = config.queue.qos0
        self.ready_messages = max(READY_MESSAGES, 2 * self.batch, 2 * config.max_inflight)
        self.rate_limit = RateLimit(config.queue.rate_limit, self._schedule_pump)
        self.ready: deque[Queued] = deque()
        self.ready_bytes = 0
        self.inflight: dict[int, Queued] = {}
        self.wire: Wire | None = None
        self.window = config.max_inflight
        self.qos2_window = self.window  # QoS 2 messages in flight, at most
        self.qos2_inflight = 0
        self.releases = Releases(queue)  # QoS 2 after PUBREC
        self.max_packet: int | None = None
        self.session_present = False
        # What was queued before this run started may have been in flight: DUP.
        self.dup_upto = queue.index.nth(config.max_inflight - 1) or queue.index.last
        self.next_read = queue.index.first() or queue.last + 1  # lowest seq not loaded
        self.spilled = queue.index.count > 0
        self.reading = False
        self.sent = 0
        self.acked = 0
        self.rejected = 0
        self.queued = 0
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self._loop = asyncio.get_running_loop()
        self._pump_scheduled = False
        self._warned: set[str] = set()
        self._topic_bytes: dict[str, bytes] = {}
        queue.on_commit = self._committed

    # -- the tap -------------------------------------------------------------------------

    @staticmethod
    def offer_early(
        outbound: Outbound, queue: DiskQueue, qos0: bool, dropped: dict[str, int], context: Context
    ) -> None:
        """The tap while the queue reads what earlier runs left: every message to disk
        (the forwarder, once built, reads them back in order); nothing is sent yet."""
        try:
            route = outbound.route(context)
        except MappingError:
            dropped["mapping"] = dropped.get("mapping", 0) + 1
            return
        if route is None:
            return
        if route.properties.message_expiry_interval == 0:  # never queued (``offer``)
            dropped["expired"] = dropped.get("expired", 0) + 1
            return
        if route.qos == 0 and not qos0:
            dropped["qos0"] = dropped.get("qos0", 0) + 1
            return
        queue.append(route)

    def offer(self, context: Context) -> None:
        """A local message matching a forward; runs during routing (must not block)."""
        try:
            route = self.outbound.route(context)
        except MappingError as exc:
            self._drop("mapping", str(exc))
            return
        if route is None:
            return
        if route.properties.message_expiry_interval == 0:
            # Its lifetime has passed: forwarded only when sent at once (QoS 0 on a link
            # with nothing waiting), never stored and forwarded (MQTT 5.0 3.3.2.3.3).
            wire = self.wire
            if route.qos == 0 and wire is not None and self._sends_at_once(wire):
                self._send_qos0(wire, route, route.properties)
            else:
                self._drop("expired")
            return
        if route.qos == 0 and not self._offer_qos0(route):
            return
        self._enqueue(route)

    def _sends_at_once(self, wire: Wire) -> bool:
        """A QoS 0 message offered now can be written now, ahead of nothing."""
        return (
            not self.ready
            and not self.spilled
            and wire.writable
            and self.rate_limit.allowance() >= 1
        )

    def _offer_qos0(self, route: Queued) -> bool:
        """Sends or holds a QoS 0 message; True when it still needs the disk queue."""
        wire = self.wire
        if wire is not None and self._sends_at_once(wire):
            self._send_qos0(wire, route)
            return False
        if self.queue_qos0:
            return True
        if wire is not None and not self.spilled and self._ready_has_room(route.size):
            self._hold(route)
            self._schedule_pump()
        else:
            self._drop("qos0")
        return False

    def _enqueue(self, route: Queued) -> None:
        size = route.size
        if size > self.max_bytes:
            self._drop("too_large", f"{route.topic!r}: {size} bytes, more than queue.max_bytes")
            return
        index = self.queue.index
        while index.count >= self.max_messages or index.bytes + size > self.max_bytes:
            if self.overflow == "drop_new" or not self._drop_oldest():
                self._drop("overflow")
                return
        item = self.queue.append(route)
        self.queued += 1
        if (
            not self.spilled
            and len(self.ready) < self.ready_messages
            and self.ready_bytes + size <= READY_BYTES
        ):
            self.ready.append(item)
            self.ready_bytes += size
            if self.wire is not None and not self._pump_scheduled:
                self._pump_scheduled = True
                self._loop.call_soon(self.pump)
        elif not self.spilled:
            self.spilled = True
            self.next_read = item.seq

    def _ready_has_room(self, size: int) -> bool:
        return len(self.ready) < self.ready_messages and self.ready_bytes + size <= READY_BYTES

    def _hold(self, item: Queued) -> None:
        self.ready.append(item)
        self.ready_bytes += item.size

    def _drop_oldest(self) -> bool:
        """Drops the oldest queued message that is not in flight; False if none."""
        for position, item in enumerate(self.ready):
            if item.seq:
                del self.ready[position]
                self.ready_bytes -= item.size
                self.queue.remove(item.seq)
                self.dropped["overflow"] += 1
                return True
        seq = self.queue.index.first(self.next_read)
        if seq is None:
            return False
        self.queue.remove(seq)
        self.dropped["overflow"] += 1
        return True

    def _drop(self, reason: str, detail: str | None = None) -> None:
        self.dropped[reason] += 1
        if detail is not None and reason not in self._warned:
            self._warned.add(reason)  # once per reason and run: the counters tell the rest
            log.warning("bridge %s: dropped a message: %s", self.name, detail)

    # -- the link ------------------------------------------------------------------------

    def attach(
        self, wire: Wire, session_present: bool, receive_maximum: int | None, max_packet: int | None
    ) -> None:
        """A new link is up: resend what was in flight, then drain."""
        self.wire = wire
        self.session_present = session_present
        self.window = min(self.config.max_inflight, receive_maximum or 65535)
        self.qos2_window = self.window if wire.level == 5 else min(self.window, QOS2_INFLIGHT_V311)
        self.max_packet = max_packet
        self._schedule_pump()

    def detach(self) -> None:
        """The link is gone: what was in flight is sent again on the next one."""
        self.wire = None
        self.qos2_inflight = 0
        if self.inflight:
            again = list(self.inflight.values())
            self.inflight.clear()
            for item in reversed(again):
                item.dup = True
                self.ready.appendleft(item)
                self.ready_bytes += item.size
        if not self.queue_qos0 and any(item.seq == 0 for item in self.ready):
            kept = deque(item for item in self.ready if item.seq)
            self.dropped["qos0"] += len(self.ready) - len(kept)
            self.ready = kept
            self.ready_bytes = sum(item.size for item in kept)

    def writable(self) -> None:
        """The link's write buffer drained below its high-water mark."""
        self._schedule_pump()

    # -- acknowledgements from the remote ------------------------------------------------

    def puback(self, mid: int, code: int) -> None:
        self._finish(self.inflight.pop(mid, None), code)

    def pubacks(self, mids: list[int]) -> None:
        """Plain PUBACKs (success), many at once: ``puback`` without the detours."""
        pop = self.inflight.pop
        seqs = [item.seq for mid in mids if (item := pop(mid, None)) is not None]
        if seqs:
            if self.qos2_inflight:  # recount: a remote may PUBACK a QoS 2 message
                self.qos2_inflight = sum(item.qos == 2 for item in self.inflight.values())
            self.acked += len(seqs)
            # Their places in the window free up when their deletes are committed
            # (``_committed`` pumps then), unless they were not queued any more.
            if self.queue.remove_many(seqs) < len(seqs):
                self._schedule_pump()
            else:
                self._hurry()

    def pubrec(self, mid: int, code: int) -> None:
        """The remote has the QoS 2 message: its PUBREL goes once the row is marked
        released on disk (``Releases.pubrec``, then ``_committed``)."""
        item = self.inflight.get(mid)
        if item is None:
            return
        if code >= 0x80:
            self._finish(self.inflight.pop(mid), code)
            return
        if self.releases.pubrec(item, self.qos2_window):
            self._write_pubrels([item])

    def _write_pubrels(self, items: list[Queued]) -> None:
        """PUBREL for those of ``items`` in flight on the link (the others get theirs
        when they are sent again)."""
        wire = self.wire
        if wire is None:
            return
        inflight = self.inflight
        level = wire.level
        frames = [
            encode(Pubrel(mid), level)
            for item in items
            if inflight.get(mid := item.seq % MID_SPAN + 1) is item
        ]
        if frames:
            wire.write(b"".join(frames))

    def pubcomp(self, mid: int, code: int) -> None:
        self._finish(self.inflight.pop(mid, None), 0)

    def _finish(self, item: Queued | None, code: int) -> None:
        if item is None:
            return
        if item.qos == 2 and self.qos2_inflight:
            self.qos2_inflight -= 1
        if code >= 0x80:
            self.rejected += 1
            if "rejected" not in self._warned:
                self._warned.add("rejected")
                log.warning(
                    "bridge %s: the remote refused %r with reason code 0x%02X",
                    self.name,
                    item.topic,
                    code,
                )
        else:
            self.acked += 1
        self.queue.remove(item.seq)
        self._hurry()
        self._schedule_pump()

    def _hurry(self) -> None:
        """Half the window waits on deletes and more is ready to go: commit them now
        rather than within ``COMMIT_DELAY_S``, so that the window does not stall on the
        timer (a place still frees only with its delete's commit: after a crash at most
        the window is sent again)."""
        if self.ready and 2 * self.queue.pending_deletes >= self.window:
            self.queue.commit_now()

    # -- sending -------------------------------------------------------------------------

    def _committed(self, seq: int) -> None:
        """A commit: new rows may be sent, released rows get their PUBREL, and deleted
        rows free their place."""
        if self.releases.waiting:
            self._write_pubrels(self.releases.committed())
        if (self.ready or self.spilled) and self.wire is not None:
            self._schedule_pump()

    def _schedule_pump(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self._loop.call_soon(self.pump)

    def pump(self) -> None:
        """Sends what the window, the rate limit and the commits allow; reads the next
        batch from disk when the memory runs low."""
        self._pump_scheduled = False
        wire = self.wire
        if wire is not None and self.ready and wire.writable:
            self._send(wire)
        if self.spilled and not self.reading and len(self.ready) < self.batch:
            self.reading = True
            self.queue.read(self.next_read, self.batch, self._loaded)

    def _send(self, wire: Wire) -> None:
        """Sends from the front of ``ready``: one write of every PUBLISH the window, the
        rate limit and the commits allow (each frame in pieces, joined once)."""
        ready = self.ready
        inflight = self.inflight
        queue = self.queue
        committed = queue.committed
        room = self.window - queue.pending_deletes
        level = wire.level
        limit = self.rate_limit.allowance()
        now = _CLOCK_BASE + _monotonic()  # the broker's clock, as received_at
        dup_upto = self.dup_upto
        max_packet = self.max_packet
        topics = self._topic_bytes
        oldest = next(iter(inflight.values())).seq if inflight else 0
        space = room - len(inflight)  # in the window
        qos2 = self.qos2_inflight
        qos2_window = self.qos2_window
        parts: list[bytes] = []
        append = parts.append
        sent = 0
        while ready and sent < limit:
            item = ready[0]
            qos = item.qos
            seq = item.seq
            if qos:
                if qos2 >= qos2_window:
                    break  # the remote's quota, full of QoS 2 (MQTT 3.1.1)
                if qos == 2:
                    if seq > committed:
                        break  # see the module docstring: QoS 2 goes out once on disk
                    if item.released and not self.session_present:
                        self.releases.unrelease(ready, self.window)
                        if item.released:
                            break  # its PUBLISH goes once that is on disk
                if space <= 0 or (inflight and seq - oldest >= MID_SPAN):
                    break
                space -= 1
                if qos == 2:
                    qos2 += 1
            ready.popleft()
            self.ready_bytes -= item.size
            mid = seq % MID_SPAN + 1 if qos else 0
            if item.released:  # QoS 2 after PUBREC, the session present: finish it
                append(encode(Pubrel(mid), level))
            else:
                properties: Properties | None = item.properties
                if properties is not EMPTY:
                    properties = expiry_left(item.properties, item.received_at, now)
                    if properties is None:
                        self._discard(item, "expired")
                        space += 1 if qos else 0
                        qos2 -= qos == 2
                        continue
                topic = topics.get(item.topic) or self._topic(item.topic)
                payload = item.payload
                length = len(topic) + len(payload) + (2 if qos else 0)
                encoded = b""
                if level == 5:
                    encoded = b"\x00" if properties is EMPTY else properties.encoded()
                    length += len(encoded)
                b0 = 0x30 | qos << 1 | item.retain
                if item.dup or (qos and seq <= dup_upto):
                    b0 |= 0x08
                header = bytes((b0, length)) if length < 128 else fixed_header(b0, length)
                if max_packet is not None and len(header) + length > max_packet:
                    self._discard(item, "too_large")
                    space += 1 if qos else 0
                    qos2 -= qos == 2
                    continue
                append(header)
                append(topic)
                if qos:
                    append(mid.to_bytes(2, "big"))
                if encoded:
                    append(encoded)
                append(payload)
            sent += 1
            if qos:
                if not inflight:
                    oldest = seq
                item.dup = True
                inflight[mid] = item
            elif seq:
                queue.remove(seq)
        self.qos2_inflight = qos2
        if sent:
            self.sent += sent
            self.rate_limit.spend(sent)
            wire.write(b"".join(parts))

    def _topic(self, topic: str) -> bytes:
        """The encoded topic of a PUBLISH, remembered (a stream reuses its topics)."""
        if len(self._topic_bytes) >= 10_000:
            self._topic_bytes.clear()
        encoded = self._topic_bytes[topic] = encode_utf8(topic)
        return encoded

    def _send_qos0(self, wire: Wire, item: Queued, properties: Properties | None = None) -> None:
        """``properties``: as given (a Message Expiry Interval of 0 sent at once), else
        with the expiry interval left (an expired message is not sent)."""
        if properties is None:
            properties = expiry_left(item.properties, item.received_at, _CLOCK_BASE + _monotonic())
            if properties is None:
                self._drop("expired")
                return
        frame = encode(
            new_publish(item.topic, item.payload, 0, item.retain, False, None, properties, None),
            wire.level,
        )
        if self.max_packet is not None and len(frame) > self.max_packet:
            self._drop("too_large", f"{item.topic!r}: larger than the remote's maximum packet")
            return
        self.rate_limit.spend(1)
        self.sent += 1
        wire.write(frame)

    def _discard(self, item: Queued, reason: str) -> None:
        self.dropped[reason] += 1
        if item.seq:
            self.queue.remove(item.seq)

    def _loaded(self, items: list[Queued], last: int) -> None:
        """A batch read back from disk."""
        self.reading = False
        dup_upto = self.dup_upto
        for item in items:
            if item.seq < self.next_read:
                continue
            if item.seq <= dup_upto:
                item.dup = True
            self._hold(item)
        if last >= self.next_read:
            self.next_read = last + 1
        if self.queue.index.first(self.next_read) is None:
            self.spilled = False  # everything queued is loaded: new messages go to ready
            self.next_read = self.queue.last + 1
        self._schedule_pump()

    def close(self) -> None:
        self.rate_limit.close()
        self.queue.on_commit = None

    # -- what the API shows --------------------------------------------------------------

    def stats(self, now: float) -> dict[str, int | float]:
        index = self.queue.index
        oldest = index.oldest_time()
        dropped = sum(self.dropped.values())
        return {
            "queue_depth": index.count,
            "queue_bytes": index.bytes,
            "oldest_age_s": 0.0 if oldest is None else round(max(0.0, now - oldest), 3),
            "inflight": len(self.inflight),
            "queued": self.queued,
            "sent": self.sent,
            "acked": self.acked,
            "rejected": self.rejected,
            "dropped": dropped,
            **{f"dropped_{reason}": count for reason, count in self.dropped.items()},
        }
