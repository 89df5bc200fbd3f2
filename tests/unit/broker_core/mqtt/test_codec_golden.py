"""Golden (packet, bytes) tables for every control packet at every protocol level.

Expected bytes come from the independent builder in tests/helpers/mqtt_builder.py.
Each row is checked both ways (encode gives the bytes; decoding the bytes, whole and
one byte at a time, gives the packet).
"""

from __future__ import annotations

import pytest

from broker_core.mqtt.codec import Decoder
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    SubscriptionOptions,
    TopicSubscription,
    Unsuback,
    Unsubscribe,
    Will,
)
from broker_core.mqtt.properties import Properties
from tests.helpers import mqtt_builder as mb

# (id, protocol level, packet, expected bytes)
ROWS: list[tuple[str, int, Packet, bytes]] = []


def row(name: str, level: int, packet: Packet, data: bytes) -> None:
    ROWS.append((f"{name}-v{level}", level, packet, data))


for level in (3, 4, 5):
    name = "MQIsdp" if level == 3 else "MQTT"
    row(
        "connect-minimal",
        level,
        Connect("c1", level, protocol_name=name),
        mb.gen_connect("c1", proto_ver=level),
    )
    row(
        "connect-full",
        level,
        Connect(
            "client-ü",
            level,
            clean_start=False,
            keep_alive=300,
            username="user",
            password=b"\x00pw",
            will=Will("will/t", b"bye", 2, True),
            protocol_name=name,
        ),
        mb.gen_connect(
            "client-ü",
            proto_ver=level,
            clean_session=False,
            keepalive=300,
            username="user",
            password=b"\x00pw",
            will_topic="will/t",
            will_payload=b"bye",
            will_qos=2,
            will_retain=True,
        ),
    )
    row(
        "publish-qos0",
        level,
        Publish("a/b", b"payload"),
        mb.gen_publish("a/b", b"payload", proto_ver=level),
    )
    row(
        "publish-qos1-retain-dup",
        level,
        Publish("a/b", b"", 1, retain=True, dup=True, packet_id=65535),
        mb.gen_publish("a/b", b"", qos=1, retain=True, dup=True, mid=65535, proto_ver=level),
    )
    row(
        "publish-qos2",
        level,
        Publish("x", b"\xff" * 200, 2, packet_id=7),
        mb.gen_publish("x", b"\xff" * 200, qos=2, mid=7, proto_ver=level),
    )
    row("puback", level, Puback(1), mb.gen_puback(1, proto_ver=level))
    row("pubrec", level, Pubrec(2), mb.gen_pubrec(2, proto_ver=level))
    row("pubrel", level, Pubrel(3), mb.gen_pubrel(3, proto_ver=level))
    row("pubcomp", level, Pubcomp(4), mb.gen_pubcomp(4, proto_ver=level))
    row(
        "subscribe",
        level,
        Subscribe(
            10,
            (
                TopicSubscription("a/+", SubscriptionOptions(1)),
                TopicSubscription("b/#", SubscriptionOptions(2)),
            ),
        ),
        mb.gen_subscribe(10, [("a/+", 1), ("b/#", 2)], proto_ver=level),
    )
    row(
        "suback",
        level,
        Suback(10, (0, 1, 2, 0x80)),
        mb.gen_suback(10, [0, 1, 2, 0x80], proto_ver=level),
    )
    row(
        "unsubscribe",
        level,
        Unsubscribe(11, ("a/+", "b")),
        mb.gen_unsubscribe(11, ["a/+", "b"], proto_ver=level),
    )
    row("pingreq", level, Pingreq(), mb.gen_pingreq())
    row("pingresp", level, Pingresp(), mb.gen_pingresp())
    row("disconnect", level, Disconnect(), mb.gen_disconnect(proto_ver=level))

for level in (3, 4):
    # MQTT 3.1 has no session present flag (the byte is reserved): both ways it is 0.
    row("connack", level, Connack(level != 3, 0), mb.gen_connack(True, 0, proto_ver=level))
    row("connack-refused", level, Connack(False, 5), mb.gen_connack(False, 5, proto_ver=level))
    row("unsuback", level, Unsuback(11), mb.gen_unsuback(11, proto_ver=level))

