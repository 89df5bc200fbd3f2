"""Durable taps: a publisher's PUBACK means "in the tap's store", even across a kill -9."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from gateway.components import ADAPTER
from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.components import read_tap_store, registered  # noqa: F401
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.components.support import API, status_of, wait_for

TAPSTORE = """
adapters:
  - type: test-tapstore
    name: store
    topics: ["tap/#"]
"""


def _client(port: int, client_id: str) -> RawClient:
    client = RawClient("127.0.0.1", port, protocol_level=5)
    client.send(mb.gen_connect(client_id, proto_ver=5))
    assert client.recv_packet().reason_code == 0
    return client


@pytest.mark.parametrize("persistence", ["memory", "sqlite"])
@pytest.mark.usefixtures("registered")
def test_every_puback_comes_after_the_message_is_in_the_tap_store(
    tmp_path: Path, persistence: str
) -> None:
    # 500 QoS 1 PUBLISH in flight below: within Receive Maximum (MQTT 5.0 3.3.4).
    config = API + TAPSTORE + f"persistence: {persistence}\nmqtt:\n  receive_maximum: 1000\n"
    with running_gateway(tmp_path, config) as gw:
        wait_for(lambda: status_of(gw, ADAPTER, "store")["state"], lambda s: s == "running")
        path = tmp_path / "data" / "adapter" / "store" / "tap.db"
        pub = _client(gw.port, "tap-pub")
        for number in range(1, 21):
            pub.send(mb.gen_publish("tap/one", str(number), qos=1, mid=number, proto_ver=5))
            ack = pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
            assert (ack.packet_id, ack.reason_code) == (number, 0)  # the tap is a subscriber
            assert read_tap_store(path)[-1] == ("tap/one", str(number).encode())
        # A window of 100 in flight: acknowledged in order, all stored in order.
        for number in range(21, 521):
            pub.send(mb.gen_publish("tap/many", str(number), qos=1, mid=number, proto_ver=5))
        acks = [pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK) for _ in range(500)]
        assert [ack.packet_id for ack in acks] == list(range(21, 521))
        # Not tapped: the tap's filters do not match, and QoS 0 is stored too.
        pub.send(mb.gen_publish("elsewhere", b"x", qos=1, mid=600, proto_ver=5))
        pub.send(mb.gen_publish("tap/zero", b"0", qos=0, proto_ver=5))
        pub.send(mb.gen_publish("tap/last", b"last", qos=1, mid=601, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 600
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 601
        stored = read_tap_store(path)
        assert [int(p) for _, p in stored[:520]] == list(range(1, 521))
        assert stored[520:] == [("tap/zero", b"0"), ("tap/last", b"last")]
        stats = status_of(gw, ADAPTER, "store")["stats"]
        assert (stats["tapped"], stats["tap_errors"]) == (522, 0)
    # A clean shutdown gives the component its stop(): the store is complete and closed.
    assert len(read_tap_store(path)) == 522


class _Publisher(threading.Thread):
    """Numbered QoS 1 messages with a window of 20; records what was acknowledged."""

    def __init__(self, broker: BrokerHandle) -> None:
        super().__init__(daemon=True)
        self.client = _client(broker.port, "k9-tap-pub")
        self.acked: list[int] = []
        self.enough = threading.Event()

    def run(self) -> None:
        inflight: dict[int, int] = {}
        number = 0
        try:
            while True:
                while len(inflight) < 20:
                    number += 1
                    mid = number % 65535 + 1
                    inflight[mid] = number
                    self.client.send(
                        mb.gen_publish("tap/k9", str(number), qos=1, mid=mid, proto_ver=5)
                    )
                packet = self.client.recv_packet(unit(5))
                if packet.type == mb.PacketType.PUBACK and packet.packet_id in inflight:
                    assert packet.reason_code in (0, 0x10)
                    self.acked.append(inflight.pop(packet.packet_id))
                    if len(self.acked) >= 300:
                        self.enough.set()
        except (AssertionError, OSError, TimeoutError):
            return  # the gateway was killed


def _start(tmp_path: Path, persistence: str, api_port: int) -> BrokerHandle:
    extra = (
        TAPSTORE
        + f"persistence: {persistence}\napi:\n  bind: 127.0.0.1:{api_port}\n  keys: ['{KEY}']\n"
    )
    return start_edgebus(tmp_path, extra, main="tests.helpers.component_gateway")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("persistence", ["memory", "sqlite"])
def test_sigkill_loses_no_acknowledged_message_from_the_tap_store(
    tmp_path: Path, persistence: str
) -> None:
    api_port = free_port()
    gateway = _start(tmp_path, persistence, api_port)
    try:
        publisher = _Publisher(gateway)
        publisher.start()
        assert publisher.enough.wait(unit(30))
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(unit(10))
        publisher.join(unit(10))
    finally:
        gateway.stop()
    acked = publisher.acked
    assert len(acked) >= 300
    assert acked == sorted(acked)  # PUBACKs in publish order

    restarted = _start(tmp_path, persistence, api_port)
    try:
        http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))
        reply = wait_for(
            lambda: http.get("/api/v1/test-tapstore/store/messages"), lambda r: r.status == 200
        )
        stored = [int(item["payload"]) for item in reply.json()]
    finally:
        restarted.stop()
    assert set(acked) <= set(stored)
    assert stored == list(range(1, len(stored) + 1))  # in order, no gap, nothing twice
