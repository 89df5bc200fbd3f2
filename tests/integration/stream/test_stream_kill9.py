"""``kill -9`` of the gateway while it publishes: every acknowledged message is in the log."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.components.support import wait_for
from tests.integration.persistence.test_kill9 import Publisher


def _start(tmp_path: Path, api_port: int, fsync: str) -> BrokerHandle:
    config = (
        f"persistence: sqlite\napi:\n  bind: 127.0.0.1:{api_port}\n  keys: ['{KEY}']\n"
        f"stream:\n  enabled: true\n  fsync: {fsync}\n  segment_bytes: 64KB\n"
        # The publisher keeps 50 QoS 1 PUBLISH unacknowledged: within Receive Maximum.
        "mqtt:\n  receive_maximum: 64\n"
    )
    return start_edgebus(tmp_path, config)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fsync", ["always", "interval"])
def test_sigkill_loses_no_acknowledged_message_from_the_log(tmp_path: Path, fsync: str) -> None:
    api_port = free_port()
    gateway = _start(tmp_path, api_port, fsync)
    try:
        publisher = Publisher(gateway, "k9/stream", window=50)  # the broker's kill -9 test's
        publisher.start()
        assert publisher.started_enough.wait(unit(60))
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(unit(10))
        publisher.join(unit(10))
    finally:
        gateway.stop()
    acked = publisher.acked
    assert len(acked) >= 300

    restarted = _start(tmp_path, api_port, fsync)
    try:
        http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))
        reply = wait_for(lambda: http.get("/api/v1/stream/offsets"), lambda r: r.status == 200)
        offsets = reply.json()
        reply = http.get(f"/api/v1/stream/records?limit={offsets['end'] + 1}")
        rows = [json.loads(line) for line in reply.text.splitlines()]
        # The log goes on after the kill: new messages take the next offsets.
        client = RawClient("127.0.0.1", restarted.port, protocol_level=5)
        client.send(mb.gen_connect("k9-after", proto_ver=5))
        assert client.recv_packet().reason_code == 0
        client.send(mb.gen_publish("k9/after", b"after", qos=1, mid=1, proto_ver=5))
        assert client.wait_for(lambda p: p.type == mb.PacketType.PUBACK).reason_code == 0x10
        after = http.get(f"/api/v1/stream/records?start={offsets['end']}").text.splitlines()
    finally:
        restarted.stop()
    assert [row["offset"] for row in rows] == list(range(offsets["end"]))  # no gap
    stored = [int(row["payload_json"]) for row in rows]
    assert set(acked) <= set(stored)  # every acknowledged message
    assert stored == list(range(1, len(stored) + 1))  # in order, none twice
    assert [json.loads(line)["offset"] for line in after] == [offsets["end"]]