# MQTT 5 only: properties, reason codes, AUTH.
row(
    "connect-properties",
    5,
    Connect(
        "c5",
        5,
        properties=Properties(
            session_expiry_interval=3600,
            authentication_method="SCRAM-SHA-256",
            authentication_data=b"n,,n=user",
            request_problem_information=0,
            request_response_information=1,
            receive_maximum=10,
            topic_alias_maximum=5,
            user_properties=(("k", "v"), ("k", "w")),
            maximum_packet_size=4096,
        ),
        will=Will(
            "w",
            b"x",
            1,
            False,
            Properties(
                payload_format_indicator=1,
                message_expiry_interval=9,
                content_type="text/plain",
                response_topic="r/t",
                correlation_data=b"\x01\x02",
                will_delay_interval=30,
            ),
        ),
    ),
    mb.gen_connect(
        "c5",
        proto_ver=5,
        will_topic="w",
        will_payload=b"x",
        will_qos=1,
        will_properties=[
            ("payload_format_indicator", 1),
            ("message_expiry_interval", 9),
            ("content_type", "text/plain"),
            ("response_topic", "r/t"),
            ("correlation_data", b"\x01\x02"),
            ("will_delay_interval", 30),
        ],
        properties=[
            ("session_expiry_interval", 3600),
            ("authentication_method", "SCRAM-SHA-256"),
            ("authentication_data", b"n,,n=user"),
            ("request_problem_information", 0),
            ("request_response_information", 1),
            ("receive_maximum", 10),
            ("topic_alias_maximum", 5),
            ("user_property", ("k", "v")),
            ("user_property", ("k", "w")),
            ("maximum_packet_size", 4096),
        ],
    ),
)
row(
    "connack-properties",
    5,
    Connack(
        True,
        0,
        Properties(
            session_expiry_interval=60,
            assigned_client_identifier="auto-1",
            server_keep_alive=30,
            response_information="resp/",
            server_reference="other:1883",
            reason_string="welcome",
            receive_maximum=32,
            topic_alias_maximum=10,
            maximum_qos=1,
            retain_available=0,
            maximum_packet_size=65536,
            wildcard_subscription_available=0,
            subscription_identifier_available=0,
            shared_subscription_available=0,
        ),
    ),
    mb.gen_connack(
        True,
        0,
        proto_ver=5,
        properties=[
            ("session_expiry_interval", 60),
            ("assigned_client_identifier", "auto-1"),
            ("server_keep_alive", 30),
            ("response_information", "resp/"),
            ("server_reference", "other:1883"),
            ("reason_string", "welcome"),
            ("receive_maximum", 32),
            ("topic_alias_maximum", 10),
            ("maximum_qos", 1),
            ("retain_available", 0),
            ("maximum_packet_size", 65536),
            ("wildcard_subscription_available", 0),
            ("subscription_identifier_available", 0),
            ("shared_subscription_available", 0),
        ],
    ),
)
row("connack-refused", 5, Connack(False, 0x87), mb.gen_connack(False, 0x87, proto_ver=5))
row(
    "publish-properties",
    5,
    Publish(
        "t",
        b"{}",
        1,
        packet_id=9,
        properties=Properties(
            payload_format_indicator=1,
            message_expiry_interval=120,
            content_type="application/json",
            response_topic="reply/here",
            correlation_data=b"id-1",
            subscription_identifiers=(1, 268435455),
            topic_alias=3,
            user_properties=(("a", "1"), ("b", "2"), ("a", "3")),
        ),
    ),
    mb.gen_publish(
        "t",
        b"{}",
        qos=1,
        mid=9,
        proto_ver=5,
        properties=[
            ("payload_format_indicator", 1),
            ("message_expiry_interval", 120),
            ("content_type", "application/json"),
            ("response_topic", "reply/here"),
            ("correlation_data", b"id-1"),
            ("subscription_identifier", 1),
            ("subscription_identifier", 268435455),
            ("topic_alias", 3),
            ("user_property", ("a", "1")),
            ("user_property", ("b", "2")),
            ("user_property", ("a", "3")),
        ],
    ),
)
row("puback-reason", 5, Puback(1, 0x10), mb.gen_puback(1, 0x10, proto_ver=5))
row(
    "pubrec-reason-props",
    5,
    Pubrec(2, 0x87, Properties(reason_string="no", user_properties=(("x", "y"),))),
    mb.gen_pubrec(
        2, 0x87, proto_ver=5, properties=[("reason_string", "no"), ("user_property", ("x", "y"))]
    ),
)
row("pubrel-not-found", 5, Pubrel(3, 0x92), mb.gen_pubrel(3, 0x92, proto_ver=5))
row("pubcomp-not-found", 5, Pubcomp(4, 0x92), mb.gen_pubcomp(4, 0x92, proto_ver=5))
row(
    "subscribe-options",
    5,
    Subscribe(
        12,
        (
            TopicSubscription(
                "a/#",
                SubscriptionOptions(2, no_local=True, retain_as_published=True, retain_handling=2),
            ),
            TopicSubscription("$share/g/b", SubscriptionOptions(1, retain_handling=1)),
        ),
        Properties(subscription_identifiers=(42,), user_properties=(("u", "v"),)),
    ),
    mb.gen_subscribe(
        12,
        [
            ("a/#", mb.sub_options(2, no_local=True, retain_as_published=True, retain_handling=2)),
            ("$share/g/b", mb.sub_options(1, retain_handling=1)),
        ],
        proto_ver=5,
        properties=[("subscription_identifier", 42), ("user_property", ("u", "v"))],
    ),
)
row(
    "suback-v5",
    5,
    Suback(12, (2, 0x87, 0x9E, 0xA1, 0xA2)),
    mb.gen_suback(12, [2, 0x87, 0x9E, 0xA1, 0xA2], proto_ver=5),
)
row("unsuback-v5", 5, Unsuback(13, (0, 0x11)), mb.gen_unsuback(13, [0, 0x11], proto_ver=5))
row("disconnect-reason", 5, Disconnect(0x04), mb.gen_disconnect(0x04, proto_ver=5))
row(
    "disconnect-props",
    5,
    Disconnect(
        0x8E, Properties(session_expiry_interval=0, reason_string="taken", server_reference="s2")
    ),
    mb.gen_disconnect(
        0x8E,
        proto_ver=5,
        properties=[
            ("session_expiry_interval", 0),
            ("server_reference", "s2"),
            ("reason_string", "taken"),
        ],
    ),
)
row("auth-success", 5, Auth(), mb.gen_auth())
row(
    "auth-continue",
    5,
    Auth(0x18, Properties(authentication_method="SCRAM-SHA-256", authentication_data=b"r=abc")),
    mb.gen_auth(
        0x18,
        properties=[("authentication_method", "SCRAM-SHA-256"), ("authentication_data", b"r=abc")],
    ),
)


