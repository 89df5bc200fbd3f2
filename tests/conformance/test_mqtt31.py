"""MQTT 3.1 (protocol name "MQIsdp", level 3) basics, and interoperation across versions.

MQTT 3.1 has no numbered normative statements; the references are to sections of the IBM /
Eurotech MQTT V3.1 Protocol Specification.
"""

from __future__ import annotations

import pytest

from tests.conformance.support import Clients, deviation
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import ConnackCode, PacketType


def test_v31_connect(clients: Clients) -> None:
    """3.1 CONNECT/CONNACK: "MQIsdp" level 3 is accepted with CONNACK 20 02 00 00."""
    client = clients.raw(3)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=3))
    client.expect(mb.gen_connack(False, ConnackCode.ACCEPTED))


def test_v31_zero_length_client_id_is_rejected(clients: Clients) -> None:
    """3.1 CONNECT, Client Identifier: between 1 and 23 characters; otherwise CONNACK 0x02
    (identifier rejected)."""
    client = clients.raw(3)
    client.send(mb.gen_connect("", proto_ver=3))
    client.expect(mb.gen_connack(False, ConnackCode.IDENTIFIER_REJECTED))
    client.expect_closed(packet_type=None)


def test_v31_client_id_over_23_characters_is_rejected(clients: Clients) -> None:
    """3.1 CONNECT, Client Identifier: "If the Client ID contains more than 23 characters, the
    server responds to the CONNECT message with a CONNACK return code 2"."""
    client = clients.raw(3)
    client.send(mb.gen_connect("x" * 24, proto_ver=3))
    with deviation(
        clients.broker, "accepts MQTT 3.1 client identifiers longer than 23 characters (3.1)"
    ):
        client.expect(mb.gen_connack(False, ConnackCode.IDENTIFIER_REJECTED))
    client.expect_closed(packet_type=None)


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_v31_publish_subscribe(clients: Clients, root: str, qos: int) -> None:
    """3.1 PUBLISH, SUBSCRIBE/SUBACK, PUBACK/PUBREC/PUBREL/PUBCOMP: a round trip at each QoS."""
    topic = f"{root}/v31"
    subscriber = clients.connect(3)
    suback = subscriber.subscribe(topic, qos)
    assert suback.reason_codes == [qos]
    publisher = clients.connect(3)
    publisher.publish(topic, b"old protocol", qos=qos)
    message = subscriber.recv_publish()
    assert (message.topic, message.payload, message.qos) == (topic, b"old protocol", qos)


def test_v31_unsubscribe(clients: Clients, root: str) -> None:
    """3.1 UNSUBSCRIBE/UNSUBACK: UNSUBACK carries the Message ID; delivery stops."""
    topic = f"{root}/v31"
    subscriber = clients.subscriber(topic, 1, 3)
    unsuback = subscriber.unsubscribe(topic, mid=9)
    assert unsuback.raw == mb.gen_unsuback(9)
    publisher = clients.connect(3)
    publisher.publish(topic, b"x", qos=1)
    subscriber.ping()
    assert list(subscriber.backlog) == []


def test_v31_will(clients: Clients, root: str) -> None:
    """3.1 CONNECT, Will flag: the Will is published when the client disconnects abnormally."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 3)
    client = clients.connect(3, will_topic=topic, will_payload=b"bye", will_qos=1)
    client.close()
    message = observer.recv_publish()
    assert (message.payload, message.qos) == (b"bye", 1)


@pytest.mark.parametrize(("sender", "receiver"), [(3, 5), (5, 3), (3, 4), (4, 3)])
def test_messages_cross_protocol_versions(
    clients: Clients, root: str, sender: int, receiver: int
) -> None:
    """Messages flow between 3.1, 3.1.1 and 5.0 clients, each receiving its own encoding."""
    topic = f"{root}/cross"
    subscriber = clients.subscriber(topic, 2, receiver)
    publisher = clients.connect(sender)
    publisher.publish(topic, b"across", qos=2)
    message = subscriber.recv_publish()
    assert (message.type, message.topic, message.payload, message.qos) == (
        PacketType.PUBLISH,
        topic,
        b"across",
        2,
    )
