"""A bridge's queue that cannot be used is refused out loud, and nothing is acknowledged
into it meanwhile.

- a queue that cannot be read (a corrupt header): the bridge backs off, and QoS 1/2
  messages it would queue are refused (no PUBACK, the publisher disconnected with 0x80),
  other topics go on; paused it refuses nothing; once the file is moved away it queues
  and forwards again;
- a queue that existed and was lost (its write-ahead log gone after ``kill -9``, the
  file cut to 0 bytes after a clean stop) is refused with one line naming the file and
  what to do, never opened empty in silence;
- a queue whose last page was cut short or overwritten is salvaged (its intact rows
  into a fresh queue, the damaged file kept beside it), without a traceback.

Real gateways (in this process, or ``edgebus run`` killed with SIGKILL), a mosquitto as
the remote, MQTT clients on sockets, real files.
"""

from __future__ import annotations

import logging
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import free_port, start_edgebus
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    bridge_reply,
    wait_until,
)
from tests.integration.components.support import http_of, status_of

COUNT = 100


def _config(port: int) -> str:
    return f"""
api: {{keys: ['{KEY}']}}
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    client_id: gw-queue-loss
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    forwards:
      - {{local: "fwd/#", remote: "cloud/fwd", qos: 1}}
      - {{local: "zero/#", qos: 0}}
"""


def _queue(tmp_path: Path) -> Path:
    return tmp_path / "data" / "bridge" / "cloud" / "queue.db"


def _status(gw: RunningGateway) -> dict[str, Any]:
    return status_of(gw, "bridge", "cloud")


def _connect(port: int, client_id: str) -> RawClient:
    client = RawClient("127.0.0.1", port, protocol_level=5)
    client.send(mb.gen_connect(client_id, proto_ver=5))
    assert client.recv_packet().reason_code == 0
    return client


def _queue_100(tmp_path: Path) -> None:
    """A run of the gateway, its remote down, that queues ``COUNT`` QoS 1 messages
    (each acknowledged) and stops cleanly."""
    with running_gateway(tmp_path, _config(free_port())) as gw:
        assert StreamPublisher(gw.port, "fwd/x", COUNT).done_after_start() == list(
            range(1, COUNT + 1)
        )
        wait_until(lambda: _status(gw)["component_stats"]["queue_depth"], lambda d: d == COUNT)


def _backing_off(gw: RunningGateway) -> str:
    status = wait_until(lambda: _status(gw), lambda s: s["state"] == "backing_off")
    error: str = status["last_error"]
    return error


def test_a_queue_that_cannot_be_read_refuses_what_it_would_queue(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    with Remote(tmp_path / "remote") as remote:
        cloud = Collector(remote.port, "cloud/#", "cloud-sub")
        with running_gateway(tmp_path, _config(remote.port)) as gw:
            wait_until(lambda: _status(gw)["state"], lambda s: s == "running")
        with queue.open("r+b") as file:  # the header and the first page overwritten
            file.write(bytes(4096))
        with running_gateway(tmp_path, _config(remote.port)) as gw:
            http = http_of(gw)
            error = _backing_off(gw)
            assert f"{queue}: cannot read the bridge queue" in error
            assert "move it away" in error
            pub = _connect(gw.port, "pub")
            pub.send(mb.gen_publish("other/topic", b"1", qos=1, mid=1, proto_ver=5))
            assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 1
            pub.send(mb.gen_publish("zero/x", b"1", qos=1, mid=2, proto_ver=5))  # sent at 0
            assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 2
            for qos, mid in ((1, 3), (2, 4)):
                pub.send(mb.gen_publish("fwd/x", b"refused", qos=qos, mid=mid, proto_ver=5))
                closed = pub.wait_for(lambda p: p.type != mb.PacketType.PUBACK)
                assert (closed.type, closed.reason_code) == (mb.PacketType.DISCONNECT, 0x80)
                pub = _connect(gw.port, "pub")
            assert _status(gw)["component_stats"]["refused_no_queue"] == 2

            # Paused: the bridge is off on purpose, nothing is refused.
            assert http.post("/api/v1/bridges/cloud/pause").status == 200
            wait_until(lambda: _status(gw)["state"], lambda s: s == "paused")
            pub.send(mb.gen_publish("fwd/x", b"paused", qos=1, mid=5, proto_ver=5))
            assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 5

            # The bad file moved away (with its marker): the next run queues and forwards.
            queue.rename(tmp_path / "queue.db.bad")
            queue.with_name("queue.db.created").rename(tmp_path / "queue.db.created.bad")
            assert http.post("/api/v1/bridges/cloud/resume").status == 200
            wait_until(lambda: _status(gw)["state"], lambda s: s == "running")
            pub.send(mb.gen_publish("fwd/x", b"after", qos=1, mid=6, proto_ver=5))
            assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 6
            wait_until(cloud.payloads, lambda got: b"after" in got)
            pub.close()
        cloud.close()
    assert cloud.payloads() == [b"after"]


def test_a_queue_whose_wal_was_lost_after_kill_9_is_refused(tmp_path: Path) -> None:
    """The gateway stopped cleanly once (the schema is in queue.db), then 100 messages
    queued and the gateway killed: they are in queue.db-wal only. Without it, the next
    start refuses the queue instead of opening it empty."""
    api_port = free_port()
    workdir = tmp_path / "gateway"
    queue = workdir / "data" / "bridge" / "cloud" / "queue.db"
    extra = _config(free_port()).replace(
        f"api: {{keys: ['{KEY}']}}", f"api:\n  bind: 127.0.0.1:{api_port}\n  keys: ['{KEY}']"
    )
    http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))

    def bridge() -> dict[str, Any]:
        return bridge_reply(http)

    start_edgebus(workdir, extra).stop()  # SIGTERM: a clean stop
    assert queue.exists() and not queue.with_name("queue.db-wal").exists()
    gateway = start_edgebus(workdir, extra)
    try:
        assert StreamPublisher(gateway.port, "fwd/x", COUNT).done_after_start() == list(
            range(1, COUNT + 1)
        )
        wait_until(lambda: bridge().get("stats", {}).get("queue_depth"), lambda d: d == COUNT)
        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(10)
    finally:
        gateway.stop()
    wal = queue.with_name("queue.db-wal")
    assert wal.stat().st_size > 0
    wal.unlink()
    gateway = start_edgebus(workdir, extra)
    try:
        found = wait_until(bridge, lambda b: b.get("state") == "backing_off")
        error = found["last_error"]
        assert f"{queue}: the bridge queue's write-ahead log {wal} is missing" in error
        assert f"move {queue} and {queue}.created away to start with an empty queue" in error
        assert bridge().get("stats", {}).get("queue_depth") is None  # never opened empty
    finally:
        gateway.stop()


