"""The ``nng`` adapter: NNG sockets mapped to MQTT topics, both ways (pynng).

One socket per mapping.

- **NNG -> MQTT** (``sub0``, ``pull0``, ``pair``): a thread per socket blocks in NNG's
  receive and hands each message to the loop through the run's inbox (``block``
  overflow: when the loop falls behind, the thread waits, NNG's buffer fills and the
  peers wait; nothing is dropped). pynng's per-message futures (``arecv``) cost about
  twice as much, and a reader on NNG's receive descriptor woke the loop once per
  message, at a higher cost than the thread's hand-off in batches.
- **MQTT -> NNG** (``pub0``, ``push0``, ``pair``): sends go out non-blocking; when the
  socket's buffer is full, the mapping waits on NNG's send descriptor (``send_fd``)
  and tries again, which backs its subscription queue up (``queue_size``, drops
  counted there).
- **Request/response** (``req0``, ``rep0``): one NNG context per request in flight,
  with pynng's ``asend`` / ``arecv``.

Pipe notifications (NNG's threads, handed to the loop) count connected peers and tell
the host when a dialing socket has none (``PeerWatch``). NNG redials by itself.

A restart (on request, or a reload with a new config: ``host.restarting``) hands the
plain sockets (``sub0``, ``pull0``, ``pair0``, ``pair1``, ``pub0``, ``push0``) over to
the next run (``host.keep``), a receiving one with its reading thread, which goes on
receiving and waits, holding the message it took, until the next run gives it its
inbox; the next run goes on with those of its mappings whose direction, name and
config are unchanged, and closes the others. Their peers stay connected: nothing in
flight toward them is lost. Sockets with state of their run (``rep0``, ``req0``) are
not handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynng

from adapters.nanomsg import codec
from adapters.nanomsg.config import NngAdapterConfig
from adapters.sockets.component import SocketAdapter
from adapters.sockets.mapping import Inbound, Outbound, batches, note_error, note_failure
from adapters.sockets.peers import PeerWatch, first_error
from adapters.sockets.requests import PendingReplies, ask_responder, publish_reply
from broker_core.context import Context
from broker_core.errors import AdapterConnectionError
from gateway.components import BLOCK, Host, Inbox
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError

__all__ = ["NngAdapter"]

log = logging.getLogger(__name__)

_TYPES: dict[str, Callable[..., pynng.Socket]] = {
    "sub0": pynng.Sub0,
    "pull0": pynng.Pull0,
    "pair0": pynng.Pair0,
    "pair1": pynng.Pair1,
    "rep0": pynng.Rep0,
    "pub0": pynng.Pub0,
    "push0": pynng.Push0,
    "req0": pynng.Req0,
}


class NngAdapter(SocketAdapter):
    TYPE = "nng"

    def __init__(self, config: NngAdapterConfig) -> None:
        super().__init__(config.name, config.queue_size, config.nng_to_mqtt, config.mqtt_to_nng)
        self.config = config
        self._sockets: list[_Socket] = []  # this run's, with their mappings
        self._timers: list[asyncio.TimerHandle] = []

    # -- the component -----------------------------------------------------------------

    async def run(self, hub: HubClient, host: Host) -> None:
        kept = host.take()  # the last run's plain sockets, when it was restarted
        reusable = kept.sockets if isinstance(kept, _Kept) else []
        peers = PeerWatch(host)
        try:
            found_in = [self._reuse(reusable, "in", m, peers) for m in self.inbound]
            found_out = [self._reuse(reusable, "out", m, peers) for m in self.outbound]
            for entry in reusable:  # first: a changed mapping may listen on the same URL
                entry.close(hub)
            reusable.clear()
            inbound = [
                found or self._open("in", m, peers)
                for m, found in zip(self.inbound, found_in, strict=True)
            ]
            outbound = [
                found or self._open("out", m, peers)
                for m, found in zip(self.outbound, found_out, strict=True)
            ]
            with first_error():
                async with asyncio.TaskGroup() as tg:
                    for m_in, entry in zip(self.inbound, inbound, strict=True):
                        tg.create_task(self._serve_inbound(hub, host, m_in, entry))
                    for m_out, entry in zip(self.outbound, outbound, strict=True):
                        tg.create_task(self._serve_outbound(hub, m_out, entry.sock))
                    peers.start()  # ready(), or degraded while a dialer has no peer yet
        finally:
            peers.stop()
            for timer in self._timers:
                timer.cancel()
            for entry in reusable:  # a failure before the sockets were sorted out
                entry.close(hub)
            if host.stopping.is_set() and host.restarting:
                # A restart (on request, or a reload): the next run goes on with the plain
                # sockets of the mappings it keeps unchanged; their peers stay connected.
                handed = [e for e in self._sockets if e.mapping.config.socket in _HANDED_OVER]
            else:
                handed = []
            for entry in self._sockets:
                if entry not in handed:
                    entry.close(hub)  # a receiving one publishes what NNG took in first
            if handed:
                keep = _Kept(handed, hub)
                host.keep(keep, keep.close)

    # -- sockets -------------------------------------------------------------------------

    def _reuse(
        self, reusable: list[_Socket], direction: str, mapping: Inbound | Outbound, peers: PeerWatch
    ) -> _Socket | None:
        """The last run's socket of this mapping, unchanged (its counters taken over, its
        pipes counted for this run), or None."""
        key = (direction, mapping.name, mapping.config)
        for entry in reusable:
            if entry.key == key:
                reusable.remove(entry)
                mapping.counters = entry.mapping.counters
                entry.mapping = mapping
                entry.pipes.attach(mapping, peers)
                self._sockets.append(entry)
                self._check_start(entry.pipes)
                return entry
        return None

    def _open(self, direction: str, mapping: Inbound | Outbound, peers: PeerWatch) -> _Socket:
        config: Any = mapping.config
        name = mapping.name
        sock = _TYPES[config.socket]()
        connect, bind = config.urls()
        entry = _Socket((direction, name, config), sock, mapping, _Pipes(sock, connect))
        self._sockets.append(entry)
        for option in ("recv_buffer_size", "send_buffer_size"):
            with contextlib.suppress(pynng.NotSupported):  # sub0 cannot send, ...
                setattr(sock, option, config.high_water_mark)
        sock.reconnect_time_min = 100
        sock.reconnect_time_max = 5000
        if config.socket == "sub0":
            for prefix in config.subscribe:
                sock.subscribe(prefix.encode())
        entry.pipes.attach(mapping, peers)
        self._check_start(entry.pipes)
        for url in bind:
            try:
                sock.listen(url)
            except pynng.NNGException as exc:
                raise AdapterConnectionError(f"{name}: cannot listen on {url}: {exc}") from exc
            if url.startswith("ipc://"):
                entry.ipc_files.append(Path(url[len("ipc://") :]))
            log.info("nng %s: %s %s listening on %s", self.config.name, name, config.socket, url)
        for url in connect:
            try:
                sock.dial(url, block=False)  # NNG keeps redialing in the background
            except pynng.NNGException as exc:
                raise AdapterConnectionError(f"{name}: cannot dial {url}: {exc}") from exc
        return entry

    def _check_start(self, pipes: _Pipes) -> None:
        """A dialing socket without a peer a second after it was opened (in this run or
        an earlier one) degrades the host."""
        loop = asyncio.get_running_loop()
        grace = max(0.0, pipes.opened + 1.0 - loop.time())
        self._timers.append(loop.call_later(grace, pipes.check_start))

    # -- NNG -> MQTT ---------------------------------------------------------------------

    async def _serve_inbound(
        self, hub: HubClient, host: Host, mapping: Inbound, entry: _Socket
    ) -> None:
        if mapping.config.socket != "rep0":
            await self._receive(hub, host, mapping, entry)
            return
        sock = entry.sock

        async def serve(pending: PendingReplies, response_topic: str) -> None:
            async with asyncio.TaskGroup() as tg:
                for _ in range(mapping.config.max_inflight):
                    tg.create_task(self._front(hub, mapping, sock, pending, response_topic))

        await self.serve_front(hub, mapping, serve)

    async def _receive(self, hub: HubClient, host: Host, mapping: Inbound, entry: _Socket) -> None:
        """``sub0`` / ``pull0`` / ``pair``: every message published to MQTT.

        The socket's thread (``_Reader``, started by the socket's first run) blocks in
        NNG's receive and hands the messages to the loop through this run's inbox
        (``block``: a full inbox makes the thread wait, and NNG's buffers, then the
        peers, wait with it: nothing is dropped)."""
        take, decode = mapping.take, codec.decode

        def handle(body: bytes) -> None:
            take(body, decode, hub)

        inbox: Inbox[bytes] = host.inbox(mapping.config.high_water_mark, BLOCK, callback=handle)
        if entry.reader is None:
            entry.reader = _Reader(entry.sock, f"nng-{mapping.name}")
        entry.reader.attach(inbox)
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled
        finally:
            # The run ends: the thread keeps what it takes from now on for the next run
            # (or for the socket's close: _Socket.close); what waits in the inbox is
            # handled now (callback mode).
            entry.reader.detach()
            inbox.close()

    async def _front(
        self,
        hub: HubClient,
        mapping: Inbound,
        sock: pynng.Socket,
        pending: PendingReplies,
        response_topic: str,
    ) -> None:
        """``rep0``: one of ``max_inflight`` contexts, each serving a request at a time."""
        context = sock.new_context()
        try:
            while True:
                body = await context.arecv()
                reply = await ask_responder(
                    hub, mapping, pending, body, codec.decode, response_topic
                )
                await context.asend(reply)
                mapping.counters.sent += 1
        finally:
            with contextlib.suppress(pynng.NNGException):
                context.close()

    # -- MQTT -> NNG ---------------------------------------------------------------------

    async def _serve_outbound(self, hub: HubClient, mapping: Outbound, sock: pynng.Socket) -> None:
        subscription = self.subscribe(hub, mapping)
        if mapping.config.socket == "req0":
            await self._request(hub, mapping, sock, subscription)
        else:
            await self._send(mapping, sock, subscription)

    async def _send(
        self, mapping: Outbound, sock: pynng.Socket, subscription: HubSubscription
    ) -> None:
        """``pub0`` / ``push0`` / ``pair``: every MQTT message sent."""
        counters = mapping.counters
        layout, delimiter = mapping.config.frames, mapping.delimiter
        send = sock.send
        async for batch in batches(subscription):
            counters.received += len(batch)
            for context in batch:
                try:
                    topic, payload = mapping.native(context)
                    body = codec.encode(topic, payload, layout, delimiter)
                    while True:
                        try:
                            send(body, block=False)
                            break
                        except pynng.TryAgain:
                            await _readable(sock.send_fd)  # room in the send buffer again
                except MappingError as exc:
                    note_failure(mapping, exc)
                    continue
                except Exception as exc:  # a bug: this message is lost, the mapping goes on
                    note_error(mapping, exc)
                    continue
                counters.sent += 1

    async def _request(
        self,
        hub: HubClient,
        mapping: Outbound,
        sock: pynng.Socket,
        subscription: HubSubscription,
    ) -> None:
        """``req0``: MQTT 5 requests to an NNG service, up to ``max_inflight`` at once."""
        counters = mapping.counters
        config = mapping.config
        slots = asyncio.Semaphore(config.max_inflight)

        async def ask(request: Context, body: bytes) -> None:
            context = sock.new_context()
            try:
                await context.asend(body)
                counters.sent += 1
                async with asyncio.timeout(config.timeout):
                    answer = await context.arecv()
            except TimeoutError:
                counters.timeouts += 1
                return
            except Exception as exc:  # a bug: this request is lost, the mapping goes on
                note_error(mapping, exc)
                return
            finally:
                with contextlib.suppress(pynng.NNGException):
                    context.close()
                slots.release()
            publish_reply(hub, mapping, request, answer)

        async with asyncio.TaskGroup() as tg:
            async for request in subscription:
                counters.received += 1
                native = mapping.request(request)
                if native is None:
                    continue
                await slots.acquire()
                body = codec.encode(native[0], native[1], config.frames, mapping.delimiter)
                tg.create_task(ask(request, body))


async def _readable(fd: int) -> None:
    """Waits until ``fd`` is readable (NNG's way of saying the socket can send)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


#: mapping sockets a restart hands over to the next run (no state of their run's)
_HANDED_OVER = frozenset({"sub0", "pull0", "pair0", "pair1", "pub0", "push0"})


class _Pipes:
    """Counts a socket's pipes for the mapping and the run that have the socket now
    (``attach``). NNG calls back on its own threads: the counting happens on the loop."""

    def __init__(self, sock: pynng.Socket, dials: tuple[str, ...]) -> None:
        self._loop = asyncio.get_running_loop()
        self.opened = self._loop.time()
        self.dials = dials
        self.dialed = 0  # pipes of its dialers
        self.mapping: Inbound | Outbound | None = None
        self.peers: PeerWatch | None = None
        sock.add_post_pipe_connect_cb(self._notify(+1))
        sock.add_post_pipe_remove_cb(self._notify(-1))

    def attach(self, mapping: Inbound | Outbound, peers: PeerWatch) -> None:
        self.mapping = mapping
        self.peers = peers

    def check_start(self) -> None:
        if self.dials and not self.dialed and self.peers is not None and self.mapping is not None:
            self.peers.down(self.mapping.name, f"cannot reach {', '.join(self.dials)}; redialing")

    def _changed(self, delta: int, dialer: bool) -> None:
        mapping, peers = self.mapping, self.peers
        if mapping is None or peers is None:
            return
        counters = mapping.counters
        counters.connected = max(0, counters.connected + delta)
        if dialer:
            self.dialed = max(0, self.dialed + delta)
            if self.dialed:
                peers.up(mapping.name)
            else:
                peers.down(mapping.name, "its peer went away; redialing")

    def _notify(self, delta: int) -> Callable[[pynng.Pipe], None]:
        loop, changed = self._loop, self._changed

        def callback(pipe: pynng.Pipe) -> None:
            try:
                dialer = pipe.dialer is not None
            except TypeError:  # pynng: "This pipe has no associated dialers."
                dialer = False
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(changed, delta, dialer)

        return callback


class _Reader:
    """The thread reading a receiving socket, for as long as the socket lives: it blocks
    in NNG's receive and hands each message to the inbox of the run that has the socket
    now (``attach``). Once that inbox closes (its run ended), it holds the message it
    took until the next run attaches its own: NNG's buffer fills meanwhile, then the
    peers wait. It ends when the socket closes (``stop``)."""

    def __init__(self, sock: pynng.Socket, name: str) -> None:
        self._sock = sock
        self._changed = threading.Condition(threading.Lock())
        self._inbox: Inbox[bytes] | None = None
        self._stopped = False
        self._held: bytes | None = None  # taken when the thread was stopped
        self._thread = threading.Thread(target=self._read, name=name, daemon=True)
        self._thread.start()

    def attach(self, inbox: Inbox[bytes]) -> None:
        with self._changed:
            self._inbox = inbox
            self._changed.notify_all()

    def detach(self) -> None:
        """The run ends: its inbox closes next."""
        with self._changed:
            self._inbox = None

    def stop(self) -> list[bytes]:
        """Ends the thread, once the socket is closed; the message it held, if any."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        self._thread.join(1.0)
        held, self._held = self._held, None
        return [] if held is None else [held]

    def _read(self) -> None:
        recv = self._sock.recv
        inbox: Inbox[bytes] | None = None
        while True:
            try:
                body = recv()
            except pynng.NNGException:  # closed
                return
            while inbox is None or not inbox.put(body, keep_if_closed=True):  # it closed
                inbox = self._next_inbox(inbox)
                if inbox is None:
                    self._held = body
                    return

    def _next_inbox(self, done: Inbox[bytes] | None) -> Inbox[bytes] | None:
        """The inbox of the run that has the socket now, once there is one other than
        ``done``; None when stopped."""
        with self._changed:
            while not self._stopped and (self._inbox is None or self._inbox is done):
                self._changed.wait()
            return None if self._stopped else self._inbox


class _Socket:
    """A mapping's socket with what goes with it across runs: the mapping's key
    (direction, name, config), the mapping of the run that has it, its pipes, its
    reading thread (a receiving socket, once read), the ipc files it listens on."""

    def __init__(
        self,
        key: tuple[str, str, Any],
        sock: pynng.Socket,
        mapping: Inbound | Outbound,
        pipes: _Pipes,
    ) -> None:
        self.key = key
        self.sock = sock
        self.mapping = mapping
        self.pipes = pipes
        self.reader: _Reader | None = None
        self.ipc_files: list[Path] = []

    def close(self, hub: HubClient | None = None) -> None:
        """Closes the socket for good; a receiving one first publishes (with ``hub``)
        what NNG has already taken in (``_stop_and_drain``) and what its thread held.
        What is in flight then (the peers' queues, TCP buffers) is lost with it."""
        reader, mapping = self.reader, self.mapping
        receiving = isinstance(mapping, Inbound) and mapping.config.socket != "rep0"
        left = []
        if receiving:
            left = _stop_and_drain(self.sock, mapping.config.high_water_mark)
        self.sock.close()  # the thread's receive ends (the tasks removed their readers)
        if reader is not None:
            left = [*reader.stop(), *left]  # the thread took its message first
        if hub is not None and left and isinstance(mapping, Inbound):
            take, decode = mapping.take, codec.decode
            for body in left:
                take(body, decode, hub)
        for path in self.ipc_files:
            with contextlib.suppress(OSError):
                if path.is_socket():
                    path.unlink()


class _Kept:
    """What a restarted run hands the next: its plain sockets (and its hub, for what
    they took in, should no run follow)."""

    def __init__(self, sockets: list[_Socket], hub: HubClient) -> None:
        self.sockets = sockets
        self.hub = hub

    def close(self) -> None:
        """No run follows (paused, removed, the gateway stops): closes the sockets as a
        run's end does."""
        for entry in self.sockets:
            entry.close(self.hub)
        self.sockets = []


def _stop_and_drain(sock: pynng.Socket, most: int) -> list[bytes]:
    """Closes the socket's listeners and dialers (their pipes with them: nothing more
    comes in) and takes, without waiting, what its receive buffer holds (at most
    ``most`` messages)."""
    for endpoint in [*sock.listeners, *sock.dialers]:
        with contextlib.suppress(pynng.NNGException, KeyError):
            endpoint.close()
    left: list[bytes] = []
    while len(left) < most:
        try:
            left.append(sock.recv(block=False))
        except pynng.NNGException:  # TryAgain: none left (or the socket is closed)
            break
    return left
