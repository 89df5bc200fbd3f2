"""Strictness: every malformed input raises the documented error with its reason code."""

from __future__ import annotations

import pytest

from broker_core.errors import MalformedPacket, ProtocolError, ProtocolViolation
from broker_core.mqtt.codec import Decoder, UnsupportedProtocolVersion
from tests.helpers import mqtt_builder as mb

MALFORMED = 0x81
PROTOCOL = 0x82

# (id, decoder level (None: server before CONNECT), bytes, error class, reason code)
CASES: list[tuple[str, int | None, bytes, type[ProtocolError], int]] = [
    ("remaining-length-5-bytes", 4, b"\x30\xff\xff\xff\xff\x01", MalformedPacket, MALFORMED),
    # MQTT 5 only [MQTT-1.5.5-1]; 3.1.1 accepts it (test_remaining_length_non_minimal.py)
    ("remaining-length-not-minimal", 5, b"\x30\x80\x00", MalformedPacket, MALFORMED),
    ("reserved-packet-type-0", 4, b"\x00\x00", MalformedPacket, MALFORMED),
    ("auth-before-mqtt5", 4, mb.gen_auth(), MalformedPacket, MALFORMED),
    ("connect-header-flags", None, mb.gen_connect("c", header_flags=1), MalformedPacket, MALFORMED),
    ("subscribe-header-flags", 4, mb.gen_subscribe(1, "a", flags=0), MalformedPacket, MALFORMED),
    (
        "unsubscribe-header-flags",
        4,
        mb.gen_unsubscribe(1, "a", flags=0),
        MalformedPacket,
        MALFORMED,
    ),
    ("pubrel-header-flags", 4, mb.gen_pubrel(1, flags=0), MalformedPacket, MALFORMED),
    ("pingreq-header-flags", 4, mb.raw_packet((12 << 4) | 1, b""), MalformedPacket, MALFORMED),
    ("pingreq-with-body", 4, mb.raw_packet((12 << 4) | 0, b"\x00"), MalformedPacket, MALFORMED),
    (
        "disconnect-v4-with-body",
        4,
        mb.raw_packet((14 << 4) | 0, b"\x00"),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "connect-reserved-flag",
        None,
        mb.gen_connect("c", reserved_flag=True),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "connect-will-qos-3",
        None,
        mb.gen_connect("c", will_topic="w", will_qos=3),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "connect-will-qos-without-will",
        None,
        mb.gen_connect("c", connect_flags=0x0A),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "connect-will-retain-without-will",
        None,
        mb.gen_connect("c", connect_flags=0x22),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "connect-password-without-username-v4",
        None,
        mb.gen_connect("c", connect_flags=0x42) + b"",
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "connect-unknown-protocol-name",
        None,
        mb.gen_connect("c", proto_name=b"MQTX"),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "connect-unsupported-level",
        None,
        mb.gen_connect("c", proto_ver=6),
        UnsupportedProtocolVersion,
        0x84,
    ),
    (
        "connect-name-level-mismatch",
        None,
        mb.gen_connect("c", proto_ver=3, proto_name=b"MQTT"),
        UnsupportedProtocolVersion,
        0x84,
    ),
    (
        "connect-trailing-bytes",
        None,
        mb.gen_connect("c")[:1]
        + bytes([mb.gen_connect("c")[1] + 1])
        + mb.gen_connect("c")[2:]
        + b"x",
        MalformedPacket,
        MALFORMED,
    ),
    (
        "connect-truncated-client-id",
        None,
        mb.raw_packet((1 << 4) | 0, mb.utf8("MQTT") + b"\x04\x02\x00\x3c\x00\x05ab"),
        MalformedPacket,
        MALFORMED,
    ),
    ("client-id-invalid-utf8", None, mb.gen_connect(b"\xc3\x28"), MalformedPacket, MALFORMED),
    ("client-id-overlong-utf8", None, mb.gen_connect(b"\xc0\xaf"), MalformedPacket, MALFORMED),
    ("client-id-surrogate", None, mb.gen_connect(b"\xed\xa0\x80"), MalformedPacket, MALFORMED),
    ("client-id-nul", None, mb.gen_connect(b"a\x00b"), MalformedPacket, MALFORMED),
    (
        "will-topic-wildcard",
        None,
        mb.gen_connect("c", will_topic="a/#"),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "publish-qos-3",
        4,
        mb.raw_packet((3 << 4) | 0x06, mb.utf8("t") + b"\x00\x01"),
        MalformedPacket,
        MALFORMED,
    ),
    ("publish-dup-qos-0", 4, mb.gen_publish("t", dup=True), MalformedPacket, MALFORMED),
    ("publish-topic-plus", 4, mb.gen_publish("a/+/b"), ProtocolViolation, PROTOCOL),
    ("publish-topic-hash", 4, mb.gen_publish("a/#"), ProtocolViolation, PROTOCOL),
    ("publish-topic-invalid-utf8", 4, mb.gen_publish(b"a\xff"), MalformedPacket, MALFORMED),
    ("publish-topic-nul", 4, mb.gen_publish(b"a\x00"), MalformedPacket, MALFORMED),
    ("publish-packet-id-0", 4, mb.gen_publish("t", qos=1, mid=0), ProtocolViolation, PROTOCOL),
    (
        "publish-truncated-topic",
        4,
        mb.raw_packet((3 << 4) | 0, b"\x00\x09ab"),
        MalformedPacket,
        MALFORMED,
    ),
    ("puback-packet-id-0", 4, mb.gen_puback(0), ProtocolViolation, PROTOCOL),
    (
        "puback-v4-extra-bytes",
        4,
        mb.raw_packet((4 << 4) | 0, b"\x00\x01\x00"),
        MalformedPacket,
        MALFORMED,
    ),
    ("subscribe-packet-id-0", 4, mb.gen_subscribe(0, "a"), ProtocolViolation, PROTOCOL),
    ("subscribe-no-filters", 4, mb.gen_subscribe(1, []), ProtocolViolation, PROTOCOL),
    ("subscribe-qos-3", 4, mb.gen_subscribe(1, [("a", 3)]), MalformedPacket, MALFORMED),
    (
        "subscribe-v5-maximum-qos-3",
        5,
        mb.gen_subscribe(1, [("a", 3)], proto_ver=5),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "subscribe-v4-reserved-bits",
        4,
        mb.gen_subscribe(1, [("a", 0x04)]),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "subscribe-v5-reserved-bits",
        5,
        mb.gen_subscribe(1, [("a", mb.sub_options(0, reserved=1))], proto_ver=5),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "subscribe-retain-handling-3",
        5,
        mb.gen_subscribe(1, [("a", mb.sub_options(0, retain_handling=3))], proto_ver=5),
        ProtocolViolation,
        PROTOCOL,
    ),
    ("subscribe-filter-empty", 4, mb.gen_subscribe(1, ""), MalformedPacket, MALFORMED),
    ("subscribe-filter-hash-not-last", 4, mb.gen_subscribe(1, "a/#/b"), MalformedPacket, MALFORMED),
    ("subscribe-filter-hash-in-level", 4, mb.gen_subscribe(1, "a/b#"), MalformedPacket, MALFORMED),
    (
        "subscribe-filter-plus-in-level",
        4,
        mb.gen_subscribe(1, "a/b+/c"),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "subscribe-shared-empty-group",
        4,
        mb.gen_subscribe(1, "$share//a"),
        MalformedPacket,
        MALFORMED,
    ),
    ("subscribe-shared-no-filter", 4, mb.gen_subscribe(1, "$share/g"), MalformedPacket, MALFORMED),
    (
        "subscribe-shared-wildcard-group",
        4,
        mb.gen_subscribe(1, "$share/g+/a"),
        MalformedPacket,
        MALFORMED,
    ),
    ("unsubscribe-no-filters", 4, mb.gen_unsubscribe(1, []), ProtocolViolation, PROTOCOL),
    ("unsubscribe-bad-filter", 4, mb.gen_unsubscribe(1, "#/a"), MalformedPacket, MALFORMED),
    (
        "property-duplicate",
        5,
        mb.gen_publish("t", proto_ver=5, properties=[("content_type", "a"), ("content_type", "b")]),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "property-unknown-id",
        5,
        mb.gen_publish("t", proto_ver=5, properties=mb.raw_props(b"\x7f\x00")),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "property-not-allowed-in-packet",
        5,
        mb.gen_publish("t", proto_ver=5, properties=[("session_expiry_interval", 1)]),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "property-length-past-end",
        5,
        mb.gen_publish("t", proto_ver=5, properties=mb.raw_props(b"", length=50)),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "property-truncated-value",
        5,
        mb.gen_publish("t", proto_ver=5, properties=mb.raw_props(b"\x02\x00\x00")),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "property-payload-format-2",
        5,
        mb.gen_publish("t", proto_ver=5, properties=[("payload_format_indicator", 2)]),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "property-receive-maximum-0",
        None,
        mb.gen_connect("c", proto_ver=5, properties=[("receive_maximum", 0)]),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "property-max-packet-size-0",
        None,
        mb.gen_connect("c", proto_ver=5, properties=[("maximum_packet_size", 0)]),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "property-subscription-id-0",
        5,
        mb.gen_subscribe(1, "a", proto_ver=5, properties=[("subscription_identifier", 0)]),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "property-subscription-id-twice",
        5,
        mb.gen_subscribe(
            1,
            "a",
            proto_ver=5,
            properties=[("subscription_identifier", 1), ("subscription_identifier", 2)],
        ),
        ProtocolViolation,
        PROTOCOL,
    ),
    (
        "property-string-invalid-utf8",
        5,
        mb.gen_publish("t", proto_ver=5, properties=mb.raw_props(b"\x03\x00\x01\xff")),
        MalformedPacket,
        MALFORMED,
    ),
    (
        "property-user-nul",
        5,
        mb.gen_publish("t", proto_ver=5, properties=mb.raw_props(b"\x26\x00\x01\x00\x00\x01a")),
        MalformedPacket,
        MALFORMED,
    ),
    ("puback-v5-bad-reason", 5, mb.gen_puback(1, 0x05, proto_ver=5), ProtocolViolation, PROTOCOL),
    (
        "disconnect-v5-bad-reason",
        5,
        mb.gen_disconnect(0x01, proto_ver=5),
        ProtocolViolation,
        PROTOCOL,
    ),
]


