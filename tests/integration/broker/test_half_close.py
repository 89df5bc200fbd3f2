"""A client that bursts QoS 0 PUBLISH packets, sends DISCONNECT and half-closes its socket
(``shutdown(SHUT_WR)``): every PUBLISH that reached the broker before the EOF is routed.

The burst is larger than the read budget, so part of it waits in the connection's
backlog (or, rate-limited, behind the publish-rate bucket) when the EOF arrives. uvloop
hands a connection several reads, EOF included, before a paused read takes effect,
which is how the EOF overtook the backlog; asyncio's own loop is checked too.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
TOPIC = "burst/t"


def _count_publishes(sock: socket.socket, expected: int, timeout: float) -> int:
    """Reads until ``expected`` PUBLISH packets arrived or ``timeout`` passed; the count."""
    deadline = time.monotonic() + timeout
    buffer = b""
    count = 0
    while count < expected:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        buffer += chunk
        pos = 0
        while len(buffer) - pos >= 2:
            try:
                length, end = mb.decode_varint(buffer, pos + 1)
            except mb.ParseError:  # the rest of the header is still on its way
                break
            if end + length > len(buffer):
                break
            if buffer[pos] >> 4 == mb.PacketType.PUBLISH:
                count += 1
            pos = end + length
        buffer = buffer[pos:]
    return count


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize(
    ("config", "count"),
    [
        ("", 20_000),  # over the read budget (64 KiB): a backlog at EOF
        ("  publish_rate: 20000\n  publish_burst: 100\n", 4_000),  # held by the rate
    ],
    ids=["read_budget", "publish_rate"],
)
def test_a_half_closing_publisher_loses_nothing_it_sent(
    tmp_path: Path, loop: str, config: str, count: int
) -> None:
    config_yaml = (
        "api:\n  enabled: false\nmqtt:\n  max_queued_messages: 1000000\n"
        "  max_queued_bytes: 1GB\n" + config
    )
    with running_gateway(tmp_path, config_yaml, LOOPS[loop]) as gw:
        host, port = gw.address()
        with RawClient(host, port) as subscriber, RawClient(host, port) as publisher:
            subscriber.do_connect("burst-sub")
            subscriber.subscribe(TOPIC, 0)
            publisher.do_connect("burst-pub")
            frame = mb.gen_publish(TOPIC, b"0123456789abcdef")
            publisher.send(frame * count + mb.gen_disconnect())
            publisher.sock.shutdown(socket.SHUT_WR)
            received = _count_publishes(subscriber.sock, count, unit(30))
    assert received == count
