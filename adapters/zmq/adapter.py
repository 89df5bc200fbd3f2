"""The ``zmq`` adapter: ZeroMQ sockets mapped to MQTT topics, both ways (pyzmq).

One socket per mapping, driven from the event loop through ``zmq.asyncio``: a task
waits until its socket is readable (``poll``), then drains it with non-blocking
receives on the same socket, so a busy socket costs one wake-up per batch rather than
a future per message. Sends go out non-blocking; when a peer's queue (its high-water
mark) is full, a ``push``/``req``/``dealer`` send waits for room, which backs the
mapping's subscription queue up (``queue_size``, drops counted there), and a
``pub``/``xpub`` send waits up to ``send_timeout`` (``XPUB_NODROP``: ZeroMQ reports a
full subscriber instead of dropping silently), then drops and counts.

A socket monitor per socket counts connected peers and tells the host when a
connect-side socket has none (``PeerWatch``). ZeroMQ reconnects by itself.

libzmq may discard a message after reporting its socket readable: a ``req`` socket
(``REQ_CORRELATE``) a late reply to a request that timed out, a ``rep`` socket a request
without its envelope. The receive then finds nothing (``zmq.Again``), which means "wait
again" (``_recv_message``), not a failure of the adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from adapters.sockets.component import SocketAdapter
from adapters.sockets.config import MULTIPART, PREFIX, RAW
from adapters.sockets.frames import join_prefixed
from adapters.sockets.mapping import Inbound, Outbound, batches, note_error, note_failure
from adapters.sockets.peers import PeerWatch, first_error
from adapters.sockets.requests import PendingReplies, ask_responder, publish_reply
from adapters.zmq import codec
from adapters.zmq.config import ZmqAdapterConfig
from broker_core.context import Context
from broker_core.errors import AdapterConnectionError, AdapterError
from gateway.components import Host
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError

__all__ = ["ZmqAdapter"]

log = logging.getLogger(__name__)

_TYPES = {
    "sub": zmq.SUB,
    "pull": zmq.PULL,
    "rep": zmq.REP,
    "router": zmq.ROUTER,
    "pub": zmq.PUB,
    "xpub": zmq.XPUB,
    "push": zmq.PUSH,
    "req": zmq.REQ,
    "dealer": zmq.DEALER,
}
_BATCH = 512  # messages drained per wake-up before other tasks get the loop
_MONITORED = (
    zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
)


class ZmqAdapter(SocketAdapter):
    TYPE = "zmq"

    def __init__(self, config: ZmqAdapterConfig) -> None:
        super().__init__(config.name, config.queue_size, config.zmq_to_mqtt, config.mqtt_to_zmq)
        self.config = config
        self._sockets: list[zmq.asyncio.Socket] = []
        self._monitors: list[zmq.asyncio.Socket] = []
        #: this run's mappings with their sockets and monitors: (direction, mapping, ...)
        self._run_sockets: list[tuple[str, Any, zmq.asyncio.Socket, zmq.asyncio.Socket]] = []

    # -- the component -----------------------------------------------------------------

    async def run(self, hub: HubClient, host: Host) -> None:
        kept = host.take()  # the last run's plain sockets, when it was restarted
        context = kept.context if isinstance(kept, _Kept) else zmq.asyncio.Context()
        reusable = kept.sockets if isinstance(kept, _Kept) else []
        peers = PeerWatch(host)
        try:
            inbound = [self._reuse(reusable, "in", m) for m in self.inbound]
            outbound = [self._reuse(reusable, "out", m) for m in self.outbound]
            await _close_unused(reusable)  # first: a changed mapping may bind the same
            inbound = [
                found or await self._open_retrying(context, "in", m)
                for m, found in zip(self.inbound, inbound, strict=True)
            ]
            outbound = [
                found or await self._open_retrying(context, "out", m)
                for m, found in zip(self.outbound, outbound, strict=True)
            ]
            with first_error():
                async with asyncio.TaskGroup() as tg:
                    for m_in, sock, monitor in inbound:
                        tg.create_task(self._monitor(monitor, m_in, peers))
                        tg.create_task(self._serve_inbound(hub, m_in, sock))
                    for m_out, sock, monitor in outbound:
                        tg.create_task(self._monitor(monitor, m_out, peers))
                        tg.create_task(self._serve_outbound(hub, m_out, sock))
                    peers.start()  # ready(), or degraded when a peer is missing already
        finally:
            peers.stop()
            if host.stopping.is_set() and host.restarting:
                # A restart (on request, or a reload): the next run goes on with the plain
                # sockets of the mappings it keeps unchanged; their peers stay connected.
                self._hand_over(host, context)
            else:
                await self._close(context)

    def _reuse(
        self, reusable: list[_Socket], direction: str, mapping: Inbound | Outbound
    ) -> Any:
        """The last run's socket of this mapping, unchanged, with its monitor (and its
        counters taken over), or None."""
        key = (direction, mapping.name, mapping.config, self.config.linger)
        for entry in reusable:
            if entry.key == key:
                reusable.remove(entry)
                mapping.counters = entry.counters
                self._sockets.append(entry.sock)
                self._monitors.append(entry.monitor)
                self._ipc_files.extend(entry.ipc_files)
                self._run_sockets.append((direction, mapping, entry.sock, entry.monitor))
                return (mapping, entry.sock, entry.monitor)
        return None

    async def _open_retrying(
        self, context: zmq.asyncio.Context, direction: str, mapping: Inbound | Outbound
    ) -> tuple[Any, zmq.asyncio.Socket, zmq.asyncio.Socket]:
        """``_open``, noted in ``_run_sockets``; an address in use is tried again for up
        to 2 s (sockets of the last run, just closed: ZeroMQ's I/O thread releases what
        they bound asynchronously)."""
        for attempt in itertools.count():
            try:
                sock, monitor = self._open(context, mapping.config, mapping.name)
            except AdapterConnectionError as exc:
                if attempt >= 40 or "in use" not in str(exc):
                    raise
                _close_socket(self._sockets.pop(), self._monitors.pop())
                await asyncio.sleep(0.05)
                continue
            self._run_sockets.append((direction, mapping, sock, monitor))
            return mapping, sock, monitor
        raise AssertionError("unreachable")

    def _hand_over(self, host: Host, context: zmq.asyncio.Context) -> None:
        """Keeps (``host.keep``) the sockets a next run can go on with: those of ``sub``,
        ``pull``, ``pub`` and ``push`` mappings (no request state, no subscriptions of
        their own); closes the others."""
        handed: list[_Socket] = []
        for direction, mapping, sock, monitor in self._run_sockets:
            if mapping.config.socket in _HANDED_OVER:
                ipc = [p for p in self._ipc_files if _binds(mapping.config, p)]
                key = (direction, mapping.name, mapping.config, self.config.linger)
                handed.append(_Socket(key, sock, monitor, mapping.counters, ipc))
        ids = {id(entry.sock) for entry in handed}
        for sock, monitor in zip(self._sockets, self._monitors, strict=True):
            if id(sock) not in ids:
                _close_socket(sock, monitor)
        for path in self._ipc_files:
            if not any(path in entry.ipc_files for entry in handed):
                with contextlib.suppress(OSError):
                    path.unlink()
        kept = _Kept(context, handed)
        host.keep(kept, kept.close)

    async def stop(self) -> None:
        """Drains the outbound queues into the sockets; what the sockets hold then gets
        ``linger`` to reach its peers."""
        await super().stop()

    # -- sockets -------------------------------------------------------------------------

    def _open(
        self, context: zmq.asyncio.Context, config: Any, name: str
    ) -> tuple[zmq.asyncio.Socket, zmq.asyncio.Socket]:
        """The mapping's socket, bound or connected, and its monitor socket."""
        sock = context.socket(_TYPES[config.socket])
        self._sockets.append(sock)
        monitor = sock.get_monitor_socket(_MONITORED)  # before connecting: no event missed
        self._monitors.append(monitor)
        sock.setsockopt(zmq.LINGER, int(self.config.linger * 1000))
        sock.setsockopt(zmq.SNDHWM, config.high_water_mark)
        sock.setsockopt(zmq.RCVHWM, config.high_water_mark)
        if config.socket == "sub":
            for prefix in config.subscribe:
                sock.setsockopt(zmq.SUBSCRIBE, prefix.encode())
        elif config.socket in ("pub", "xpub"):
            sock.setsockopt(zmq.XPUB_NODROP, 1)
            if config.socket == "xpub":
                sock.setsockopt(zmq.XPUB_VERBOSER, 1)  # every (un)subscription, counted
        elif config.socket == "req":
            sock.setsockopt(zmq.REQ_RELAXED, 1)  # a timed-out request does not wedge it
            sock.setsockopt(zmq.REQ_CORRELATE, 1)  # and its late reply is discarded
        connect, bind = config.urls()
        for url in bind:
            if url.startswith("ipc://") and _served(Path(url[len("ipc://") :])):
                raise AdapterConnectionError(
                    f"{name}: cannot bind {url}: another process is serving it (its socket"
                    " file accepts connections); ZeroMQ would take the path over"
                )
            try:
                sock.bind(url)
            except zmq.ZMQError as exc:
                raise AdapterConnectionError(f"{name}: cannot bind {url}: {exc}") from exc
            self.bound(url)
            log.info("zmq %s: %s %s bound to %s", self.config.name, name, config.socket, url)
        for url in connect:
            try:
                sock.connect(url)
            except zmq.ZMQError as exc:
                raise AdapterConnectionError(f"{name}: cannot connect to {url}: {exc}") from exc
        return sock, monitor

    async def _close(self, context: zmq.asyncio.Context) -> None:
        for sock in self._sockets:
            with contextlib.suppress(zmq.ZMQError):
                sock.disable_monitor()
        for monitor in self._monitors:
            monitor.close(linger=0)
        for sock in self._sockets:
            sock.close()  # with LINGER: unsent messages get that long
        await asyncio.to_thread(context.term)
        self.remove_ipc_files()  # ZeroMQ leaves them behind

    @staticmethod
    async def _monitor(
        monitor: zmq.asyncio.Socket, mapping: Inbound | Outbound, peers: PeerWatch
    ) -> None:
        """Counts connected peers; a connect-side socket without one degrades the host."""
        counters = mapping.counters
        connects = bool(mapping.config.urls()[0])
        while True:
            event = parse_monitor_message(await monitor.recv_multipart())
            kind = event["event"]
            if kind in (zmq.EVENT_CONNECTED, zmq.EVENT_ACCEPTED):
                counters.connected += 1
                if connects:
                    peers.up(mapping.name)
            elif kind == zmq.EVENT_DISCONNECTED:
                counters.connected = max(0, counters.connected - 1)
                if connects and counters.connected == 0:
                    peers.down(mapping.name, f"peer {event['endpoint'].decode()} went away")
            elif kind == zmq.EVENT_CONNECT_RETRIED and counters.connected == 0:
                peers.down(mapping.name, f"cannot reach {event['endpoint'].decode()}")

    # -- ZeroMQ -> MQTT ------------------------------------------------------------------

    async def _serve_inbound(
        self, hub: HubClient, mapping: Inbound, sock: zmq.asyncio.Socket
    ) -> None:
        kind = mapping.config.socket
        if kind in ("sub", "pull"):
            await self._receive(hub, mapping, sock)
        elif kind == "rep":
            await self.serve_front(
                hub,
                mapping,
                lambda pending, topic: self._front_rep(hub, mapping, sock, pending, topic),
            )
        else:
            await self.serve_front(
                hub,
                mapping,
                lambda pending, topic: self._front_router(hub, mapping, sock, pending, topic),
            )

    async def _receive(self, hub: HubClient, mapping: Inbound, sock: zmq.asyncio.Socket) -> None:
        """``sub`` / ``pull``: every message published to MQTT."""
        sync: zmq.Socket[bytes] = zmq.Socket.shadow(sock.underlying)
        take, decode = mapping.take, codec.decode
        try:
            while True:
                drained = 0
                while drained < _BATCH:
                    try:
                        frames = _recv_frames(sync)
                    except zmq.Again:
                        break
                    drained += 1
                    take(frames, decode, hub)
                if drained < _BATCH:
                    await sock.poll(None, zmq.POLLIN)  # type: ignore[call-arg]
                else:
                    await asyncio.sleep(0)
        finally:
            # The run ends (a restart, a reload, a stop): what ZeroMQ has already taken
            # in is published before the socket closes; only what is still in flight
            # (peers' queues, TCP buffers) is lost with it.
            _drain_received(sync, mapping, hub)

    async def _front_rep(
        self,
        hub: HubClient,
        mapping: Inbound,
        sock: zmq.asyncio.Socket,
        pending: PendingReplies,
        response_topic: str,
    ) -> None:
        """``rep``: one ZeroMQ request at a time, answered by an MQTT responder."""

        def malformed() -> None:
            # ZeroMQ dropped it: several arriving at once count as one.
            mapping.counters.received += 1
            note_failure(mapping, MappingError("ZeroMQ discarded a request without envelope"))

        while True:
            body = await _recv_message(sock, malformed)
            reply = await ask_responder(hub, mapping, pending, body, codec.decode, response_topic)
            await sock.send(reply)
            mapping.counters.sent += 1

    async def _front_router(
        self,
        hub: HubClient,
        mapping: Inbound,
        sock: zmq.asyncio.Socket,
        pending: PendingReplies,
        response_topic: str,
    ) -> None:
        """``router``: up to ``max_inflight`` ZeroMQ requests at once."""
        slots = asyncio.Semaphore(mapping.config.max_inflight)

        async def answer(envelope: list[bytes], body: list[bytes]) -> None:
            try:
                reply = await ask_responder(
                    hub, mapping, pending, body, codec.decode, response_topic
                )
                await sock.send_multipart([*envelope, reply])
                mapping.counters.sent += 1
            finally:
                slots.release()

        async with asyncio.TaskGroup() as tg:
            while True:
                frames = await _recv_message(sock)
                try:
                    envelope, body = codec.split_envelope(frames)
                except MappingError as exc:  # no envelope: nowhere to answer
                    mapping.counters.received += 1
                    note_failure(mapping, exc)
                    continue
                await slots.acquire()
                tg.create_task(answer(envelope, body))

    # -- MQTT -> ZeroMQ ------------------------------------------------------------------

    async def _serve_outbound(
        self, hub: HubClient, mapping: Outbound, sock: zmq.asyncio.Socket
    ) -> None:
        config = mapping.config
        if config.socket == "xpub":
            subscription = self.subscribe_on_demand(hub, mapping)
        else:
            subscription = self.subscribe(hub, mapping)
        if config.socket == "req":
            await self._request_rep(hub, mapping, sock, subscription)
        elif config.socket == "dealer":
            await self._request_dealer(hub, mapping, sock, subscription)
        elif config.socket == "xpub":
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._xpub_subscriptions(mapping, sock, subscription))
                await self._send(mapping, sock, subscription)
        else:
            await self._send(mapping, sock, subscription)

    async def _send(
        self, mapping: Outbound, sock: zmq.asyncio.Socket, subscription: HubSubscription
    ) -> None:
        """``pub`` / ``xpub`` / ``push``: every MQTT message sent."""
        sync: zmq.Socket[bytes] = zmq.Socket.shadow(sock.underlying)
        counters = mapping.counters
        config: Any = mapping.config  # a ZmqOutbound
        layout, delimiter = config.frames, mapping.delimiter
        publisher = config.socket in ("pub", "xpub")
        emit = _emitter(sync, layout, delimiter)
        native = mapping.native
        giving_up = False  # a publisher's subscriber stayed full: drop at once until it drains
        async for batch in batches(subscription):
            counters.received += len(batch)
            for context in batch:
                try:
                    topic, payload = native(context)
                    try:
                        emit(topic, payload)
                    except zmq.Again:
                        frames = codec.encode(topic, payload, layout, delimiter)
                        if not publisher:
                            await sock.send_multipart(frames)  # waits for room: backpressure
                        elif giving_up or not await self._publish_later(
                            sync, frames, config.send_timeout
                        ):
                            giving_up = True
                            counters.dropped += 1
                            continue
                except MappingError as exc:
                    note_failure(mapping, exc)
                    continue
                except Exception as exc:  # a bug: this message is lost, the mapping goes on
                    note_error(mapping, exc)
                    continue
                giving_up = False
                counters.sent += 1

    @staticmethod
    async def _publish_later(sync: zmq.Socket[bytes], frames: list[bytes], timeout: float) -> bool:
        """Retries a publisher's send while a subscriber's queue is full, up to
        ``timeout``; ZeroMQ does not signal when a PUB's subscriber has room again."""
        delay = 0.001
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            await asyncio.sleep(delay)
            try:
                _send_frames(sync, frames)
                return True
            except zmq.Again:
                delay = min(delay * 2, 0.05)
        return False

    async def _xpub_subscriptions(
        self, mapping: Outbound, sock: zmq.asyncio.Socket, subscription: HubSubscription
    ) -> None:
        """``xpub``: ZeroMQ subscriptions become MQTT subscriptions, and end with them."""
        head = mapping.config.topic.partition("{mqtt.topic}")[0]
        demand = codec.OnDemand(head, mapping.source.topic_filter, mapping.config.frames != RAW)
        sync: zmq.Socket[bytes] = zmq.Socket.shadow(sock.underlying)
        name = f"zmq {self.config.name}: {mapping.name}"
        while True:
            # The sender's sends on this socket may take the readiness edge of its file
            # descriptor: drain, then wait at most 0.1 s before looking again.
            while True:
                try:
                    frames = sync.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    self._on_demand(mapping, name, demand, subscription, frames)
                except Exception as exc:  # a bug: this (un)subscription is lost
                    note_error(mapping, exc)
            await sock.poll(100, zmq.POLLIN)  # type: ignore[call-arg]

    @staticmethod
    def _on_demand(
        mapping: Outbound,
        name: str,
        demand: codec.OnDemand,
        subscription: HubSubscription,
        frames: list[bytes],
    ) -> None:
        """One message an ``xpub`` received: a ZeroMQ (un)subscription changes the
        MQTT subscription's filters when it needs a filter added or no longer needed."""
        event = codec.parse_subscription(frames[0]) if len(frames) == 1 else None
        if event is None:
            return
        if event[0]:
            added = demand.subscribe(event[1])
            if added is None:
                return
            try:
                subscription.add(added)
            except AdapterError as exc:  # the ACL denies it
                mapping.counters.denied += 1
                log.warning("%s: %s", name, exc)
            else:
                log.info("%s: subscribed to %s on demand", name, added)
        else:
            removed = demand.unsubscribe(event[1])
            if removed is not None:
                subscription.remove(removed)
                log.info("%s: unsubscribed from %s", name, removed)

    @staticmethod
    def _request_frames(mapping: Outbound, context: Context) -> list[bytes] | None:
        """The frames of an MQTT request, or None when it cannot be one (counted)."""
        native = mapping.request(context)
        if native is None:
            return None
        return codec.encode(native[0], native[1], mapping.config.frames, mapping.delimiter)

    @staticmethod
    def _publish_reply(
        hub: HubClient, mapping: Outbound, request: Context, frames: list[bytes]
    ) -> None:
        if len(frames) != 1:
            note_failure(mapping, MappingError(f"expected a reply of 1 frame, got {len(frames)}"))
            return
        publish_reply(hub, mapping, request, frames[0])

    async def _request_rep(
        self,
        hub: HubClient,
        mapping: Outbound,
        sock: zmq.asyncio.Socket,
        subscription: HubSubscription,
    ) -> None:
        """``req``: MQTT 5 requests to a ZeroMQ service, one at a time."""
        counters = mapping.counters
        async for request in subscription:
            counters.received += 1
            frames = self._request_frames(mapping, request)
            if frames is None:
                continue
            await sock.send_multipart(frames)
            counters.sent += 1
            try:
                async with asyncio.timeout(mapping.config.timeout):
                    reply = await _recv_message(sock)
            except TimeoutError:
                counters.timeouts += 1
                continue
            self._publish_reply(hub, mapping, request, reply)

    async def _request_dealer(
        self,
        hub: HubClient,
        mapping: Outbound,
        sock: zmq.asyncio.Socket,
        subscription: HubSubscription,
    ) -> None:
        """``dealer``: up to ``max_inflight`` MQTT 5 requests at once; each carries its
        id in its envelope, which the service's ``rep`` sends back with the reply."""
        counters = mapping.counters
        slots = asyncio.Semaphore(mapping.config.max_inflight)
        waiting: dict[bytes, tuple[Context, asyncio.TimerHandle]] = {}
        ids = itertools.count(1)
        loop = asyncio.get_running_loop()

        def expire(key: bytes) -> None:
            if waiting.pop(key, None) is not None:
                counters.timeouts += 1
                slots.release()

        async def read_replies() -> None:
            while True:
                frames = await _recv_message(sock)
                try:
                    envelope, body = codec.split_envelope(frames)
                except MappingError as exc:
                    note_failure(mapping, exc)
                    continue
                entry = waiting.pop(envelope[0], None)
                if entry is None:
                    continue  # expired meanwhile
                entry[1].cancel()
                slots.release()
                self._publish_reply(hub, mapping, entry[0], body)

        async with asyncio.TaskGroup() as tg:
            tg.create_task(read_replies())
            async for request in subscription:
                counters.received += 1
                frames = self._request_frames(mapping, request)
                if frames is None:
                    continue
                await slots.acquire()
                key = next(ids).to_bytes(8, "big")
                timer = loop.call_later(mapping.config.timeout, expire, key)
                waiting[key] = (request, timer)
                await sock.send_multipart([key, b"", *frames])
                counters.sent += 1


