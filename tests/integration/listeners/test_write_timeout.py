"""``mqtt.write_timeout``: a client that stopped reading is closed once nothing it was
sent has drained for that long (``listeners.connections``).

Past ``mqtt.write_high_water`` the broker stops writing to a client and stops reading
from it (flow control). A client that reads nothing more would then hold its buffers,
queue and session for ever: with keep alive 0 nothing times it out, and with a keep
alive its own bytes, unread in the paused socket, keep it from expiring. Each test
fills a raw subscriber's socket (it reads nothing after its SUBACK) and waits, with a
generous deadline, for the broker to close it: its will goes out, the limit hit
``write_timeout`` is counted in ``/metrics``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY
from tests.integration.broker.support import wait_until
from tests.integration.components.support import http_of, metric
from tests.integration.listeners.pki import Pki

#: ``edgebus run`` runs uvloop when installed; their transports pause differently.
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
CONFIG = json.dumps(
    {
        "listeners": [{"type": "tcp", "name": "tcp", "bind": "127.0.0.1:0"}],
        "mqtt": {"write_high_water": "64KB", "write_timeout": "1s"},
        "api": {"keys": [KEY]},
    }
)


def stalled(gw: RunningGateway, client_id: str) -> bool | None:
    """None once the client's connection is gone; else whether its writes are paused."""

    def look() -> bool | None:
        for conn in gw.broker.connections:
            state = conn.session.state
            if state is not None and state.client_id == client_id:
                return not conn.session.writable
        return None

    return gw.call(look)


def fill(gw: RunningGateway, client_id: str, publisher: RawClient) -> None:
    """Publishes 32 KB QoS 0 messages until the broker stops writing to ``client_id``."""
    payload = bytes(32 * 1024)
    deadline = time.monotonic() + unit(20)
    sent = 0
    while not stalled(gw, client_id):
        assert time.monotonic() < deadline, f"{client_id} never paused after {sent} messages"
        for _ in range(10):
            publisher.send(mb.gen_publish("stall/t", payload))
            sent += 1


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize(
    ("keepalive", "ping"),
    [(0, False), (2, True)],
    ids=["keepalive-0", "keepalive-2-with-unread-pingreq"],
)
def test_a_client_that_reads_nothing_is_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, keepalive: int, ping: bool, loop: str
) -> None:
    """keepalive-0: nothing else would time it out. keepalive-2: its PINGREQ waits unread
    in the paused socket, which keeps its keep alive from expiring (it is not silent),
    for ever before ``write_timeout``. One INFO line says why it was closed."""
    caplog.set_level(logging.INFO, logger="broker_core.listeners.connections")
    with running_gateway(tmp_path, CONFIG, LOOPS[loop]) as gw:
        host, port = gw.address("tcp")
        with (
            RawClient(host, port) as watcher,
            RawClient(host, port) as publisher,
            RawClient(host, port) as stuck,
        ):
            # A small receive buffer (set before anything arrived): filled sooner.
            stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            watcher.do_connect("watcher", proto_ver=5)
            watcher.subscribe("stall/will", 0)
            publisher.do_connect("flooder", proto_ver=5)
            stuck.do_connect(
                "stuck",
                proto_ver=5,
                keepalive=keepalive,
                will_topic="stall/will",
                will_payload=b"gone",
            )
            stuck.subscribe("stall/t", 0)
            # From here the subscriber reads nothing.
            fill(gw, "stuck", publisher)
            if ping:
                stuck.send(mb.gen_pingreq())
            wait_until(lambda: stalled(gw, "stuck") is None, unit(20), "the stuck client closed")
            will = watcher.expect_packet(mb.PacketType.PUBLISH, unit(10))
            assert (will.topic, will.payload) == ("stall/will", b"gone")
            text = http_of(gw).get("/metrics").text
            assert metric(text, "edgebus_limit_hits_total", limit="write_timeout") == 1
            lines = [r for r in caplog.records if "mqtt.write_timeout" in r.getMessage()]
            assert [(r.levelno, "client stuck" in r.getMessage()) for r in lines] == [
                (logging.INFO, True)
            ]
            # The publisher and the other clients were not touched.
            publisher.ping()
            watcher.ping()


