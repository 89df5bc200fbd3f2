"""The ``nng`` adapter: NNG sockets mapped to MQTT topics, both ways (pynng).

One socket per mapping.

- **NNG -> MQTT** (``sub0``, ``pull0``, ``pair``): a thread per mapping blocks in NNG's
  receive and hands each message to the loop through the host's inbox (``block``
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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
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
        self._sockets: list[pynng.Socket] = []
        self._timers: list[asyncio.TimerHandle] = []

    # -- the component -----------------------------------------------------------------

    async def run(self, hub: HubClient, host: Host) -> None:
        peers = PeerWatch(host)
        try:
            inbound = [(m, self._open(m, peers)) for m in self.inbound]
            outbound = [(m, self._open(m, peers)) for m in self.outbound]
            with first_error():
                async with asyncio.TaskGroup() as tg:
                    for m_in, sock in inbound:
                        tg.create_task(self._serve_inbound(hub, host, m_in, sock))
                    for m_out, sock in outbound:
                        tg.create_task(self._serve_outbound(hub, m_out, sock))
                    peers.start()  # ready(), or degraded while a dialer has no peer yet
        finally:
            peers.stop()
            self._close()

    # -- sockets -------------------------------------------------------------------------

    def _open(self, mapping: Inbound | Outbound, peers: PeerWatch) -> pynng.Socket:
        config: Any = mapping.config
        name = mapping.name
        sock = _TYPES[config.socket]()
        self._sockets.append(sock)
        for option in ("recv_buffer_size", "send_buffer_size"):
            with contextlib.suppress(pynng.NotSupported):  # sub0 cannot send, ...
                setattr(sock, option, config.high_water_mark)
        sock.reconnect_time_min = 100
        sock.reconnect_time_max = 5000
        if config.socket == "sub0":
            for prefix in config.subscribe:
                sock.subscribe(prefix.encode())
        connect, bind = config.urls()
        self._watch_pipes(sock, mapping, peers, connect)
        for url in bind:
            try:
                sock.listen(url)
            except pynng.NNGException as exc:
                raise AdapterConnectionError(f"{name}: cannot listen on {url}: {exc}") from exc
            self.bound(url)
            log.info("nng %s: %s %s listening on %s", self.config.name, name, config.socket, url)
        for url in connect:
            try:
                sock.dial(url, block=False)  # NNG keeps redialing in the background
            except pynng.NNGException as exc:
                raise AdapterConnectionError(f"{name}: cannot dial {url}: {exc}") from exc
        return sock

    def _watch_pipes(
        self,
        sock: pynng.Socket,
        mapping: Inbound | Outbound,
        peers: PeerWatch,
        dials: tuple[str, ...],
    ) -> None:
        """Counts the socket's pipes; a dialing socket without one (after a second's
        grace at start) degrades the host. NNG calls back on its own threads: the
        counting happens on the loop."""
        loop = asyncio.get_running_loop()
        counters = mapping.counters
        dialed = [0]

        def check_start() -> None:
            if dials and dialed[0] == 0:
                peers.down(mapping.name, f"cannot reach {', '.join(dials)}; redialing")

        def changed(delta: int, dialer: bool) -> None:
            counters.connected = max(0, counters.connected + delta)
            if dialer:
                dialed[0] = max(0, dialed[0] + delta)
                if dialed[0]:
                    peers.up(mapping.name)
                else:
                    peers.down(mapping.name, "its peer went away; redialing")

        def notify(delta: int) -> Callable[[pynng.Pipe], None]:
            def callback(pipe: pynng.Pipe) -> None:
                try:
                    dialer = pipe.dialer is not None
                except TypeError:  # pynng: "This pipe has no associated dialers."
                    dialer = False
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(changed, delta, dialer)

            return callback

        sock.add_post_pipe_connect_cb(notify(+1))
        sock.add_post_pipe_remove_cb(notify(-1))
        self._timers.append(loop.call_later(1.0, check_start))

    def _close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for sock in self._sockets:  # the tasks removed their descriptors' readers
            sock.close()
        self.remove_ipc_files()

    # -- NNG -> MQTT ---------------------------------------------------------------------

    async def _serve_inbound(
        self, hub: HubClient, host: Host, mapping: Inbound, sock: pynng.Socket
    ) -> None:
        if mapping.config.socket != "rep0":
            await self._receive(hub, host, mapping, sock)
            return

        async def serve(pending: PendingReplies, response_topic: str) -> None:
            async with asyncio.TaskGroup() as tg:
                for _ in range(mapping.config.max_inflight):
                    tg.create_task(self._front(hub, mapping, sock, pending, response_topic))

        await self.serve_front(hub, mapping, serve)

    async def _receive(
        self, hub: HubClient, host: Host, mapping: Inbound, sock: pynng.Socket
    ) -> None:
        """``sub0`` / ``pull0`` / ``pair``: every message published to MQTT.

        A thread of the mapping's own blocks in NNG's receive and hands the messages to
        the loop through the host's inbox (``block``: a full inbox makes the thread
        wait, and NNG's buffers, then the peers, wait with it: nothing is dropped)."""
        take, decode, publish, origin = mapping.take, codec.decode, hub.publish, hub.origin

        def handle(body: bytes) -> None:
            take(body, decode, publish, origin)

        inbox: Inbox[bytes] = host.inbox(mapping.config.high_water_mark, BLOCK, callback=handle)

        def read() -> None:
            recv = sock.recv
            put = inbox.put
            while True:
                try:
                    body = recv()
                except pynng.NNGException:  # closed: the run ends
                    return
                if not put(body):
                    return

        thread = threading.Thread(target=read, name=f"nng-{mapping.name}", daemon=True)
        thread.start()
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled
        finally:
            # The run ends (a restart, a reload, a stop): no new pipe, no new message;
            # what NNG has already taken in is published before the socket closes.
            # What is still in flight (the peers' queues, TCP buffers) is lost with it.
            left = _stop_and_drain(sock, mapping.config.high_water_mark)
            inbox.close()  # callback mode: what waits in it is handled now
            for body in left:
                handle(body)

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
