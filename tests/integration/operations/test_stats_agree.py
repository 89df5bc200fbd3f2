"""``$SYS``, ``/metrics`` and the JSON metrics of the API read one ``Broker.stats()``.

Real traffic through real sockets: MQTT clients of two protocol levels, a component
(the loopback adapter) republishing, the HTTP API publishing, an offline persistent
session dropping QoS 0 messages, a socket that never sends CONNECT. Then one ``$SYS``
round is published, read back by an MQTT subscriber, and compared with what the
Prometheus and JSON endpoints said a moment before: connected, connecting, the most
connected at once, sessions, received, sent and dropped are the same numbers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients, connect_props, wait_until

CONFIG = (
    API_CONFIG
    + """
sys:
  interval: 1h
  events: true
adapters:
  - type: loopback
    name: echo
    mappings:
      - source: sensors/{room}/temp
        target: building/{room}/temperature
        qos: 1
"""
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, CONFIG) as gateway:
        yield gateway


def prometheus(http: Http) -> Samples:
    reply = http.get("/metrics")
    assert reply.status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def total(samples: Samples, name: str, skip: tuple[str, str] | None = None) -> int:
    return int(
        sum(
            value
            for (metric, labels), value in samples.items()
            if metric == name and (skip is None or skip not in labels)
        )
    )


def sys_values(gw: RunningGateway) -> dict[str, str]:
    """Publishes one $SYS round now and reads it back, retained, as an MQTT client."""
    gw.call(gw.gateway.sys_topics.publish_statistics)
    node = gw.gateway.config.node_name
    reader = RawClient("127.0.0.1", gw.port, protocol_level=4)
    try:
        reader.do_connect("sys-reader")
        reader.subscribe(f"$SYS/brokers/{node}/#", 0)
        prefix = f"$SYS/brokers/{node}/"
        values: dict[str, str] = {}
        while len(values) < 13:
            packet = reader.recv_publish(unit(5))
            if packet.retain:
                values[packet.topic.removeprefix(prefix)] = packet.payload.decode()
        return values
    finally:
        reader.close()


def test_sys_metrics_and_api_agree(gw: RunningGateway) -> None:
    http = http_of(gw)
    clients = Clients(gw)
    silent = socket.create_connection(gw.address(), timeout=unit(5))  # never sends CONNECT
    try:
        wait_until(
            lambda: gw.call(lambda: gw.gateway.adapters.status("echo"))["state"] == "running"
        )
        away = clients.paho(5, "away")
        away.connect(properties=connect_props(SessionExpiryInterval=600))
        away.subscribe("sensors/#", 0)
        away.disconnect()
        watch = clients.paho(5, "watch")
        watch.connect()
        watch.subscribe("building/#", 1)
        pub = clients.paho(4, "pub")
        pub.connect()
        for room in range(3):
            pub.publish(f"sensors/r{room}/temp", b"21", qos=1)
        for i in range(2):
            reply = http.post("/api/v1/publish", {"topic": f"building/api{i}", "payload": "x"})
            assert reply.status == 200
        watch.expect_messages(3 + 2)  # the loopback's republished ones and the API's
        wait_until(lambda: gw.call(lambda: gw.broker.stats().connecting) == 1)

        m = http.get("/api/v1/metrics").json()
        samples = prometheus(http)
        sys = sys_values(gw)
    finally:
        silent.close()
        clients.close_all()

    # connected: watch and pub; "away" is an offline session; the silent socket connects
    connected = int(sys["clients/connected"])
    assert connected == 2
    assert m["clients"]["connected"] == m["sessions"]["online"] == connected
    assert samples[("edgebus_clients_connected", ())] == connected
    assert total(samples, "edgebus_connections", ("version", "connecting")) == connected
    assert sum(c["count"] for c in m["connections"] if c["version"] != "connecting") == connected
    assert m["clients"]["connecting"] == 1
    assert total(samples, "edgebus_connections") == connected + 1
    maximum = int(sys["clients/maximum"])
    assert maximum >= connected
    assert m["clients"]["maximum"] == samples[("edgebus_clients_connected_max", ())] == maximum
    sessions = int(sys["clients/total"])
    assert sessions == 3
    assert m["clients"]["total"] == m["sessions"]["online"] + m["sessions"]["offline"] == sessions

    # received: 3 from MQTT, 3 republished by the loopback adapter, 2 from the API
    assert m["messages"]["received"] == {"mqtt": 3, "loopback": 3, "api": 2}
    received = int(sys["messages/received"])
    assert received == 8
    assert total(samples, "edgebus_messages_received_total") == received

    sent = int(sys["messages/sent"])
    assert sent >= 5
    assert sum(m["messages"]["sent"].values()) == sent
    assert total(samples, "edgebus_messages_sent_total") == sent

    # dropped: the offline "away" session's QoS 0 copies of the 3 sensor readings
    dropped = int(sys["messages/dropped"])
    assert m["messages"]["dropped"]["qos0_offline"] == 3
    assert dropped == sum(m["messages"]["dropped"].values()) == 3
    assert total(samples, "edgebus_messages_dropped_total") == dropped
