"""The metrics snapshot and its Prometheus collector, over a broker without sockets."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker_core.broker import Broker
from broker_core.context import Context, Origin
from broker_core.mqtt.session import ConnState
from broker_core.mqtt.session_state import Delivery
from gateway.api.metrics import DROP_REASONS, ApiStats, mqtt_version, new_registry, snapshot
from gateway.config import GatewayConfig


class FakeAdapters:
    def __init__(self, statuses: list[dict[str, Any]]) -> None:
        self._statuses = statuses

    def statuses(self) -> list[dict[str, Any]]:
        return self._statuses

    async def restart(self, name: str) -> bool:
        return True


@dataclass
class FakeGateway:
    broker: Broker = field(default_factory=Broker)
    config: GatewayConfig = field(default_factory=GatewayConfig)
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    adapters: Any = None


class FakeConnection:
    """What the metrics read of an ``MqttConnection``."""

    def __init__(self, listener: str, level: int, state: ConnState) -> None:
        self.session = SimpleNamespace(conn_state=state, protocol_level=level)
        self.listener = SimpleNamespace(name=listener)


def connection(listener: str, level: int, state: ConnState = ConnState.CONNECTED) -> Any:
    return FakeConnection(listener, level, state)


def samples(gateway: FakeGateway, stats: ApiStats) -> dict[tuple[str, tuple[Any, ...]], float]:
    text = generate_latest(new_registry(gateway, stats)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_versions() -> None:
    assert [mqtt_version(level) for level in (3, 4, 5, 9)] == ["3.1", "3.1.1", "5.0", "9"]


def test_an_idle_broker() -> None:
    gateway = FakeGateway()
    m = snapshot(gateway, ApiStats())
    assert m.connections == []
    assert (m.sessions.online, m.sessions.offline, m.subscriptions) == (0, 0, 0)
    assert m.messages.dropped == dict.fromkeys(DROP_REASONS, 0)
    assert m.messages.received == {"mqtt": 0, "api": 0}
    assert (m.adapters, m.bridges, m.rules) == ([], [], [])


def test_state_is_read_when_asked() -> None:
    gateway = FakeGateway()
    broker = gateway.broker
    broker.connections.update(
        {
            connection("tcp", 5),
            connection("tcp", 5),
            connection("tcp", 4),
            connection("ws", 3),
            connection("tcp", 4, ConnState.AWAIT_CONNECT),
        }
    )
    away = broker.sessions.create("away")
    for i in range(3):
        away.enqueue(Delivery(Context(f"q/{i}", b"xyz", 1), 1, False, ()))
    other = broker.sessions.create("other")
    other.enqueue(Delivery(Context("q/x", b"z", 1), 1, False, ()))
    broker.counters.messages_received = 10
    broker.counters.dropped_queue_full = 2
    broker.retained.set(Context("r", b"1", 0, True))
    local = broker.subscribe(Origin("zmq", "z"), ["local/#"], maxsize=2)
    for i in range(3):
        broker.publish(Context(f"local/{i}", b"v"))
    stats = ApiStats(messages_published=4, bytes_published=40)

    m = snapshot(gateway, stats)
    assert [(c.listener, c.version, c.count) for c in m.connections] == [
        ("tcp", "3.1.1", 1),
        ("tcp", "5.0", 2),
        ("tcp", "connecting", 1),
        ("ws", "3.1", 1),
    ]
    assert (m.sessions.online, m.sessions.offline) == (0, 2)
    assert m.subscriptions == 1
    assert m.messages.received == {"mqtt": 10, "api": 4}
    assert m.messages.dropped["queue_full"] == 2
    assert m.messages.dropped["local_queue_full"] == 1
    assert m.messages.retained == 1
    assert m.bytes.received["api"] == 40
    q = m.queues
    assert (q.queued_messages, q.queued_messages_max, q.queued_bytes) == (4, 3, 3 * 6 + 4)
    assert (q.local_queued, q.local_queued_max) == (2, 2)

    got = samples(gateway, stats)
    assert (
        got[
            ("edgebus_connections", (("listener", "tcp"), ("protocol", "mqtt"), ("version", "5.0")))
        ]
        == 2
    )
    assert got[("edgebus_messages_dropped_total", (("reason", "local_queue_full"),))] == 1
    assert got[("edgebus_queued_messages", ())] == 4
    assert got[("edgebus_local_queued_messages_max", ())] == 2
    assert got[("edgebus_messages_received_total", (("protocol", "api"),))] == 4
    local.close()
    assert snapshot(gateway, stats).queues.local_queued == 0


def test_adapters_are_counted_under_their_protocol() -> None:
    gateway = FakeGateway()
    gateway.broker.counters.messages_received = 7  # 5 of them through the hub
    gateway.adapters = FakeAdapters(
        [
            {
                "name": "floor",
                "type": "zmq",
                "state": "running",
                "last_error": None,
                "restarts": 2,
                "stats": {"published": 5, "dropped": 1, "queue_depth": 3},
            },
            {"name": "cam", "type": "dds", "state": "backing_off", "last_error": "gone"},
        ]
    )
    m = snapshot(gateway, ApiStats())
    assert m.messages.received == {"mqtt": 2, "api": 0, "zmq": 5, "dds": 0}
    assert [(a.name, a.state, a.last_error, a.restarts) for a in m.adapters] == [
        ("floor", "running", None, 2),
        ("cam", "backing_off", "gone", None),
    ]
    got = samples(gateway, ApiStats())
    up = "edgebus_adapter_up"
    assert got[(up, (("adapter", "floor"), ("state", "running"), ("type", "zmq")))] == 1
    assert got[(up, (("adapter", "cam"), ("state", "backing_off"), ("type", "dds")))] == 0
    assert got[("edgebus_adapter_restarts_total", (("adapter", "floor"),))] == 2
    assert got[("edgebus_adapter_messages_dropped_total", (("adapter", "floor"),))] == 1
    assert got[("edgebus_adapter_queue_depth", (("adapter", "floor"),))] == 3


def test_each_gateway_has_its_own_registry() -> None:
    one, two = FakeGateway(), FakeGateway()
    one.broker.counters.messages_sent = 3
    assert samples(one, ApiStats())[("edgebus_messages_sent_total", (("protocol", "mqtt"),))] == 3
    assert samples(two, ApiStats())[("edgebus_messages_sent_total", (("protocol", "mqtt"),))] == 0
