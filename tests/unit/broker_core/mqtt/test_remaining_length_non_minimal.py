"""Remaining Length in more bytes than needed: MQTT 3.1 / 3.1.1 packets decode (3.1.1
2.2.3 has no minimal-encoding rule), MQTT 5 ones are malformed [MQTT-1.5.5-1]; a CONNECT,
read before the level is known, is judged by the level it carries. Whole and one byte at
a time."""

from __future__ import annotations

import pytest

from broker_core.errors import MalformedPacket
from broker_core.mqtt.codec import Decoder
from broker_core.mqtt.packets import Connect, Packet, Pingreq, Publish
from tests.helpers import mqtt_builder as mb


def decode(decoder: Decoder, data: bytes, one_byte_at_a_time: bool) -> list[Packet]:
    if not one_byte_at_a_time:
        return decoder.feed(data)
    packets: list[Packet] = []
    for i in range(len(data)):
        packets += decoder.feed(data[i : i + 1])
    return packets


def padded_connect(level: int, width: int) -> bytes:
    connect = mb.gen_connect("nm", proto_ver=level)
    assert connect[1] == len(connect) - 2 < 128
    return mb.raw_packet(0x10, connect[2:], width=width)


BYTEWISE = pytest.mark.parametrize("one_byte_at_a_time", [False, True])


@BYTEWISE
@pytest.mark.parametrize("level", [3, 4])
@pytest.mark.parametrize("width", [2, 3, 4])
def test_mqtt311_accepts_non_minimal_lengths(
    level: int, width: int, one_byte_at_a_time: bool
) -> None:
    data = mb.raw_packet(0xC0, b"", width=width) + mb.raw_packet(
        0x30, mb.utf8("a/b") + b"x", width=width
    )
    packets = decode(Decoder(protocol_level=level), data, one_byte_at_a_time)
    assert [type(p) for p in packets] == [Pingreq, Publish]
    publish = packets[1]
    assert isinstance(publish, Publish)
    assert (publish.topic, bytes(publish.payload)) == ("a/b", b"x")


@BYTEWISE
@pytest.mark.parametrize("width", [2, 3, 4])
def test_mqtt5_refuses_non_minimal_lengths(width: int, one_byte_at_a_time: bool) -> None:
    with pytest.raises(MalformedPacket, match="not minimally encoded") as raised:
        decode(Decoder(protocol_level=5), mb.raw_packet(0xC0, b"", width=width), one_byte_at_a_time)
    assert raised.value.reason_code == 0x81


@BYTEWISE
@pytest.mark.parametrize("level", [3, 4])
def test_non_minimal_connect_of_mqtt311(level: int, one_byte_at_a_time: bool) -> None:
    decoder = Decoder()
    data = padded_connect(level, 3) + mb.raw_packet(0xC0, b"", width=2)
    packets = decode(decoder, data, one_byte_at_a_time)
    assert [type(p) for p in packets] == [Connect, Pingreq]
    assert decoder.protocol_level == level


@BYTEWISE
def test_non_minimal_connect_of_mqtt5_is_malformed(one_byte_at_a_time: bool) -> None:
    with pytest.raises(MalformedPacket, match="not minimally encoded"):
        decode(Decoder(), padded_connect(5, 2), one_byte_at_a_time)


def test_minimal_lengths_still_decode_at_every_level() -> None:
    for level in (3, 4, 5):
        big = mb.gen_publish("t", b"y" * 20_000, proto_ver=level)  # three length bytes
        packets = Decoder(protocol_level=level).feed(big + mb.gen_pingreq())
        assert [type(p) for p in packets] == [Publish, Pingreq]


@pytest.mark.parametrize("level", [3, 4, 5])
def test_five_length_bytes_are_malformed_at_every_level(level: int) -> None:
    with pytest.raises(MalformedPacket, match="longer than 4 bytes"):
        Decoder(protocol_level=level).feed(mb.raw_packet(0xC0, b"", width=5))
