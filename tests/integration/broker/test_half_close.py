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
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient, count_publishes
from tests.helpers.timeouts import unit

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
TOPIC = "burst/t"


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
            received = count_publishes(subscriber.sock, count, unit(30))
    assert received == count
