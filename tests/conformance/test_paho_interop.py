"""A real client library against the target: paho-mqtt 2.x with MQTT 3.1.1 and 5.0."""

from __future__ import annotations

import queue
from collections.abc import Iterator

import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.helpers.brokers import BrokerHandle
from tests.helpers.timeouts import unit


def _client(
    broker: BrokerHandle, client_id: str, protocol: paho.MQTTProtocolVersion
) -> tuple[paho.Client, queue.Queue[paho.MQTTMessage]]:
    inbox: queue.Queue[paho.MQTTMessage] = queue.Queue()
    connected: queue.Queue[object] = queue.Queue()
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol)
    client.on_message = lambda _c, _u, message: inbox.put(message)
    client.on_connect = lambda _c, _u, _f, reason, _p: connected.put(reason)
    client.connect(broker.host, broker.port, keepalive=30)
    client.loop_start()
    reason = connected.get(timeout=unit(5))
    assert getattr(reason, "is_failure", False) is False
    return client, inbox


@pytest.fixture
def paho_clients(broker: BrokerHandle) -> Iterator[list[paho.Client]]:
    started: list[paho.Client] = []
    yield started
    for client in started:
        client.disconnect()
        client.loop_stop()


@pytest.mark.parametrize(
    "protocol",
    [paho.MQTTProtocolVersion.MQTTv311, paho.MQTTProtocolVersion.MQTTv5],
    ids=["v311", "v5"],
)
def test_paho_round_trip(
    broker: BrokerHandle,
    paho_clients: list[paho.Client],
    uid: str,
    protocol: paho.MQTTProtocolVersion,
) -> None:
    """A paho-mqtt subscriber and publisher exchange QoS 0, 1 and 2 messages (and, in 5.0,
    user properties) through the target."""
    topic = f"cf/{uid}/paho"
    subscriber, inbox = _client(broker, f"psub{uid}", protocol)
    publisher, _ = _client(broker, f"ppub{uid}", protocol)
    paho_clients += [subscriber, publisher]
    result, _ = subscriber.subscribe(topic, qos=2)
    assert result == paho.MQTT_ERR_SUCCESS
    # The SUBACK has arrived once a round trip on the same connection completes.
    probe = subscriber.publish(f"{topic}/probe", b"", qos=1)
    probe.wait_for_publish(timeout=unit(5))
    for qos in (0, 1, 2):
        properties = None
        if protocol == paho.MQTTProtocolVersion.MQTTv5:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = [("qos", str(qos))]
        info = publisher.publish(topic, b"paho %d" % qos, qos=qos, properties=properties)
        info.wait_for_publish(timeout=unit(5))
        message = inbox.get(timeout=unit(5))
        assert (message.topic, message.payload, message.qos) == (topic, b"paho %d" % qos, qos)
        if properties is not None:
            assert message.properties.UserProperty == [("qos", str(qos))]