def test_a_queue_cut_to_0_bytes_after_a_clean_stop_is_refused(tmp_path: Path) -> None:
    queue = _queue(tmp_path)
    _queue_100(tmp_path)
    # A clean stop checkpointed the WAL into queue.db and removed it.
    assert not queue.with_name("queue.db-wal").exists()
    with sqlite3.connect(queue) as conn:
        assert conn.execute("SELECT count(*) FROM queue").fetchone()[0] == COUNT
    conn.close()
    queue.write_bytes(b"")
    with running_gateway(tmp_path, _config(free_port())) as gw:
        error = _backing_off(gw)
        assert f"{queue}: the bridge queue file is empty (0 bytes)" in error
        assert f"move {queue} and {queue}.created away" in error
        assert queue.stat().st_size == 0  # left as it was
        pub = _connect(gw.port, "pub")
        pub.send(mb.gen_publish("fwd/x", b"refused", qos=1, mid=1, proto_ver=5))
        closed = pub.wait_for(lambda p: p.type != mb.PacketType.PUBACK)
        assert (closed.type, closed.reason_code) == (mb.PacketType.DISCONNECT, 0x80)


@pytest.mark.parametrize("damage", ["cut", "zeroed"])
def test_a_queue_with_a_torn_last_page_is_salvaged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """Its last 100 bytes cut off (found before SQLite opens it: the file is kept as it
    was) or overwritten with zeros (the size is right; the rows stored there read as
    garbage, found while the index is read, then salvaged at the restart): the rows of
    the intact part of the page are salvaged into a fresh queue, the damaged file kept
    beside it, and the bridge queues again (bridge.queue_salvage; the end-to-end test
    with a remote is test_queue_salvage)."""
    queue = _queue(tmp_path)
    _queue_100(tmp_path)
    size = queue.stat().st_size
    with queue.open("r+b") as file:
        if damage == "cut":
            file.truncate(size - 100)
        else:
            file.seek(size - 100)
            file.write(bytes(100))
    torn = queue.read_bytes()
    caplog.set_level(logging.INFO)
    with running_gateway(tmp_path, _config(free_port())) as gw:
        stats = wait_until(lambda: _status(gw)["component_stats"], lambda s: "queue_depth" in s)
        assert stats["queue_salvages"] == 1
        assert 0 < stats["queue_salvaged_rows"] < COUNT  # the rows of the torn bytes lost
        assert stats["queue_depth"] == stats["queue_salvaged_rows"]
        pub = _connect(gw.port, "pub")
        pub.send(mb.gen_publish("fwd/x", b"queued", qos=1, mid=1, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 1
        wait_until(
            lambda: _status(gw)["component_stats"]["queue_depth"],
            lambda d: d == stats["queue_salvaged_rows"] + 1,
        )
    (kept,) = queue.parent.glob("queue.db.damaged-*")
    if damage == "cut":
        assert kept.read_bytes() == torn  # kept as it was found
    else:
        assert kept.stat().st_size == size
    about_it = [
        r for r in caplog.records if "queue" in r.getMessage() and "cloud" in r.getMessage()
    ]
    assert any(f"the damaged file is kept at {kept}" in r.getMessage() for r in about_it)
    assert [r.getMessage() for r in about_it if r.exc_info] == []