# The hot paths call libzmq through pyzmq's backend socket methods: the friendlier
# ``zmq.Socket`` methods check their arguments in Python and, for ``recv_multipart``,
# ask for ``RCVMORE`` through an option lookup, which costs more than the I/O itself
# for small messages.
_send = zmq.backend.Socket.send
_recv = zmq.backend.Socket.recv
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)  # ints: pyzmq's flag enums cost per operation
_LAST = int(zmq.NOBLOCK)


async def _recv_message(
    sock: zmq.asyncio.Socket, discarded: Callable[[], None] | None = None
) -> list[bytes]:
    """The next whole message, waiting for it. A socket reported readable whose message
    libzmq then discards (a late reply a ``REQ_CORRELATE`` socket drops, a request
    without envelope a ``rep`` socket drops) makes pyzmq's receive raise ``zmq.Again``:
    there is nothing to read, so wait again, after telling ``discarded``. No busy loop:
    the discarding receive consumed what made the socket readable."""
    while True:
        try:
            return await sock.recv_multipart()
        except zmq.Again:
            if discarded is not None:
                discarded()


#: mapping sockets a restart hands over to the next run (``_hand_over``)
_HANDED_OVER = frozenset({"sub", "pull", "pub", "push"})


class _Socket:
    """A mapping's socket handed over: what identifies the mapping (direction, name,
    config, linger), the socket, its monitor, its counters, the ipc files it bound."""

    def __init__(
        self,
        key: tuple[str, str, Any, float],
        sock: zmq.asyncio.Socket,
        monitor: zmq.asyncio.Socket,
        counters: Any,
        ipc_files: list[Path],
    ) -> None:
        self.key = key
        self.sock = sock
        self.monitor = monitor
        self.counters = counters
        self.ipc_files = ipc_files


