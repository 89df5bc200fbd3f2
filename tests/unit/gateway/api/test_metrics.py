"""The metrics snapshot and its Prometheus collector, over a broker without sockets."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker_core.broker import Broker
from broker_core.context import Context, Origin
from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.session_state import Delivery
from gateway.api.metrics import DROP_REASONS, mqtt_version, new_registry, snapshot
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
    """What the broker's connection table reads of an ``MqttConnection``."""

    def __init__(self, listener: str, level: int, connected: bool) -> None:
        self.session = SimpleNamespace(protocol_level=level, closed=False, state=None)
        if connected:  # attached to its session state
            self.session.state = SimpleNamespace(connection=self.session)
        self.listener = ListenerSettings(name=listener)
        self.counted = False

    def has_unread_input(self) -> bool:
        return False


def connection(broker: Broker, listener: str, level: int, connected: bool = True) -> None:
    broker.connections.opened(FakeConnection(listener, level, connected))  # type: ignore[arg-type]


def samples(gateway: FakeGateway) -> dict[tuple[str, tuple[Any, ...]], float]:
    text = generate_latest(new_registry(gateway)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_versions() -> None:
    assert [mqtt_version(level) for level in (3, 4, 5, 9)] == ["3.1", "3.1.1", "5.0", "9"]


def test_an_idle_broker() -> None:
    gateway = FakeGateway()
    m = snapshot(gateway)
    assert m.connections == []
    assert (m.clients.connected, m.clients.connecting, m.clients.maximum) == (0, 0, 0)
    assert (m.sessions.online, m.sessions.offline, m.subscriptions) == (0, 0, 0)
    assert m.messages.dropped == dict.fromkeys(DROP_REASONS, 0)
    assert m.messages.received == {"mqtt": 0, "api": 0}
    assert (m.adapters, m.bridges, m.rules) == ([], [], [])


def test_state_is_read_when_asked() -> None:
    gateway = FakeGateway()
    broker = gateway.broker
    connection(broker, "tcp", 5)
    connection(broker, "tcp", 5)
    connection(broker, "tcp", 4)
    connection(broker, "ws", 3)
    connection(broker, "tcp", 4, connected=False)
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
    for _ in range(4):
        broker.counters.count_received("api", 10)

    m = snapshot(gateway)
    assert [(c.listener, c.version, c.count) for c in m.connections] == [
        ("tcp", "3.1.1", 1),
        ("tcp", "5.0", 2),
        ("tcp", "connecting", 1),
        ("ws", "3.1", 1),
    ]
    assert m.clients.connecting == 1
    assert m.limits.pending_connections == 5  # none of the fakes sent CONNECT
    assert (m.sessions.online, m.sessions.offline) == (0, 2)
    assert m.subscriptions == 1
    assert m.messages.received == {"mqtt": 10, "api": 4}
    assert m.messages.dropped["queue_full"] == 2
    assert m.messages.dropped["local_queue_full"] == 1
    assert m.messages.retained == 1
    assert m.bytes.received["api"] == 40
    q = m.queues
    # queued_bytes: topic and payload bytes (no properties here)
    assert (q.queued_messages, q.queued_messages_max, q.queued_bytes) == (4, 3, 3 * 6 + 4)
    assert (q.local_queued, q.local_queued_max) == (2, 2)

    got = samples(gateway)
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
    assert snapshot(gateway).queues.local_queued == 0


def test_adapters_are_counted_under_their_protocol() -> None:
    gateway = FakeGateway()
    counters = gateway.broker.counters
    counters.messages_received = 2
    for _ in range(5):
        counters.count_received("zmq")  # what the hub does for a component's publish
    counters.received_from.setdefault("dds", 0)  # a hub client that published nothing yet
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
    m = snapshot(gateway)
    assert m.messages.received == {"mqtt": 2, "api": 0, "zmq": 5, "dds": 0}
    assert [(a.name, a.state, a.last_error, a.restarts) for a in m.adapters] == [
        ("floor", "running", None, 2),
        ("cam", "backing_off", "gone", None),
    ]
    got = samples(gateway)
    up = "edgebus_adapter_up"
    assert got[(up, (("adapter", "floor"), ("state", "running"), ("type", "zmq")))] == 1
    assert got[(up, (("adapter", "cam"), ("state", "backing_off"), ("type", "dds")))] == 0
    assert got[("edgebus_adapter_restarts_total", (("adapter", "floor"),))] == 2
    assert got[("edgebus_adapter_messages_dropped_total", (("adapter", "floor"),))] == 1
    assert got[("edgebus_adapter_queue_depth", (("adapter", "floor"),))] == 3


def test_each_gateway_has_its_own_registry() -> None:
    one, two = FakeGateway(), FakeGateway()
    one.broker.counters.messages_sent = 3
    assert samples(one)[("edgebus_messages_sent_total", (("protocol", "mqtt"),))] == 3
    assert samples(two)[("edgebus_messages_sent_total", (("protocol", "mqtt"),))] == 0
