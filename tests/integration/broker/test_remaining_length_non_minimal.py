"""A Remaining Length encoded in more bytes than needed (still at most four).

MQTT 3.1.1 2.2.3 (and 3.1) define the encoding without a minimal-encoding rule; the MUST
is MQTT 5.0's [MQTT-1.5.5-1]. So a 3.1 / 3.1.1 client's ``C0 80 00`` is a PINGREQ and
gets its PINGRESP (mosquitto answers it too), a non-minimal PUBLISH is delivered, and a
non-minimal CONNECT is accepted; an MQTT 5 client's is a Malformed Packet (0x81: a
DISCONNECT, or a CONNACK for its CONNECT), and five bytes stay malformed for every
version. Before, the broker closed 3.1 / 3.1.1 connections on it as MQTT 5 requires.

Raw sockets against a running gateway (the ``gw`` / ``clients`` fixtures).
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.integration.broker.support import Clients, raw_publish_ok

MALFORMED = mb.ReasonCode.MALFORMED_PACKET
PINGRESP = mb.PacketType.PINGRESP


@pytest.mark.parametrize("proto", [3, 4])
@pytest.mark.parametrize("width", [2, 3, 4])
def test_mqtt311_non_minimal_pingreq_gets_pingresp(
    clients: Clients, proto: int, width: int
) -> None:
    client = clients.raw(proto)
    client.do_connect(clients.client_id(), proto_ver=proto)
    client.send(mb.raw_packet(0xC0, b"", width=width))  # width 2: C0 80 00
    client.expect_packet(PINGRESP)
    client.ping()  # and the connection goes on


@pytest.mark.parametrize("proto", [3, 4])
def test_mqtt311_non_minimal_publish_is_delivered(clients: Clients, proto: int) -> None:
    receiver = clients.raw(proto)
    receiver.do_connect(clients.client_id(), proto_ver=proto)
    receiver.subscribe("nm/t", qos=1)
    sender = clients.raw(proto)
    sender.do_connect(clients.client_id(), proto_ver=proto)
    sender.send(mb.raw_packet(0x30, mb.utf8("nm/t") + b"padded", width=4))
    packet = receiver.recv_publish()
    assert (packet.topic, packet.payload) == ("nm/t", b"padded")
    raw_publish_ok(sender, receiver, "nm/t", b"after")


@pytest.mark.parametrize("proto", [3, 4])
def test_mqtt311_non_minimal_connect_is_accepted(clients: Clients, proto: int) -> None:
    client = clients.raw(proto)
    client.protocol_level = proto
    connect = mb.gen_connect(clients.client_id(), proto_ver=proto)
    body = connect[2:]  # a short CONNECT: one length byte
    assert connect[1] == len(body) < 128
    client.send(mb.raw_packet(0x10, body, width=3))
    assert client.expect_packet(mb.PacketType.CONNACK).reason_code == 0
    client.send(mb.raw_packet(0xC0, b"", width=2))
    client.expect_packet(PINGRESP)


@pytest.mark.parametrize("width", [2, 4])
def test_mqtt5_non_minimal_pingreq_is_malformed(clients: Clients, width: int) -> None:
    client = clients.raw(5)
    client.do_connect(clients.client_id(), proto_ver=5)
    client.send(mb.raw_packet(0xC0, b"", width=width))
    client.expect_closed(reason_code=MALFORMED, require_reason=True)


def test_mqtt5_non_minimal_connect_is_malformed(clients: Clients) -> None:
    client = clients.raw(5)
    client.protocol_level = 5
    connect = mb.gen_connect(clients.client_id(), proto_ver=5)
    client.send(mb.raw_packet(0x10, connect[2:], width=2))
    client.expect_closed(
        reason_code=MALFORMED, require_reason=True, packet_type=mb.PacketType.CONNACK
    )


@pytest.mark.parametrize("proto", [4, 5])
def test_five_length_bytes_stay_malformed(clients: Clients, proto: int) -> None:
    client = clients.raw(proto)
    client.do_connect(clients.client_id(), proto_ver=proto)
    client.send(mb.raw_packet(0xC0, b"", width=5))
    client.expect_closed(reason_code=MALFORMED)