class _Kept:
    """What a restarted run hands the next: its context and its plain sockets."""

    def __init__(self, context: zmq.asyncio.Context, sockets: list[_Socket]) -> None:
        self.context = context
        self.sockets = sockets

    def close(self) -> None:
        """No run follows (paused, removed, the gateway stops): closes the sockets (with
        ``linger``) and terminates the context on a thread of its own."""
        for entry in self.sockets:
            _close_socket(entry.sock, entry.monitor)
            for path in entry.ipc_files:
                with contextlib.suppress(OSError):
                    path.unlink()
        self.sockets = []
        threading.Thread(target=self.context.term, name="zmq-term", daemon=True).start()


def _close_socket(sock: zmq.asyncio.Socket, monitor: zmq.asyncio.Socket) -> None:
    with contextlib.suppress(zmq.ZMQError):
        sock.disable_monitor()
    monitor.close(linger=0)
    sock.close()  # with LINGER: unsent messages get that long


async def _close_unused(unused: list[_Socket]) -> None:
    """Closes the handed-over sockets the new run does not go on with (their mappings
    changed or went); ZeroMQ's I/O thread releases what they bound asynchronously
    (``_open_retrying``)."""
    for entry in unused:
        _close_socket(entry.sock, entry.monitor)
        for path in entry.ipc_files:
            with contextlib.suppress(OSError):
                path.unlink()
    if unused:
        unused.clear()
        await asyncio.sleep(0)


