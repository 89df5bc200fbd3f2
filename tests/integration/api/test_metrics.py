"""``/api/v1/metrics`` (JSON) and ``/metrics`` (Prometheus) follow the broker's state."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients, connect_props, wait_until


def prometheus(http: Http) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = http.get("/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def test_metrics_follow_traffic_queues_and_drops(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    online = clients.paho(5, "online")
    online.connect()
    online.subscribe("m/#", 1)
    old = clients.paho(4, "old-one")
    old.connect()
    away = clients.paho(5, "away")
    away.connect(properties=connect_props(SessionExpiryInterval=600))
    away.subscribe("m/#", 1)
    away.disconnect()
    wait_until(lambda: gw.call(lambda: gw.broker.sessions.online_count()) == 2)

    old.publish("m/mqtt", b"abc", qos=1)
    for i in range(3):
        assert (
            http.post("/api/v1/publish", {"topic": f"m/{i}", "payload": "x", "qos": 1}).status
            == 200
        )
    assert http.post("/api/v1/publish", {"topic": "m/q0", "payload": "zz"}).status == 200
    http.post("/api/v1/publish", {"topic": "m/kept", "payload": "r", "qos": 1, "retain": True})
    online.expect_messages(6)

    m = http.get("/api/v1/metrics").json()
    assert m["connections"] == [
        {"listener": "tcp:127.0.0.1:0", "protocol": "mqtt", "version": "3.1.1", "count": 1},
        {"listener": "tcp:127.0.0.1:0", "protocol": "mqtt", "version": "5.0", "count": 1},
    ]
    assert m["sessions"] == {"online": 2, "offline": 1}
    assert m["subscriptions"] == 2
    assert m["messages"]["received"] == {"mqtt": 1, "api": 5}
    assert m["messages"]["sent"]["mqtt"] >= 6
    assert m["messages"]["dropped"]["qos0_offline"] == 1
    assert (m["messages"]["retained"], m["messages"]["delayed"]) == (1, 0)
    assert m["bytes"]["received"]["api"] == 3 + 2 + 1
    queues = m["queues"]
    # "away" holds m/mqtt, m/0..2 and m/kept (QoS 0 m/q0 was dropped).
    assert (queues["queued_messages"], queues["queued_messages_max"]) == (5, 5)
    assert queues["queued_bytes"] > 0
    assert (m["adapters"], m["bridges"], m["rules"]) == ([], [], [])

    samples = prometheus(http)
    assert samples[("edgebus_info", (("node", "edgebus@127.0.0.1"), ("version", "0.1.0")))] == 1
    conn = ("edgebus_connections", (("listener", "tcp:127.0.0.1:0"), ("protocol", "mqtt")))
    assert samples[(conn[0], (*conn[1], ("version", "5.0")))] == 1
    assert samples[("edgebus_sessions", (("state", "offline"),))] == 1
    assert samples[("edgebus_messages_received_total", (("protocol", "api"),))] == 5
    assert samples[("edgebus_messages_received_total", (("protocol", "mqtt"),))] == 1
    assert samples[("edgebus_messages_dropped_total", (("reason", "qos0_offline"),))] == 1
    assert samples[("edgebus_messages_dropped_total", (("reason", "queue_full"),))] == 0
    assert samples[("edgebus_queued_messages", ())] == 5
    assert samples[("edgebus_queued_messages_max", ())] == 5
    assert samples[("edgebus_retained_messages", ())] == 1
    assert samples[("edgebus_subscriptions", ())] == 2
    assert samples[("edgebus_store_pending_writes", ())] == 0
    assert samples[("edgebus_bytes_sent_total", (("protocol", "mqtt"),))] > 0


def test_openmetrics_when_asked_for(http: Http) -> None:
    reply = http.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/openmetrics-text")
    assert reply.text.endswith("# EOF\n")


def test_two_gateways_do_not_share_metrics(gw: RunningGateway, http: Http, tmp_path: Path) -> None:
    http.post("/api/v1/publish", {"topic": "one", "payload": "x"})
    with running_gateway(tmp_path / "other", API_CONFIG) as other:
        samples = prometheus(http_of(other))
        assert samples[("edgebus_messages_received_total", (("protocol", "api"),))] == 0
    assert prometheus(http)[("edgebus_messages_received_total", (("protocol", "api"),))] == 1


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, read back, closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_degraded_components_keep_one_series(tmp_path: Path) -> None:
    """A reconnecting bridge's reason carries a countdown (``reconnecting in 0.9s``):
    ``edgebus_component_degraded`` stays one series, labelled kind, type and name
    only, while the API's status keeps the reason text."""
    config = f"""{API_CONFIG}
bridges:
  - name: cloud
    server: "127.0.0.1:{_closed_port()}"
    reconnect_backoff: 200ms
    reconnect_backoff_max: 400ms
    forwards: [{{local: "f/#"}}]
"""
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)

        def reason() -> str:
            return str(http.get("/api/v1/components/bridge/cloud").json()["reason"] or "")

        first = wait_until(reason, what="the bridge degraded with a reason")
        first_scrape = prometheus(http)
        wait_until(lambda: reason() not in ("", first), what="the reason text changed")
        second_scrape = prometheus(http)

    def degraded(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[Any, float]:
        return {
            labels: value
            for (name, labels), value in scrape.items()
            if name == "edgebus_component_degraded" and ("name", "cloud") in labels
        }

    series = (("kind", "bridge"), ("name", "cloud"), ("type", "mqtt"))
    assert degraded(first_scrape) == {series: 1.0}
    assert degraded(second_scrape) == {series: 1.0}
