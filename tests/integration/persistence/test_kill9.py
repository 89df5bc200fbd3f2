"""Nothing acknowledged is lost: SIGKILL the broker in the middle of a QoS 1 stream.

A persistent session (MQTT 5, session expiry 1 h) subscribes at QoS 1. A publisher
streams numbered QoS 1 messages and records every PUBACK. The broker process is killed
with SIGKILL while the stream runs, restarted on the same data directory, and the
subscriber reconnects: every message the broker acknowledged must reach it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

SESSION = {"session_expiry_interval": 3600}
PERSISTENCE = "persistence: sqlite"


def subscriber_session(broker: BrokerHandle, topic_filter: str, clean: bool) -> RawClient:
    client = RawClient(broker.host, broker.port, protocol_level=5)
    client.send(mb.gen_connect("k9-sub", proto_ver=5, clean_session=clean, properties=SESSION))
    connack = client.recv_packet()
    assert connack.type == mb.PacketType.CONNACK
    assert connack.reason_code == 0
    return client


class Publisher(threading.Thread):
    """Publishes numbered QoS 1 messages with a window; records what was acknowledged."""

    def __init__(self, broker: BrokerHandle, topic: str, window: int = 20) -> None:
        super().__init__(daemon=True)
        self.client = RawClient(broker.host, broker.port, protocol_level=5)
        self.client.send(mb.gen_connect("k9-pub", proto_ver=5))
        assert self.client.recv_packet().reason_code == 0
        self.topic = topic
        self.window = window
        self.acked: set[int] = set()
        self.started_enough = threading.Event()

    def run(self) -> None:
        inflight: dict[int, int] = {}
        seq = 0
        try:
            while True:
                while len(inflight) < self.window:
                    seq += 1
                    mid = (seq % 65535) + 1
                    inflight[mid] = seq
                    self.client.send(
                        mb.gen_publish(self.topic, str(seq), qos=1, mid=mid, proto_ver=5)
                    )
                packet = self.client.recv_packet(unit(5))
                if packet.type == mb.PacketType.PUBACK and packet.packet_id in inflight:
                    assert packet.reason_code in (0, 0x10)
                    self.acked.add(inflight.pop(packet.packet_id))
                    if len(self.acked) >= 300:
                        self.started_enough.set()
        except (AssertionError, OSError, TimeoutError):
            return  # the broker was killed


@pytest.mark.timeout(120)
def test_sigkill_mid_stream_loses_no_acknowledged_message(tmp_path: Path) -> None:
    broker = start_edgebus(tmp_path, PERSISTENCE)
    sub = subscriber_session(broker, "k9/#", clean=True)
    sub.send(mb.gen_subscribe(1, "k9/#", 1, proto_ver=5))
    assert sub.recv_packet().type == mb.PacketType.SUBACK
    sub.send(mb.gen_disconnect(0, proto_ver=5))
    sub.close()

    publisher = Publisher(broker, "k9/stream")
    publisher.start()
    assert publisher.started_enough.wait(unit(30))
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(unit(10))
    publisher.join(unit(10))
    acked = set(publisher.acked)
    assert len(acked) >= 300

    restarted = start_edgebus(tmp_path, PERSISTENCE)
    try:
        sub = subscriber_session(restarted, "k9/#", clean=False)
        received: set[int] = set()
        while not acked <= received:
            packet = sub.recv_packet(unit(10))
            if packet.type == mb.PacketType.PUBLISH:
                received.add(int(packet.payload))
                if packet.qos:
                    sub.send(mb.gen_puback(packet.packet_id, proto_ver=5))
        assert acked - received == set()
        sub.close()
    finally:
        restarted.stop()
        broker.stop()


@pytest.mark.timeout(120)
def test_sigkill_with_the_subscriber_online_and_messages_in_flight(tmp_path: Path) -> None:
    """The subscriber is connected and reading (receive maximum 5, so many messages wait
    in flight or queued) when the broker dies; after the restart it gets the rest."""
    broker = start_edgebus(tmp_path, PERSISTENCE)
    sub = RawClient(broker.host, broker.port, protocol_level=5)
    sub.send(
        mb.gen_connect(
            "k9-live", proto_ver=5, clean_session=True, properties={**SESSION, "receive_maximum": 5}
        )
    )
    assert sub.recv_packet().reason_code == 0
    sub.send(mb.gen_subscribe(1, "k9live/#", 1, proto_ver=5))
    assert sub.recv_packet().type == mb.PacketType.SUBACK

    publisher = Publisher(broker, "k9live/stream")
    publisher.start()
    received: set[int] = set()
    while not publisher.started_enough.is_set():
        packet = sub.recv_packet(unit(10))
        if packet.type == mb.PacketType.PUBLISH:
            received.add(int(packet.payload))
            sub.send(mb.gen_puback(packet.packet_id, proto_ver=5))
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(unit(10))
    publisher.join(unit(10))
    sub.close()
    acked = set(publisher.acked)

    restarted = start_edgebus(tmp_path, PERSISTENCE)
    try:
        sub = RawClient(restarted.host, restarted.port, protocol_level=5)
        sub.send(mb.gen_connect("k9-live", proto_ver=5, clean_session=False, properties=SESSION))
        connack = sub.recv_packet()
        assert connack.session_present is True
        while not acked <= received:
            packet = sub.recv_packet(unit(10))
            if packet.type == mb.PacketType.PUBLISH:
                received.add(int(packet.payload))
                sub.send(mb.gen_puback(packet.packet_id, proto_ver=5))
        assert acked - received == set()
        sub.close()
    finally:
        restarted.stop()
        broker.stop()