def ws_frame(payload: bytes) -> bytes:
    """One masked binary WebSocket frame (RFC 6455 5.2), as a client sends it."""
    mask = os.urandom(4)
    size = len(payload)
    head = bytes([0x82]) + (
        bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + size.to_bytes(2, "big")
    )
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_a_websocket_client_that_reads_nothing_is_closed(tmp_path: Path) -> None:
    """The same over ``ws``: the TCP transport under the WebSocket pauses, the MQTT
    connection on it times out."""
    config = json.loads(CONFIG)
    config["listeners"].append({"type": "ws", "name": "ws", "bind": "127.0.0.1:0"})
    with running_gateway(tmp_path, json.dumps(config)) as gw:
        host, port = gw.address("tcp")
        with (
            RawClient(host, port) as watcher,
            RawClient(host, port) as publisher,
            socket.create_connection(gw.address("ws"), timeout=unit(5)) as stuck,
        ):
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            watcher.do_connect("watcher", proto_ver=5)
            watcher.subscribe("stall/will", 0)
            publisher.do_connect("flooder", proto_ver=5)
            stuck.sendall(
                b"GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
            )
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = stuck.recv(1)  # the upgrade's answer only, not a byte more
                assert chunk, f"closed during the upgrade: {answer!r}"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 101"), answer
            connect = mb.gen_connect(
                "stuck", proto_ver=5, keepalive=0, will_topic="stall/will", will_payload=b"gone"
            )
            stuck.sendall(
                ws_frame(connect) + ws_frame(mb.gen_subscribe(1, "stall/t", 0, proto_ver=5))
            )
            # From here the subscriber reads nothing (its CONNACK and SUBACK included).
            wait_until(lambda: stalled(gw, "stuck") is not None, unit(10), "stuck connected")
            fill(gw, "stuck", publisher)
            wait_until(lambda: stalled(gw, "stuck") is None, unit(20), "the stuck client closed")
            will = watcher.expect_packet(mb.PacketType.PUBLISH, unit(10))
            assert (will.topic, will.payload) == ("stall/will", b"gone")
            text = http_of(gw).get("/metrics").text
            assert metric(text, "edgebus_limit_hits_total", limit="write_timeout") == 1
            publisher.ping()


def slow_reader(gw: RunningGateway, kind: str, pki: Pki) -> tuple[socket.socket, Any]:
    """A raw socket to ``gw``'s ``kind`` listener with a 4 KB receive buffer (set before
    anything arrived) and a function sending MQTT bytes on it (in WebSocket frames on
    ``ws``). The socket is read raw: its MQTT packets are not looked at."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(unit(5))
    sock.connect(gw.address(kind))
    if kind == "tls":
        sock = pki.client_context().wrap_socket(sock, server_hostname="127.0.0.1")
    if kind != "ws":
        return sock, sock.sendall
    sock.sendall(
        b"GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(1)
        assert chunk, f"closed during the upgrade: {answer!r}"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock, lambda data: sock.sendall(ws_frame(data))


# tcp on both loops, tls and ws each on one (12 s a case: the suite's time)
@pytest.mark.parametrize(
    ("kind", "loop"), [("tcp", "asyncio"), ("tcp", "uvloop"), ("tls", "uvloop"), ("ws", "asyncio")]
)
def test_a_slow_but_steady_reader_is_not_cut_until_it_stops(
    tmp_path: Path, pki: Pki, kind: str, loop: str
) -> None:
    """A subscriber with a 4 KB receive buffer that reads (up to 16 KB) four times a
    second under a flooding publisher (about 32 KB/s here): the broker's own write
    buffer does not move (the kernel's send buffer, autotuned to megabytes, takes the
    broker's bytes only once a large part of it is free: tens of seconds at that pace),
    but the kernel's bytes not yet acknowledged by the client fall from sweep to sweep.
    It is not cut while it reads (3 times ``write_timeout``); once it stops it is.
    Before the kernel's count was looked at, it was cut while reading. Over TLS and
    WebSocket the count is the TCP socket's below them."""
    config = json.loads(CONFIG)
    config["mqtt"]["write_timeout"] = "3s"
    tls = {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key)}
    config["listeners"] += [
        {"type": "tls", "name": "tls", "bind": "127.0.0.1:0", "tls": tls},
        {"type": "ws", "name": "ws", "bind": "127.0.0.1:0"},
    ]
    with running_gateway(tmp_path, json.dumps(config), LOOPS[loop]) as gw:
        sock, send = slow_reader(gw, kind, pki)
        with RawClient(*gw.address("tcp")) as publisher, sock:
            publisher.do_connect("flooder", proto_ver=5)
            send(mb.gen_connect("slow", proto_ver=5, keepalive=0))
            send(mb.gen_subscribe(1, "stall/t", 0, proto_ver=5))
            # Until it is paused it is sent more than it reads (the SUBSCRIBE's answer
            # included): publishes before the subscription are lost, fill goes on.
            fill(gw, "slow", publisher)
            stop = threading.Event()

            def flood() -> None:  # 1 KB messages, about 400 a second, until stopped
                message = mb.gen_publish("stall/t", bytes(1024))
                while not stop.is_set():
                    for _ in range(40):
                        publisher.send(message)
                    stop.wait(0.1)

            flooder = threading.Thread(target=flood, daemon=True)
            flooder.start()
            try:
                reading_until = time.monotonic() + 3 * 3.0
                while time.monotonic() < reading_until:
                    assert sock.recv(16384), "the slow reader was closed while reading"
                    assert stalled(gw, "slow") is not None, "the slow reader was cut"
                    time.sleep(0.25)
                text = http_of(gw).get("/metrics").text
                assert metric(text, "edgebus_limit_hits_total", limit="write_timeout") == 0
                # From here it reads nothing: it is cut.
                wait_until(lambda: stalled(gw, "slow") is None, unit(20), "the slow reader cut")
                text = http_of(gw).get("/metrics").text
                assert metric(text, "edgebus_limit_hits_total", limit="write_timeout") == 1
            finally:
                stop.set()
                flooder.join(unit(10))
            publisher.ping()