def _served(path: Path) -> bool:
    """Whether a live process serves the ipc socket file at ``path``: it accepts a
    connection. libzmq's bind unlinks whatever is at the path and binds its own, so a
    live service's address would be taken over (and its file removed at stop); a stale
    file (connection refused) is replaced as before."""
    try:
        if not path.is_socket():
            return False
    except OSError:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except (TimeoutError, BlockingIOError):  # its backlog is full: alive, and busy
        return True
    except OSError:  # refused (stale), gone meanwhile, no permission to tell
        return False
    finally:
        probe.close()
    return True


def _binds(config: Any, path: Path) -> bool:
    return f"ipc://{path}" in config.urls()[1]


def _drain_received(sync: zmq.Socket[bytes], mapping: Inbound, hub: HubClient) -> None:
    """Publishes every whole message the socket holds now, without waiting (as the run
    ends, before the socket closes); at most its high-water mark of them."""
    take, decode = mapping.take, codec.decode
    for _ in range(max(1, mapping.config.high_water_mark)):
        try:
            frames = _recv_frames(sync)
        except (zmq.Again, zmq.ZMQError):  # none left, or the socket is closed already
            return
        take(frames, decode, hub)


def _recv_frames(sock: zmq.Socket[bytes]) -> list[bytes]:
    """One whole message, without waiting (``zmq.Again`` when there is none). A frame
    knows whether more follow (``more``); a message arrives whole, so once its first
    frame is in, so are the others."""
    frame = _recv(sock, _LAST, copy=False)
    parts = [frame.bytes]
    while frame.more:
        frame = _recv(sock, _LAST, copy=False)
        parts.append(frame.bytes)
    return parts


def _send_frames(sock: zmq.Socket[bytes], frames: list[bytes]) -> None:
    """Sends a message without waiting; ``zmq.Again`` when it cannot go now (then
    nothing went: the high-water mark is checked at the first frame, and a message is
    sent whole or not at all)."""
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        _send(sock, frame, _MORE if i < last else _LAST)


def _emitter(
    sock: zmq.Socket[bytes], layout: str, delimiter: bytes
) -> Callable[[bytes, bytes], None]:
    """``emit(topic, payload)``: ``codec.encode`` and ``_send_frames`` in one, per
    layout, for the outbound hot path; ``zmq.Again`` as ``_send_frames``."""
    if layout == MULTIPART:

        def emit(topic: bytes, payload: bytes) -> None:
            _send(sock, topic, _MORE)
            _send(sock, payload, _LAST)

    elif layout == PREFIX:

        def emit(topic: bytes, payload: bytes) -> None:
            _send(sock, join_prefixed(topic, delimiter, payload), _LAST)

    else:

        def emit(topic: bytes, payload: bytes) -> None:
            _send(sock, payload, _LAST)

    return emit
