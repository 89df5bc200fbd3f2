"""SIGHUP re-reads mappings and the ACL without dropping clients."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

ADAPTER = """
persistence: memory
adapters:
  - type: loopback
    name: rename
    mappings:
      - source: in/{{x}}
        target: {target}/{{x}}
"""


def test_sighup_applies_new_mappings_and_acl_while_clients_stay(tmp_path: Path) -> None:
    broker = start_edgebus(tmp_path, ADAPTER.format(target="first"))
    try:
        client = RawClient(broker.host, broker.port, protocol_level=5)
        client.send(mb.gen_connect("stays", proto_ver=5))
        assert client.recv_packet().reason_code == 0
        client.send(mb.gen_subscribe(1, "+/+", 0, proto_ver=5))
        client.recv_packet()
        client.send(mb.gen_publish("in/a", b"1", proto_ver=5))
        got = {client.recv_publish(unit(5)).topic for _ in range(2)}
        assert got == {"in/a", "first/a"}

        config = tmp_path / "cfg.yaml"
        text = config.read_text().replace("first/{x}", "second/{x}")
        text += "acl:\n  rules:\n    - {permission: deny, action: publish, topics: ['blocked/#']}\n"
        config.write_text(text)
        broker.process.send_signal(signal.SIGHUP)

        deadline = time.monotonic() + unit(10)
        while True:
            client.send(mb.gen_publish("in/b", b"2", proto_ver=5))
            topics = {p.topic for p in client.collect(unit(0.3)) if p.type == mb.PacketType.PUBLISH}
            if "second/b" in topics:
                break
            assert time.monotonic() < deadline, topics
        client.send(mb.gen_publish("blocked/x", b"3", qos=1, mid=9, proto_ver=5))
        ack = client.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
        assert ack.reason_code == 0x87
        client.ping()  # the same connection all along
    finally:
        broker.stop()


def test_a_broken_file_on_sighup_changes_nothing(tmp_path: Path) -> None:
    broker = start_edgebus(tmp_path, ADAPTER.format(target="first"))
    try:
        config = tmp_path / "cfg.yaml"
        config.write_text(config.read_text() + "mqtt:\n  max_qos: 7\n")
        broker.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + unit(5)
        while "reload refused" not in broker.log_tail():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "mqtt.max_qos" in broker.log_tail()
        client = RawClient(broker.host, broker.port, protocol_level=5)
        client.send(mb.gen_connect("after", proto_ver=5))
        assert client.recv_packet().reason_code == 0
        assert broker.process.poll() is None
    finally:
        broker.stop()