@pytest.mark.parametrize(
    ("level", "data", "error", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_input_raises_with_reason_code(
    level: int | None, data: bytes, error: type[ProtocolError], code: int
) -> None:
    with pytest.raises(error) as caught:
        Decoder(protocol_level=level).feed(data)
    assert type(caught.value) is error
    assert caught.value.reason_code == code


@pytest.mark.parametrize(
    ("level", "data", "error", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_input_fed_byte_by_byte(
    level: int | None, data: bytes, error: type[ProtocolError], code: int
) -> None:
    decoder = Decoder(protocol_level=level)
    with pytest.raises(error):
        for i in range(len(data)):
            decoder.feed(data[i : i + 1])


def test_packet_over_the_maximum_size_is_refused_before_it_arrives() -> None:
    decoder = Decoder(max_packet_size=100, protocol_level=4)
    header = mb.gen_publish("t", b"x" * 200)[:4]
    with pytest.raises(ProtocolError) as caught:
        decoder.feed(header)
    assert caught.value.reason_code == 0x95


def test_packets_before_an_error_are_returned_then_the_error_is_raised() -> None:
    decoder = Decoder(protocol_level=4)
    good = mb.gen_publish("ok", b"1")
    packets = decoder.feed(good + mb.gen_publish("a/#"))
    assert [p.topic for p in packets] == ["ok"]  # type: ignore[union-attr]
    assert isinstance(decoder.error, ProtocolViolation)
    with pytest.raises(ProtocolViolation):
        decoder.feed(good)


def test_password_without_username_is_allowed_in_mqtt5() -> None:
    data = mb.gen_connect("c", proto_ver=5, password=b"secret")
    [connect] = Decoder().feed(data)
    assert connect.password == b"secret"  # type: ignore[union-attr]
    assert connect.username is None  # type: ignore[union-attr]
