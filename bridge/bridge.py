"""``MqttBridge``: the bridge component (types ``mqtt``, ``emqx_cloud``, ``aws_iot``).

One instance per ``bridges[]`` entry, run by the supervisor like every component:

- it opens its disk queue (``queue.db`` in ``host.data_dir``) and taps the local
  broker on its ``forwards`` filters, with the queue as the tap's durable participant:
  a forwarded QoS 1/2 message is on disk before its publisher's PUBACK
  (``bridge.forward``);
- it keeps one connection to the remote broker (``bridge.link``), reconnecting with
  backoff (``reconnect_backoff`` doubling to ``reconnect_backoff_max``, stretched at
  random by ``reconnect_jitter``); on each connection it subscribes to its
  ``subscriptions`` (``bridge.inbound``) and drains the queue;
- its state is ``running`` while connected, ``degraded`` with the reason otherwise
  ("reconnecting in 4.1s: cannot connect to ...: Connection refused"); ``stats()``
  has the queue's depth, bytes and oldest age, sent / acked / dropped (by reason) /
  rejected, received; ``$SYS/brokers/<node>/bridges/<name>/connected`` and
  ``.../disconnected`` carry the same as JSON events.

A queue that cannot be written makes the bridge fail (the supervisor restarts it,
which reads the queue back from disk); a remote that refuses or vanishes only makes it
reconnect. Neither ever stops the broker. A queue file found damaged (at open, or while
a run reads or writes it: ``QueueDamaged``) is salvaged before a run opens it: its
readable rows into a fresh queue, the damaged file kept (``bridge.queue_salvage``;
``_Damaged`` carries the word to the next run). While no run could open the queue (a
file of which nothing can be salvaged, or a queue that was lost:
``bridge.queue_file``), and while a salvage runs, a ``Refusal``
(``gateway.components.refusal``) taps the ``forwards`` in its place: a QoS 1/2 message
it would queue is refused (no PUBACK), never acknowledged into no queue; it is kept
across the runs (``Host.keep``) until one opens the queue and taps in the same loop
turn, and closed by the supervisor when the bridge is paused, removed or disabled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from functools import partial
from pathlib import Path
from typing import Any

from bridge.forward import Forwarder
from bridge.inbound import ReceivedIds, Receiver
from bridge.link import Link, open_link, reason_name
from bridge.mapping import Outbound
from bridge.queue import DiskQueue
from bridge.queue_file import QueueDamaged
from bridge.queue_salvage import salvage
from bridge.records import forget_bridge
from broker_core.clock import now as clock_now
from broker_core.errors import AdapterError, BridgeError
from broker_core.mqtt.packets import (
    Auth,
    Packet,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    SubscriptionOptions,
    TopicSubscription,
)
from broker_core.store.base import Store
from broker_core.tap import Tap
from gateway.components import Host
from gateway.components.refusal import Refusal
from gateway.config.models.bridges import BridgeConfig
from gateway.hub import HubClient

__all__ = ["CONNECTED", "CONNECTING", "RECONNECTING", "STOPPED", "MqttBridge"]

log = logging.getLogger(__name__)

CONNECTING = "connecting"
CONNECTED = "connected"
RECONNECTING = "reconnecting"
STOPPED = "stopped"

_FILTERS_PER_SUBSCRIBE = 8  # AWS IoT Core takes at most 8 filters per SUBSCRIBE
_FIRST_SUBSCRIBE_ID = 65001  # Packet Identifiers below are the queue's (forward.MID_SPAN)


class _Held:
    """What a bridge's run hands over to the next (``Host.keep``): its open queue, the tap
    that goes on filling it, and the drops counted meanwhile."""

    def __init__(self, queue: DiskQueue, tap: Tap, outbound: Outbound) -> None:
        self.queue = queue
        self.tap = tap
        self.outbound = outbound
        self.dropped: dict[str, int] = {}
        self.salvages = 0
        self.salvaged_rows = 0
        self.refused = 0  # refused_no_queue so far

    def close(self) -> None:
        self.tap.close()
        self.queue.close()


class _Damaged:
    """What a run whose queue file was found damaged hands over (``Host.keep``): the
    ``Refusal`` in its place; the next run salvages the file before it opens it."""

    def __init__(self, refusal: Refusal | None) -> None:
        self.refusal = refusal

    def close(self) -> None:
        if self.refusal is not None:
            self.refusal.close()


class MqttBridge:
    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.state = CONNECTING
        self.reason: str | None = None
        self.server: str | None = None if config.server is None else str(config.server)
        self.client_id = ""
        self.session_present = False
        self.connected_since: float | None = None
        self.connects = 0
        self.connect_failures = 0
        self.forwarder: Forwarder | None = None
        self.receiver: Receiver | None = None
        #: The remote's QoS 2 Packet Identifiers held between PUBLISH and PUBREL, across
        #: runs (recorded in the broker's store; ``bridge.inbound``).
        self._received_ids: ReceivedIds | None = None
        self._store: Store | None = None  # the broker's, once a run started
        self.link: Link | None = None
        self._host: Host | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._finished: asyncio.Event | None = None
        self._subscribe_ids: dict[int, tuple[str, ...]] = {}
        self._next_subscribe_id = _FIRST_SUBSCRIBE_ID
        self._refusal: Refusal | None = None
        #: 1 and the rows kept when this run started by salvaging its damaged queue
        #: (``bridge.queue_salvage``); carried to the runs that take its queue over.
        self.salvages = 0
        self.salvaged_rows = 0
        #: QoS 1/2 messages refused while no run could open the queue, by refusals closed
        #: since (a run opened it); the open refusal (``_refusal``) counts on from there,
        #: and a refusal kept for the next run carries the whole count (``refused``).
        self._refused_earlier = 0

    # -- the component -------------------------------------------------------------------

    async def run(self, hub: HubClient, host: Host) -> None:
        config = self.config
        self._host = host
        self._wake = asyncio.Event()
        self._finished = asyncio.Event()
        self.client_id = config.default_client_id(hub.hub.broker.node_name)
        self._store = hub.hub.broker.store
        for path, message in config.warnings():
            log.warning("bridge %s: %s: %s", config.name, ".".join(map(str, path)), message)
        # The tap before the first await: nothing published while the bridge starts
        # escapes it (its queue's earlier rows are read meanwhile). After a restart the
        # queue is the last run's, still open, and so is its tap until this one's is in
        # place: nothing routed between the two runs escapes the queue.
        held: _Held | _Damaged | Refusal | None = host.take()
        salvage_first = isinstance(held, _Damaged)
        refusal = held.refusal if isinstance(held, _Damaged) else held
        refusal = refusal if isinstance(refusal, Refusal) else None
        held = held if isinstance(held, _Held) else None
        if refusal is not None:
            self._refusal = refusal  # counts on from the last run's count
        outbound = Outbound(config)
        if held is None:
            queue_path, name = host.data_dir / "queue.db", f"bridge-{config.name}"
            try:
                queue: DiskQueue | None = None
                if not salvage_first:
                    try:
                        queue = DiskQueue.open(queue_path, name)
                    except QueueDamaged as exc:
                        log.warning("bridge %s: %s; salvaging its readable rows", config.name, exc)
                if queue is None:
                    # Its messages are refused meanwhile, never acknowledged into no queue.
                    refusal = refusal or self._tap_refusal(hub, outbound)
                    host.degraded(f"salvaging the readable rows of its damaged queue {queue_path}")
                    await self._salvage(queue_path, host, refusal)
                    queue = DiskQueue.open(queue_path, name)
            except BridgeError:
                self._refuse(hub, host, outbound, refusal)
                self._finished.set()
                raise
            except asyncio.CancelledError:  # stopped while it salvaged (``_salvage``)
                self._finished.set()
                raise
            early: dict[str, int] = {}
        else:
            queue, early = held.queue, held.dropped
            self.salvages, self.salvaged_rows = held.salvages, held.salvaged_rows
            self._refused_earlier = held.refused
        queue.on_error = self._queue_failed
        tap = None
        forwarder = None
        try:
            if outbound.filters:
                tap = hub.tap(
                    *outbound.filters,
                    callback=partial(
                        Forwarder.offer_early, outbound, queue, config.queue.qos0, early
                    ),
                    durable=queue,
                )
            if held is not None:
                hub.adopt(held.tap)
                held.tap.close()
            if refusal is not None:  # the same loop turn as the tap: nothing escapes both
                refusal.close()
                self._refused_earlier += refusal.refused
                self._refusal = refusal = None
            await queue.loaded()
            forwarder = self.forwarder = Forwarder(config, queue, outbound)
            for reason, count in early.items():
                forwarder.dropped[reason] += count
            if tap is not None:
                tap.callback = forwarder.offer
            ids = self._received_ids
            if ids is None or ids.key != ReceivedIds.key_of(config.name, self.client_id):
                ids = ReceivedIds(hub.hub.broker.store, config.name, self.client_id)
                self._received_ids = ids
            await ids.load()
            self.receiver = Receiver(config, hub, ids)
            host.degraded(f"connecting to {self.server or 'the AWS IoT Core endpoint'}")
            await self._serve(host)
        finally:
            if self.link is not None:
                self.link.close("the bridge stops")
            if forwarder is not None:
                forwarder.close()
            if tap is not None and queue.error is None:
                kept = _Held(queue, tap, outbound)
                kept.salvages, kept.salvaged_rows = self.salvages, self.salvaged_rows
                kept.refused = self._refused_earlier
                self._hand_over(hub, host, kept)
            else:
                # The queue failed (or the run failed before it tapped): until a run opens
                # it again, the tap's messages are refused, not acknowledged unqueued.
                if queue.error is not None:
                    damaged = isinstance(queue.error, QueueDamaged)
                    self._refuse(hub, host, outbound, refusal, damaged=damaged)
                elif refusal is not None:
                    host.keep(refusal, refusal.close)
                if tap is not None:
                    tap.close()
                if held is not None:
                    held.tap.close()  # this run failed before it took the tap over
                queue.close()
            self.state = STOPPED
            self._finished.set()
        if queue.error is not None:
            if isinstance(queue.error, BridgeError):
                raise queue.error
            raise BridgeError(f"bridge {config.name}: writing its queue failed: {queue.error}")

    def _refuse(
        self,
        hub: HubClient,
        host: Host,
        outbound: Outbound,
        held: Refusal | None,
        *,
        damaged: bool = False,
    ) -> None:
        """No queue to append to: until a run opens one, QoS 1/2 messages that would be
        queued are refused (``gateway.components.refusal``), kept for the next run (which
        closes it once its own tap is in place) or closed by the supervisor when none
        follows (paused, removed, disabled, the gateway stops). ``damaged``: the queue
        file is, and the next run salvages it before it opens it (``_Damaged``)."""
        refusal = self._tap_refusal(hub, outbound)
        if held is not None:
            held.close()  # after the new one is in place: nothing escapes both
            if refusal is not None:  # the count goes on with the new one
                refusal.refused += held.refused
            else:
                self._refused_earlier += held.refused
        self._refusal = refusal
        if damaged:
            kept = _Damaged(refusal)
            host.keep(kept, kept.close)
        elif refusal is not None:
            host.keep(refusal, refusal.close)

    def _tap_refusal(self, hub: HubClient, outbound: Outbound) -> Refusal | None:
        """A ``Refusal`` tapped into the ``forwards`` and kept open past this run's hub
        client (None when there are none, or the ACL denies them now)."""
        if not outbound.filters:
            return None
        refusal = Refusal(outbound.queues)
        try:
            refusal.tap_into(hub, outbound.filters)
        except AdapterError as exc:  # the ACL denies the filters now: nothing is tapped
            log.warning("bridge %s: cannot refuse what it would queue: %s", self.config.name, exc)
            return None
        assert refusal.hook is not None
        hub.keep_open(refusal.hook)
        # It carries the count on (kept for the next run, which starts from it).
        refusal.refused, self._refused_earlier = self._refused_earlier, 0
        self._refusal = refusal
        return refusal

    async def _salvage(self, path: Path, host: Host, refusal: Refusal | None) -> None:
        """Salvages the damaged queue at ``path`` on a thread (``bridge.queue_salvage``),
        while ``refusal`` refuses what would be queued; ``BridgeError`` when nothing of it
        can be salvaged. Not cut short by a stop: the thread moves the files, and no run
        may open the queue before it is done."""
        task = asyncio.ensure_future(asyncio.to_thread(salvage, path))
        try:
            found = await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait({task})
            if refusal is not None:
                host.keep(refusal, refusal.close)
            raise
        self.salvages += 1
        self.salvaged_rows += found.rows
        lost = f"; {found.skipped} damaged places skipped, their rows lost" if found.skipped else ""
        log.warning(
            "bridge %s: its queue %s was damaged: %d rows salvaged into a fresh queue"
            " (seq %d to %d%s); the damaged file is kept at %s",
            self.config.name,
            path,
            found.rows,
            found.first,
            found.last,
            lost,
            found.kept,
        )

    def _hand_over(self, hub: HubClient, host: Host, held: _Held) -> None:
        """The run ends: until the next one, the tap goes on queueing (nothing is sent);
        when none follows (paused, removed, the gateway stops) the supervisor closes
        both."""
        held.tap.callback = partial(
            Forwarder.offer_early, held.outbound, held.queue, self.config.queue.qos0, held.dropped
        )
        hub.keep_open(held.tap)
        host.keep(held, held.close)

    async def stop(self) -> None:
        """Disconnects (DISCONNECT, normal) and flushes the queue; what was in flight is
        sent again, with DUP set, on the next start."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if self._finished is not None:
            await self._finished.wait()

    def forget(self) -> None:
        """The bridge was removed for good (``DELETE /api/v1/bridges/<name>``, a reload
        without it, a rename): the supervisor calls this once its last run ended (its
        link is closed). Its inbound QoS 2 records go with it (``bridge.records``)."""
        ids = self._received_ids
        if ids is not None:
            ids.forget_all()
        elif self._store is not None:  # the run ended before it read them
            forget_bridge(self._store, self.config.name)

    def stats(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {
            "connected": int(self.state == CONNECTED),
            "connects": self.connects,
            "connect_failures": self.connect_failures,
        }
        if self.forwarder is not None:
            out.update(self.forwarder.stats(clock_now()))  # ages of received_at
        if self.receiver is not None:
            out.update(self.receiver.stats())
            # A remote message whose local template cannot be filled is a mapping drop
            # too: counted in dropped_mapping and dropped with the forwards' drops.
            inbound_drops = self.receiver.dropped_mapping
            if inbound_drops:
                out["dropped_mapping"] = out.get("dropped_mapping", 0) + inbound_drops
                out["dropped"] = out.get("dropped", 0) + inbound_drops
        # A counter since the gateway started (carried across the bridge's runs; a pause
        # ends it, as it ends the refusal): always there, 0 until a message is refused.
        out["refused_no_queue"] = self._refused_earlier + (
            0 if self._refusal is None else self._refusal.refused
        )
        out["queue_salvages"] = self.salvages
        out["queue_salvaged_rows"] = self.salvaged_rows
        return out

    def describe(self) -> dict[str, Any]:
        """The bridge's link as the API shows it, besides its supervisor's status."""
        return {
            "link": self.state,
            "reason": self.reason,
            "server": self.server,
            "client_id": self.client_id,
            "protocol_version": self.config.protocol_version,
            "session_present": self.session_present,
            "connected_since": self.connected_since,
            "window": None if self.forwarder is None else self.forwarder.window,
        }

    # -- connecting, again and again -------------------------------------------------------

    async def _serve(self, host: Host) -> None:
        config = self.config
        backoff = config.reconnect_backoff
        while not self._stopping:
            self.state = CONNECTING
            try:
                address = await self._address()
                link, connack = await open_link(
                    config, address[0], address[1], self.client_id, self._packet
                )
            except BridgeError as exc:
                self.connect_failures += 1
                reason = str(exc)
            else:
                backoff = config.reconnect_backoff
                reason = await self._session(host, link, connack.session_present, connack)
            if self._stopping or self._failed():
                return
            jitter = config.reconnect_jitter
            wait = backoff * random.uniform(1 - jitter, 1 + jitter)
            backoff = min(backoff * 2, config.reconnect_backoff_max)
            self.state = RECONNECTING
            self.reason = reason
            host.degraded(f"reconnecting in {wait:.1f}s: {reason}")
            log.info("bridge %s: %s; reconnecting in %.1fs", config.name, reason, wait)
            assert self._wake is not None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _address(self) -> tuple[str, int]:
        server = self.config.server
        if server is not None:
            return server.host, server.port
        aws = self.config.aws
        assert aws is not None  # the config requires `server` or `aws`
        from bridge.aws import discover_endpoint

        host = await asyncio.to_thread(discover_endpoint, aws)
        self.server = f"{host}:443"
        return host, 443

    async def _session(self, host: Host, link: Link, session_present: bool, connack: Any) -> str:
        config = self.config
        forwarder, receiver = self.forwarder, self.receiver
        assert forwarder is not None and receiver is not None and self._wake is not None
        properties = connack.properties
        keepalive = float(properties.server_keep_alive or config.keepalive)
        self.link = link
        self.session_present = session_present
        link.on_writable = forwarder.writable
        link.on_pubacks = forwarder.pubacks
        receiver.attach(link, session_present)
        self._subscribe(link)
        forwarder.attach(
            link, session_present, properties.receive_maximum, properties.maximum_packet_size
        )
        self.state = CONNECTED
        self.reason = None
        self.connects += 1
        self.connected_since = time.time()
        host.ready()
        host.event("connected", self._event_body())
        log.info(
            "bridge %s connected to %s (session present: %s)",
            config.name,
            self.server,
            session_present,
        )
        link.start()  # what came with the CONNACK (queued messages), then the rest
        woken: asyncio.Future[Any] = asyncio.ensure_future(self._wake.wait())
        waiters: set[asyncio.Future[Any]] = {link.lost, woken}
        try:
            while not link.lost.done():
                await asyncio.wait(
                    waiters,
                    timeout=max(0.25, keepalive / 4),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if self._stopping or self._failed():
                    link.close("the bridge stops")
                    break
                link.probe(time.monotonic(), keepalive)
        finally:
            woken.cancel()
            forwarder.detach()
            receiver.detach()
            self.link = None
            self.connected_since = None
        reason = link.reason or (link.lost.result() if link.lost.done() else "stopped")
        host.event("disconnected", {**self._event_body(), "reason": reason})
        return reason

    def _subscribe(self, link: Link) -> None:
        assert self.receiver is not None
        requests = self.receiver.inbound.requests
        self._subscribe_ids.clear()  # a new connection: earlier SUBACKs will not come
        per_packet = _FILTERS_PER_SUBSCRIBE if self.config.type == "aws_iot" else 64
        for start in range(0, len(requests), per_packet):
            chunk = requests[start : start + per_packet]
            mid = self._next_subscribe_id
            self._next_subscribe_id = mid + 1 if mid < 65535 else _FIRST_SUBSCRIBE_ID
            self._subscribe_ids[mid] = tuple(request[0] for request in chunk)
            link.send(
                Subscribe(
                    mid,
                    tuple(
                        TopicSubscription(
                            topic_filter, SubscriptionOptions(qos, no_local, rap, handling)
                        )
                        for topic_filter, qos, no_local, rap, handling in chunk
                    ),
                )
            )

    def _packet(self, packet: Packet) -> None:
        """Every packet from the remote after CONNACK, on the loop, once the link is
        started (``Link.start``: the forwarder and the receiver are attached)."""
        forwarder, receiver = self.forwarder, self.receiver
        assert forwarder is not None and receiver is not None
        if isinstance(packet, Puback):
            forwarder.puback(packet.packet_id, packet.reason_code)
        elif isinstance(packet, Publish):
            receiver.publish(packet)
        elif isinstance(packet, Pubrec):
            forwarder.pubrec(packet.packet_id, packet.reason_code)
        elif isinstance(packet, Pubcomp):
            forwarder.pubcomp(packet.packet_id, packet.reason_code)
        elif isinstance(packet, Pubrel):
            receiver.pubrel(packet.packet_id)
        elif isinstance(packet, Suback):
            self._suback(packet)
        elif isinstance(packet, Auth) and self.link is not None:
            self.link.close("the remote asked for enhanced authentication, not supported")

    def _suback(self, packet: Suback) -> None:
        filters = self._subscribe_ids.pop(packet.packet_id, ())
        for topic_filter, code in zip(filters, packet.reason_codes, strict=False):
            if code >= 0x80:
                reason = (
                    f"the remote refused the subscription {topic_filter!r}: {reason_name(code)}"
                )
                log.warning("bridge %s: %s", self.config.name, reason)
                if self._host is not None:
                    self._host.degraded(reason)

    # -- failures ------------------------------------------------------------------------

    def _queue_failed(self, error: BaseException) -> None:
        if self._wake is not None:
            self._wake.set()

    def _failed(self) -> bool:
        return self.forwarder is not None and self.forwarder.queue.error is not None

    def _event_body(self) -> dict[str, object]:
        stats = self.stats()
        return {
            "bridge": self.config.name,
            "type": self.config.type,
            "server": self.server,
            "client_id": self.client_id,
            "session_present": self.session_present,
            "at": int(time.time() * 1000),
            **{
                key: stats[key]
                for key in ("queue_depth", "sent", "acked", "dropped")
                if key in stats
            },
        }
