"""``refused_no_queue`` counts every QoS 1/2 message a bridge refused while no run could
open its queue, across the runs that back off, and after a run opened it.

A real gateway, a bridge whose ``queue.db`` is not a database (every run fails and the
next one starts after ``restart_backoff``), MQTT publishers on sockets, the count read
from the API (``/api/v1/bridges/<name>``) and from ``/metrics``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import free_port
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.api.support import KEY
from tests.integration.bridge.support import wait_until
from tests.integration.components.support import http_of, metric

REFUSED = 3


def _config(port: int) -> str:
    return f"""
api: {{keys: ['{KEY}']}}
bridges:
  - name: cloud
    server: "127.0.0.1:{port}"
    client_id: gw-refused-count
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    restart_backoff: 100ms
    restart_backoff_max: 200ms
    forwards:
      - {{local: "fwd/#", remote: "cloud/fwd", qos: 1}}
"""


def _bridge(gw: RunningGateway) -> dict[str, Any]:
    reply = http_of(gw).get("/api/v1/bridges/cloud")
    assert reply.status == 200, reply.text
    found: dict[str, Any] = reply.json()
    return found


def _counted(gw: RunningGateway) -> tuple[Any, float]:
    """refused_no_queue in the API and in /metrics."""
    api = _bridge(gw)["stats"].get("refused_no_queue")
    text = http_of(gw).get("/metrics").text
    labels = {"kind": "bridge", "name": "cloud", "stat": "refused_no_queue"}
    try:
        scraped = metric(text, "edgebus_component_stat", **labels)
    except AssertionError:
        scraped = -1.0  # not exported
    return api, scraped


def _refused_publish(port: int, number: int) -> None:
    client = RawClient("127.0.0.1", port, protocol_level=5)
    try:
        client.send(mb.gen_connect(f"refused-{number}", proto_ver=5))
        assert client.recv_packet().reason_code == 0
        client.send(mb.gen_publish("fwd/x", b"%d" % number, qos=1, mid=1, proto_ver=5))
        closed = client.wait_for(lambda p: p.type != mb.PacketType.PUBLISH)
        assert (closed.type, closed.reason_code) == (mb.PacketType.DISCONNECT, 0x80)
    finally:
        client.close()


def test_refused_no_queue_counts_across_the_runs_of_a_bridge(tmp_path: Path) -> None:
    queue = tmp_path / "data" / "bridge" / "cloud" / "queue.db"
    queue.parent.mkdir(parents=True)
    queue.write_bytes(b"this is not a database" * 300)
    with running_gateway(tmp_path, _config(free_port())) as gw:
        wait_until(lambda: _bridge(gw)["state"], lambda s: s == "backing_off")
        for number in range(1, REFUSED + 1):
            _refused_publish(gw.port, number)
        # Runs fail and start again (each tries the queue): the count stays.
        restarts = _bridge(gw)["restarts"]
        wait_until(lambda: _bridge(gw)["restarts"], lambda r: r >= restarts + 3)
        assert _counted(gw) == (REFUSED, REFUSED)

        # The file moved away (no run wrote a marker beside it): a run opens a fresh
        # queue, the refusal ends, and the count stays.
        assert not queue.with_name("queue.db.created").exists()
        queue.rename(tmp_path / "queue.db.bad")
        wait_until(lambda: _bridge(gw)["stats"], lambda s: "queue_depth" in s)
        assert _counted(gw) == (REFUSED, REFUSED)
