"""Malformed input: the connection closes, other connections keep working.

MQTT 3.1.1 2.2, 4.8 and MQTT 5.0 1.5.5, 2.1, 4.13.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.support import BOTH, MALFORMED_OR_PROTOCOL, Clients, deviation
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import ReasonCode
from tests.helpers.raw_client import RawClient


class Bystander:
    """A connection opened before the malformed input; it must be unaffected after."""

    def __init__(self, clients: Clients, root: str) -> None:
        self.topic = f"{root}/bystander"
        self.client = clients.subscriber(self.topic, 1, 5)
        self.clients = clients

    def check(self) -> None:
        self.client.ping()
        self.clients.check_alive(4)
        publisher = self.clients.connect(5)
        publisher.publish(self.topic, b"still here", qos=1)
        assert self.client.recv_publish().payload == b"still here"


@pytest.fixture
def bystander(clients: Clients, root: str) -> Iterator[Bystander]:
    yield Bystander(clients, root)


def _connected(clients: Clients, proto: int) -> RawClient:
    return clients.connect(proto)


@BOTH
def test_five_byte_remaining_length_closes_the_connection(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """2.2.3 (3.1.1) / 1.5.5 and 2.1.4 (5.0): a Variable Byte Integer has at most four bytes;
    a fifth is malformed and the connection is closed (MQTT-4.8.0-1 (3.1.1),
    MQTT-4.13.1-1 (5.0))."""
    client = _connected(clients, proto)
    client.send(mb.raw_packet(0xC0, b"", width=5))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)
    bystander.check()


@BOTH
def test_remaining_length_beyond_the_data_received(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """4.8 (3.1.1) / 4.13 (5.0): a PUBLISH whose topic length runs past the Remaining Length
    is malformed; the connection is closed."""
    client = _connected(clients, proto)
    body = mb.utf8("cf/short", length=200)
    client.send(mb.raw_packet(0x30, body))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)
    bystander.check()


@BOTH
def test_qos1_publish_without_packet_identifier(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """MQTT-2.3.1-1 (3.1.1) / 2.2.1 (5.0): a QoS 1 PUBLISH too short to hold its Packet
    Identifier is malformed."""
    client = _connected(clients, proto)
    client.send(mb.raw_packet(0x32, mb.utf8("cf/t") + b"\x00"))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    bystander.check()


@BOTH
def test_subscribe_filter_length_past_the_packet(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """4.8 (3.1.1) / 4.13 (5.0): a SUBSCRIBE whose Topic Filter length runs past the packet is
    malformed."""
    client = _connected(clients, proto)
    props = b"\x00" if proto == 5 else b""
    client.send(mb.raw_packet(0x82, b"\x00\x01" + props + mb.utf8("cf/f", length=100) + b"\x01"))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    bystander.check()


@BOTH
def test_reserved_packet_type_0_closes_the_connection(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """2.2.1 (3.1.1) / 2.1.2 (5.0): packet type 0 is reserved (forbidden); receiving it closes
    the connection."""
    client = _connected(clients, proto)
    client.send(mb.raw_packet(0x00))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    bystander.check()


def test_packet_type_15_is_reserved_in_311(clients: Clients, bystander: Bystander) -> None:
    """2.2.1 (3.1.1): packet type 15 is reserved (AUTH exists only in 5.0)."""
    client = _connected(clients, 4)
    client.send(mb.raw_packet(0xF0))
    client.expect_closed(packet_type=None)
    bystander.check()


SERVER_PACKETS = {
    "connack": lambda proto: mb.gen_connack(False, 0, proto_ver=proto),
    "suback": lambda proto: mb.gen_suback(1, [0], proto_ver=proto),
    "unsuback": lambda proto: mb.gen_unsuback(1, [0] if proto == 5 else None, proto_ver=proto),
    "pingresp": lambda proto: mb.gen_pingresp(),
}


@BOTH
@pytest.mark.parametrize("name", sorted(SERVER_PACKETS))
def test_server_to_client_packets_from_a_client_close_the_connection(
    clients: Clients, bystander: Bystander, proto: int, name: str
) -> None:
    """MQTT-4.8.0-1 (3.1.1) / MQTT-4.13.1-1 (5.0): CONNACK, SUBACK, UNSUBACK and PINGRESP only
    flow from Server to Client; receiving one is a protocol violation that closes the
    connection."""
    client = _connected(clients, proto)
    client.send(SERVER_PACKETS[name](proto))
    with deviation(
        clients.broker,
        "ignores SUBACK, UNSUBACK and PINGRESP sent by a client (MQTT-4.8.0-1 / MQTT-4.13.1-1)",
    ):
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    bystander.check()


@BOTH
def test_pingreq_with_a_payload_closes_the_connection(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """3.12 (3.1.1 and 5.0): PINGREQ has no variable header and no payload; a non-zero
    Remaining Length is malformed."""
    client = _connected(clients, proto)
    client.send(mb.raw_packet(0xC0, b"\x00"))
    with deviation(
        clients.broker, "answers a PINGREQ with a non-zero Remaining Length (3.12, 4.8)"
    ):
        client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)
    bystander.check()


@BOTH
def test_garbage_before_connect_closes_the_connection(
    clients: Clients, bystander: Bystander, proto: int
) -> None:
    """MQTT-3.1.0-1, MQTT-3.1.4-1: bytes that are not a CONNECT close the connection without a
    CONNACK."""
    client = clients.raw(proto)
    client.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    client.expect_closed(packet_type=None)
    bystander.check()


def test_v5_invalid_utf8_in_user_property_of_subscribe(
    clients: Clients, bystander: Bystander, root: str
) -> None:
    """MQTT-1.5.4-1 (5.0): ill-formed UTF-8 anywhere (here a User Property of SUBSCRIBE) is a
    Malformed Packet."""
    client = _connected(clients, 5)
    bad = mb.raw_props(mb.prop("user_property", (b"k", b"\xc3\x28")))
    client.send(mb.gen_subscribe(1, f"{root}/t", 0, proto_ver=5, properties=bad))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)
    bystander.check()