def decoder_for(packet: Packet, level: int) -> Decoder:
    # CONNECT teaches a server-side decoder its level; other packets need it given.
    return Decoder(protocol_level=None if isinstance(packet, Connect) else level)


@pytest.mark.parametrize(
    ("level", "packet", "data"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_encode_gives_the_builders_bytes(level: int, packet: Packet, data: bytes) -> None:
    assert encode(packet, level) == data


@pytest.mark.parametrize(
    ("level", "packet", "data"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_decode_whole(level: int, packet: Packet, data: bytes) -> None:
    assert decoder_for(packet, level).feed(data) == [packet]


@pytest.mark.parametrize(
    ("level", "packet", "data"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_decode_one_byte_at_a_time(level: int, packet: Packet, data: bytes) -> None:
    decoder = decoder_for(packet, level)
    out: list[Packet] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
        if i < len(data) - 1:
            assert out == []
    assert out == [packet]


def test_many_packets_in_one_feed_keep_their_order() -> None:
    packets = [
        Publish(f"t/{i}", bytes([i]) * i, i % 3, packet_id=i if i % 3 else None)
        for i in range(1, 50)
    ]
    stream = b"".join(encode(p, 4) for p in packets)
    decoder = Decoder(protocol_level=4)
    out: list[Packet] = []
    for start in range(0, len(stream), 37):
        out += decoder.feed(stream[start : start + 37])
    assert out == packets


@pytest.mark.parametrize("size", [127, 128, 16383, 16384, 2_097_151, 2_097_152])
def test_remaining_length_boundaries(size: int) -> None:
    payload = b"p" * (size - 2 - 1)  # topic length field + 1-byte topic
    data = mb.gen_publish("t", payload)
    assert data[1:].startswith(mb.varint(size))
    assert encode(Publish("t", payload), 4) == data
    assert Decoder(protocol_level=4).feed(data) == [Publish("t", payload)]


def test_a_large_packet_in_small_chunks() -> None:
    packet = Publish("big", bytes(range(256)) * 4000, 1, packet_id=1)
    data = encode(packet, 5)
    decoder = Decoder(protocol_level=5)
    out: list[Packet] = []
    for start in range(0, len(data), 1000):
        out += decoder.feed(data[start : start + 1000])
    assert out == [packet]
