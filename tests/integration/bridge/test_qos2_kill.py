"""QoS 2 through a bridge whose gateway is killed with SIGKILL mid-stream, twice, and
started again: every message arrives exactly once at the remote's subscriber.

After PUBREC the bridge sends PUBREL, and a resumed session must go on with PUBREL,
never the PUBLISH again (MQTT 5.0 4.3.3, 4.4): the remote, mosquitto here, forgets a
Packet Identifier once it answered the PUBREL, and takes a PUBLISH sent again with it
for a new message. The released state is on disk before the PUBREL goes out, so the
gateway started again finds it. (bridge/qos2_release.py's module docstring;
tests/unit/bridge/test_qos2_release.py drives the same without processes.)

The remote keeps the bridge's session (``clean_start: false``: MQTT 3.1.1 persistent
session, MQTT 5 session expiry) and is never restarted; its subscriber takes QoS 2 and
counts every payload.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.bridge.qos2 import QOS2_WINDOW, drained, numbers
from tests.integration.bridge.support import Collector, Remote, StreamPublisher, wait_until

TOTAL = 6_000


def _bridge(remote: Remote, version: str, api_port: int) -> str:
    session = "    connect_properties: {session_expiry_interval: 1h}\n" if version == "5" else ""
    return f"""
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    protocol_version: "{version}"
    client_id: gw-qos2-kill
    clean_start: false
    keepalive: 2s
    reconnect_backoff: 100ms
    reconnect_backoff_max: 500ms
{session}    forwards: [{{local: "stream/#", remote: "cloud/stream", qos: 2}}]
api:
  bind: 127.0.0.1:{api_port}
  keys: ['{KEY}']
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_sigkill_mid_stream_of_qos2_delivers_every_message_exactly_once(
    tmp_path: Path, version: str
) -> None:
    api_port = free_port()
    http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))

    def depth() -> int:
        try:
            reply = http.get("/api/v1/bridges/cloud")
        except OSError:  # not up yet, or just killed
            return -1
        return reply.json()["stats"].get("queue_depth", -1) if reply.status == 200 else -1

    remote = Remote(tmp_path / "remote")
    with remote:  # the subscriber's session waits at the remote, down while the queue fills
        Collector(remote.port, "cloud/#", "cloud-sub", qos=2).close()
    config = _bridge(remote, version, api_port)
    gateway: BrokerHandle = start_edgebus(tmp_path / "gateway", config)
    cloud: Collector | None = None
    try:
        publisher = StreamPublisher(gateway.port, "stream/x", TOTAL, qos=2, window=QOS2_WINDOW)
        publisher.start()
        assert sorted(publisher.done(120)) == list(range(1, TOTAL + 1))
        assert wait_until(depth, lambda d: d == TOTAL) == TOTAL
        remote.start()
        cloud = Collector(remote.port, "cloud/#", "cloud-sub", qos=2)
        # Killed twice in the middle of the drain, QoS 2 messages in every state of
        # their flow at the remote each time.
        for left in (TOTAL * 2 // 3, TOTAL // 3):
            wait_until(depth, lambda d, left=left: 0 <= d <= left, seconds=120)  # type: ignore[misc]
            gateway.process.send_signal(signal.SIGKILL)
            gateway.process.wait(10)
            gateway.stop()
            gateway = start_edgebus(tmp_path / "gateway", config)
        wait_until(depth, lambda d: d == 0, seconds=120)
        drained(cloud, remote.port, "cloud/end")
    finally:
        gateway.stop()
        if cloud is not None:
            cloud.close()
        remote.stop()
    got = numbers(cloud)
    twice = sorted(number for number, count in Counter(got).items() if count > 1)
    assert twice == []
    assert sorted(got) == list(range(1, TOTAL + 1))
