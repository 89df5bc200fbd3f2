"""A bridge whose queue cannot be written because the disk is full recovers by itself once
there is room again, with every acknowledged message, and calls nothing damaged.

``edgebus run`` with its data directory on a small tmpfs, a mosquitto as the remote
(down while the queue fills), an MQTT publisher on a socket. The disk is filled while
the queue holds acknowledged messages in its write-ahead log: the bridge's next write
fails (its publishers are refused, 0x80), and so does the checkpoint of its close, which
leaves the file shorter than its header counts, the missing pages in the log. Space
freed, the bridge must take its queue back within its restart backoff, without a
restart of the gateway, without a salvage, and the remote must get every message a
PUBACK acknowledged.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.small_fs import fill, small_filesystem
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    bridge_reply,
    wait_until,
)

COUNT = 100
PAYLOAD = 1000  # bytes a message: each commit needs new pages of the log


class _Publisher:
    """Publishes numbered QoS 1 messages one at a time, each sent again (on a new
    connection) until a PUBACK acknowledges it, as a client does after a refusal."""

    def __init__(self, port: int, first: int) -> None:
        self.port = port
        self.number = first
        self.acked: list[int] = []
        self.refusals = 0
        self._client: RawClient | None = None
        self._connections = 0

    def _connected(self) -> RawClient:
        if self._client is None:
            self._connections += 1
            client = RawClient("127.0.0.1", self.port, protocol_level=5)
            client.send(mb.gen_connect(f"full-pub-{self._connections}", proto_ver=5))
            assert client.recv_packet().reason_code == 0
            self._client = client
        return self._client

    def publish(self) -> bool:
        """One attempt at the current number: True when acknowledged."""
        client = self._connected()
        payload = b"%d" % self.number
        try:
            client.send(
                mb.gen_publish("fwd/x", payload.ljust(PAYLOAD, b"."), qos=1, mid=1, proto_ver=5)
            )
            packet = client.wait_for(lambda p: p.type != mb.PacketType.PUBLISH)
        except AssertionError:  # closed (refused) or no answer: sent again
            packet = None
        if packet is not None and packet.type == mb.PacketType.PUBACK:
            assert packet.reason_code == 0, packet
            self.acked.append(self.number)
            self.number += 1
            return True
        if packet is not None:
            assert (packet.type, packet.reason_code) == (mb.PacketType.DISCONNECT, 0x80), packet
        self.refusals += 1
        client.close()
        self._client = None
        return False

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _number(payload: bytes) -> int:
    return int(payload.rstrip(b"."))


def test_a_bridge_recovers_from_a_full_disk_with_every_acknowledged_message(
    tmp_path: Path,
) -> None:
    api_port = free_port()
    remote = Remote(tmp_path / "remote")
    workdir = tmp_path / "gateway"
    http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))
    extra = f"""
api:
  bind: 127.0.0.1:{api_port}
  keys: ['{KEY}']
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    client_id: gw-full-disk
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    restart_backoff: 200ms
    restart_backoff_max: 1s
    forwards:
      - {{local: "fwd/#", remote: "cloud/fwd", qos: 1}}
"""

    def bridge() -> dict[str, Any]:
        return bridge_reply(http)

    with remote:  # the remote's subscriber has a persistent session: it waits there
        cloud = Collector(remote.port, "cloud/#", "cloud-sub")
    gateway: BrokerHandle | None = None
    publisher: _Publisher | None = None
    try:
        with small_filesystem(workdir / "data", 8 * 1024 * 1024) as data:
            gateway = start_edgebus(workdir, extra)
            # 1. COUNT messages queued (the remote down), each acknowledged.
            first = StreamPublisher(gateway.port, "fwd/x", COUNT).done_after_start()
            assert first == list(range(1, COUNT + 1))
            wait_until(lambda: bridge().get("stats", {}).get("queue_depth"), lambda d: d == COUNT)
            acked = set(first)

            # 2. The disk full: the bridge's next write fails, its publisher is refused.
            filler = fill(data)
            publisher = _Publisher(gateway.port, COUNT + 1)
            deadline = time.monotonic() + unit(30)
            while not publisher.refusals:
                publisher.publish()
                assert time.monotonic() < deadline, "no publish was refused on the full disk"
            status = wait_until(bridge, lambda b: bool(b.get("last_error")), seconds=30)
            assert "full" in status["last_error"], status

            # 3. Space back: the bridge takes its queue back by itself (no gateway
            # restart), the refused message is acknowledged, and more after it.
            filler.unlink()
            deadline = time.monotonic() + unit(60)
            while len(publisher.acked) < 20:
                publisher.publish()
                assert time.monotonic() < deadline, (publisher.acked, bridge())
            acked |= set(publisher.acked)
            found = bridge()
            assert found["stats"]["queue_depth"] == len(acked), found
            assert found["stats"]["queue_salvages"] == 0, found
            log = gateway.stderr_path.read_text()
            assert "damaged" not in log
            assert "database is locked" not in log
            assert not [p for p in data.rglob("queue.db.damaged-*")]

            # 4. The remote back: it gets every message that was acknowledged.
            with remote:
                wait_until(
                    lambda: {_number(p) for p in cloud.payloads()},
                    lambda received: acked <= received,
                    seconds=60,
                )
                wait_until(lambda: bridge().get("stats", {}).get("queue_depth"), lambda d: d == 0)
            gateway.stop()
            gateway = None
    finally:
        if publisher is not None:
            publisher.close()
        if gateway is not None:
            gateway.stop()
        cloud.close()
