"""The hub publishes through the broker's one publish policy, no-local by origin costs no
queue place, taps never break routing, and ``publish_safe`` resolves once durable."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.context import Context
from gateway.components import BatchWriter
from gateway.hub import HubClient
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

ACL = """
acl:
  rules:
    - {permission: deny, action: publish, clientid: "zmq:floor", topics: ["secret/#"]}
"""


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, ACL) as gateway:
        yield gateway


def _client(gw: RunningGateway, protocol: str = "zmq", name: str = "floor") -> HubClient:
    return gw.call(lambda: gw.gateway.hub.client(protocol, name))


def _subscriber(gw: RunningGateway, topic_filter: str) -> RawClient:
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.send(mb.gen_connect(f"watch-{time.monotonic_ns()}", proto_ver=5))
    assert client.recv_packet().reason_code == 0
    client.send(mb.gen_subscribe(1, topic_filter, 1, proto_ver=5))
    client.recv_packet()
    return client


def _publish(gw: RunningGateway, client: HubClient, topic: str, **kw: Any) -> bool:
    return gw.call(lambda: client.publish(client.context(topic, b"p", **kw)))


def test_sys_delayed_and_acl_are_the_mqtt_publish_policy(gw: RunningGateway) -> None:
    hub = _client(gw)
    counters = gw.broker.counters
    watcher = _subscriber(gw, "#")
    sys_watcher = _subscriber(gw, "$SYS/#")

    assert _publish(gw, hub, "$SYS/fake") is False  # $SYS belongs to the broker
    assert _publish(gw, hub, "secret/plans") is False  # the ACL, for zmq:floor
    assert _publish(gw, hub, "$delayed/1/$SYS/fake") is False  # never $SYS, even later
    assert _publish(gw, hub, "$delayed/x/oops") is False
    assert gw.call(lambda: (counters.publish_denied, hub.denied, hub.published)) == (4, 4, 4)
    watcher.expect_no_packet(unit(0.3))
    sys_watcher.expect_no_packet(unit(0.3))

    started = time.monotonic()
    assert _publish(gw, hub, "$delayed/1/later/on", qos=1) is True
    assert _publish(gw, hub, "now/here") is True
    assert watcher.recv_publish(unit(5)).topic == "now/here"
    later = watcher.recv_publish(unit(5))
    assert later.topic == "later/on"
    assert time.monotonic() - started >= 0.9
    assert gw.call(lambda: (counters.publish_denied, hub.denied)) == (4, 4)


def test_no_local_by_origin_takes_no_queue_place(gw: RunningGateway) -> None:
    hub = _client(gw)
    subscription = gw.call(lambda: hub.subscribe("loop/#", maxsize=1))
    for number in range(5):
        assert _publish(gw, hub, f"loop/{number}") is True
    assert gw.call(lambda: (subscription.depth, subscription.dropped)) == (0, 0)
    other = _client(gw, "nng", "other")
    assert _publish(gw, other, "loop/from-other") is True
    got = gw.call(lambda: subscription._local.get_nowait())
    assert got is not None
    assert (got.topic, got.origin.protocol) == ("loop/from-other", "nng")
    assert gw.call(lambda: hub.stats()["dropped"]) == 0


def test_a_failing_tap_is_counted_and_routing_goes_on(gw: RunningGateway) -> None:
    tapper = _client(gw, "bridge", "cloud")
    seen: list[str] = []

    def explode(context: Context) -> None:
        seen.append(context.topic)
        raise ValueError("the tap's own bug")

    gw.call(lambda: tapper.tap("t/#", callback=explode))
    watcher = _subscriber(gw, "t/#")
    pub = RawClient("127.0.0.1", gw.port, protocol_level=5)
    pub.send(mb.gen_connect("tap-pub", proto_ver=5))
    assert pub.recv_packet().reason_code == 0
    pub.send(mb.gen_publish("t/1", b"x", qos=1, mid=1, proto_ver=5))
    ack = pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
    assert (ack.packet_id, ack.reason_code) == (1, 0)
    assert watcher.recv_publish(unit(5)).topic == "t/1"
    assert gw.call(lambda: tapper.stats()) == {
        "published": 0,
        "denied": 0,
        "dropped": 0,
        "queue_depth": 0,
        "handover_dropped": 0,
        "tapped": 1,
        "tap_errors": 1,
        "too_large": 0,
    }
    assert seen == ["t/1"]
    # The tap never sees what its own client publishes (no local by origin).
    assert _publish(gw, tapper, "t/own") is True
    assert watcher.recv_publish(unit(5)).topic == "t/own"
    assert seen == ["t/1"]


def test_publish_safe_resolves_after_the_durable_taps_wrote(gw: RunningGateway) -> None:
    written: list[str] = []

    def write(items: list[str]) -> None:
        time.sleep(0.05)  # a disk that takes its time
        written.extend(items)

    async def scenario() -> tuple[list[int], list[int], list[str]]:
        writer: BatchWriter[str] = BatchWriter(write, "test-writer")
        store = gw.gateway.hub.client("bridge", "queue")
        store.tap("safe/#", callback=lambda context: writer.append(context.topic), durable=writer)
        source = gw.gateway.hub.client("zmq", "source")
        order: list[int] = []
        written_then: list[int] = []

        def safe(number: int) -> Any:
            def done(code: int) -> None:
                assert code == 0
                order.append(number)
                written_then.append(len(written))

            return done

        for number in range(5):
            source.publish(source.context(f"safe/{number}", b"x", 1), on_safe=safe(number))
        code = await source.publish_safe(source.context("$SYS/no", b"x", 1))
        assert code == 0x87
        assert await source.publish_safe(source.context("nobody/listens", b"x", 1)) == 0x10
        store.close()
        writer.close()
        return order, written_then, list(written)

    order, written_then, stored = asyncio.run_coroutine_threadsafe(scenario(), gw.loop).result(
        unit(10)
    )
    assert order == [0, 1, 2, 3, 4]
    assert all(count >= number + 1 for number, count in enumerate(written_then))
    assert stored == [f"safe/{number}" for number in range(5)]
