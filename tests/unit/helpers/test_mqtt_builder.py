"""The independent MQTT builder against the specifications' own examples, paho-mqtt's property
encoder, and its own parser (round trips)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.helpers import mqtt_builder as mb

# ---------------------------------------------------------------------------------------------
# Data representation
# ---------------------------------------------------------------------------------------------

# MQTT 3.1.1 Table 2.4 / MQTT 5.0 Table 1-1: Size of Variable Byte Integer.
VARINT_EXAMPLES = [
    (0, "00"),
    (127, "7f"),
    (128, "80 01"),
    (16_383, "ff 7f"),
    (16_384, "80 80 01"),
    (2_097_151, "ff ff 7f"),
    (2_097_152, "80 80 80 01"),
    (268_435_455, "ff ff ff 7f"),
]


@pytest.mark.parametrize(("value", "encoded"), VARINT_EXAMPLES)
def test_varint_matches_spec_table(value: int, encoded: str) -> None:
    assert mb.varint(value).hex(" ") == encoded
    assert mb.decode_varint(bytes.fromhex(encoded)) == (value, len(bytes.fromhex(encoded)))


def test_varint_width_pads_with_continuation_bytes() -> None:
    assert mb.varint(0, width=2).hex(" ") == "80 00"
    assert mb.varint(1, width=5).hex(" ") == "81 80 80 80 00"
    with pytest.raises(ValueError, match="cannot encode"):
        mb.varint(128, width=1)


def test_decode_varint_rejects_five_bytes_and_truncation() -> None:
    with pytest.raises(mb.ParseError, match="four bytes"):
        mb.decode_varint(bytes.fromhex("ff ff ff ff 7f"))
    with pytest.raises(mb.ParseError, match="truncated"):
        mb.decode_varint(bytes.fromhex("ff ff"))


def test_utf8_string_example_from_spec() -> None:
    # MQTT 3.1.1 1.5.3.1 / MQTT 5.0 1.5.4.1 example: "A\U0002A6D4" -> 00 05 41 F0 AA 9B 94.
    assert mb.utf8("A\U0002a6d4").hex(" ") == "00 05 41 f0 aa 9b 94"


def test_utf8_raw_bytes_and_length_override() -> None:
    assert mb.utf8(b"\xc0\x80").hex(" ") == "00 02 c0 80"
    assert mb.utf8("ab", length=7).hex(" ") == "00 07 61 62"


def test_raw_packet_any_first_byte_and_length() -> None:
    assert mb.raw_packet(0x31, b"xy").hex(" ") == "31 02 78 79"
    assert mb.raw_packet(0x30, b"", remaining_length=5).hex(" ") == "30 05"
    assert mb.raw_packet(0xC0, b"", width=5).hex(" ") == "c0 80 80 80 80 00"


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


def _paho_name(name: str) -> str:
    return name.replace("_", " ").title().replace("Qos", "QoS")


def test_property_table_matches_paho() -> None:
    names = Properties(PacketTypes.PUBLISH).names
    assert {_paho_name(n): pid for pid, (n, _) in mb.PROPERTIES.items()} == names


SAMPLE_VALUES = {
    mb.PropType.BYTE: 1,
    mb.PropType.TWO_BYTE_INT: 0x1234,
    mb.PropType.FOUR_BYTE_INT: 0x01020304,
    mb.PropType.VARINT: 200_000,
    mb.PropType.UTF8: "t\u00e9st/\u6f22",
    mb.PropType.BINARY: b"\x00\xffbin",
    mb.PropType.STRING_PAIR: ("k\u00e9y", "v\u00e0lue"),
}


@pytest.mark.parametrize("pid", sorted(mb.PROPERTIES))
def test_each_property_encodes_like_paho(pid: int) -> None:
    name, prop_type = mb.PROPERTIES[pid]
    packet_type = Properties(PacketTypes.PUBLISH).properties[pid][1][0]
    paho = Properties(packet_type)
    value = SAMPLE_VALUES[prop_type]
    setattr(paho, _paho_name(name).replace(" ", ""), [value] if pid == 0x26 else value)
    assert mb.props(**{name: value}).hex(" ") == paho.pack().hex(" ")


def test_props_keeps_order_and_duplicates() -> None:
    block = mb.props(
        ("payload_format_indicator", 1),
        (0x01, 0),
        user_property=[("a", "1"), ("b", "2")],
    )
    assert block.hex(" ") == "12 01 01 01 00 26 00 01 61 00 01 31 26 00 01 62 00 01 32"
    assert mb.props().hex() == "00"


def test_single_user_property_pair_keyword() -> None:
    assert mb.props(user_property=("a", "b")) == mb.props(user_property=[("a", "b")])


def test_unknown_property_needs_a_type() -> None:
    with pytest.raises(ValueError, match="prop_type"):
        mb.prop(0x7F, 1)
    assert mb.prop(0x7F, 1, prop_type=mb.PropType.BYTE).hex(" ") == "7f 01"


# ---------------------------------------------------------------------------------------------
# Golden packets, worked out by hand from the specifications' tables
# ---------------------------------------------------------------------------------------------

GOLDEN = [
    (
        "connect 3.1.1",
        mb.gen_connect("abc"),
        "10 0f 00 04 4d 51 54 54 04 02 00 3c 00 03 61 62 63",
    ),
    (
        "connect 3.1",
        mb.gen_connect("abc", proto_ver=3),
        "10 11 00 06 4d 51 49 73 64 70 03 02 00 3c 00 03 61 62 63",
    ),
    (
        "connect 5 (spec 3.1.2.12 variable header example)",
        mb.gen_connect(
            "",
            proto_ver=5,
            keepalive=10,
            username="u",
            password=b"p",
            properties={"session_expiry_interval": 10},
        ),
        "10 18 00 04 4d 51 54 54 05 c2 00 0a 05 11 00 00 00 0a 00 00 00 01 75 00 01 70",
    ),
    (
        "connect 3.1.1 with will",
        mb.gen_connect(
            "c",
            clean_session=False,
            will_topic="w",
            will_payload=b"x",
            will_qos=1,
            will_retain=True,
        ),
        "10 13 00 04 4d 51 54 54 04 2c 00 3c 00 01 63 00 01 77 00 01 78",
    ),
    (
        "connect 5 with will properties",
        mb.gen_connect(
            "c", proto_ver=5, will_topic="w", will_properties={"will_delay_interval": 5}
        ),
        "10 19 00 04 4d 51 54 54 05 06 00 3c 00 00 01 63 05 18 00 00 00 05 00 01 77 00 00",
    ),
    ("connack 3.1.1", mb.gen_connack(True, 0), "20 02 01 00"),
    ("connack 5", mb.gen_connack(reason_code=0x85, proto_ver=5), "20 03 00 85 00"),
    (
        "publish qos1",
        mb.gen_publish("a/b", b"hi", qos=1, mid=10),
        "32 09 00 03 61 2f 62 00 0a 68 69",
    ),
    (
        "publish qos2 dup retain",
        mb.gen_publish("a", b"", qos=2, mid=1, dup=True, retain=True),
        "3d 05 00 01 61 00 01",
    ),
    (
        "publish 5 with topic alias",
        mb.gen_publish("", b"x", proto_ver=5, properties={"topic_alias": 3}),
        "30 07 00 00 03 23 00 03 78",
    ),
    ("puback", mb.gen_puback(1), "40 02 00 01"),
    ("puback 5 short", mb.gen_puback(1, proto_ver=5), "40 02 00 01"),
    ("puback 5 reason", mb.gen_puback(1, 0x10, proto_ver=5), "40 03 00 01 10"),
    (
        "puback 5 reason and properties",
        mb.gen_puback(1, 0x80, proto_ver=5, properties=mb.props(reason_string="no")),
        "40 09 00 01 80 05 1f 00 02 6e 6f",
    ),
    ("pubrec", mb.gen_pubrec(258), "50 02 01 02"),
    ("pubrel", mb.gen_pubrel(2), "62 02 00 02"),
    ("pubrel 5 not found", mb.gen_pubrel(2, 0x92, proto_ver=5), "62 03 00 02 92"),
    ("pubcomp", mb.gen_pubcomp(2), "70 02 00 02"),
    ("subscribe", mb.gen_subscribe(1, "a/#", 1), "82 08 00 01 00 03 61 2f 23 01"),
    (
        "subscribe 5 options and id",
        mb.gen_subscribe(
            7,
            [("a", mb.sub_options(2, no_local=True, retain_as_published=True, retain_handling=2))],
            proto_ver=5,
            properties={"subscription_identifier": 300},
        ),
        "82 0a 00 07 03 0b ac 02 00 01 61 2e",
    ),
    ("suback", mb.gen_suback(1, [0, 1, 2, 0x80]), "90 06 00 01 00 01 02 80"),
    ("suback 5", mb.gen_suback(1, [0x8F], proto_ver=5), "90 04 00 01 00 8f"),
    ("unsubscribe", mb.gen_unsubscribe(3, ["a", "b/c"]), "a2 0a 00 03 00 01 61 00 03 62 2f 63"),
    ("unsuback", mb.gen_unsuback(3), "b0 02 00 03"),
    ("unsuback 5", mb.gen_unsuback(3, [0x00, 0x11], proto_ver=5), "b0 05 00 03 00 00 11"),
    ("pingreq", mb.gen_pingreq(), "c0 00"),
    ("pingresp", mb.gen_pingresp(), "d0 00"),
    ("disconnect", mb.gen_disconnect(), "e0 00"),
    ("disconnect 5 normal", mb.gen_disconnect(proto_ver=5), "e0 00"),
    ("disconnect 5 with will", mb.gen_disconnect(0x04, proto_ver=5), "e0 01 04"),
    (
        "disconnect 5 session expiry",
        mb.gen_disconnect(0, proto_ver=5, properties={"session_expiry_interval": 0}),
        "e0 07 00 05 11 00 00 00 00",
    ),
    ("auth", mb.gen_auth(), "f0 00"),
    (
        "auth continue",
        mb.gen_auth(0x18, properties={"authentication_method": "m"}),
        "f0 06 18 04 15 00 01 6d",
    ),
]


@pytest.mark.parametrize(("data", "expected"), [g[1:] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_golden_bytes(data: bytes, expected: str) -> None:
    assert data.hex(" ") == expected


@pytest.mark.parametrize(("name", "data"), [g[:2] for g in GOLDEN], ids=[g[0] for g in GOLDEN])
def test_golden_bytes_parse_back_completely(name: str, data: bytes) -> None:
    level = 5 if " 5" in name or name.startswith("auth") else 4
    packet = mb.parse_packet(data, level)
    assert packet.raw == data
    assert packet.remaining_length == len(data) - 1 - len(mb.varint(packet.remaining_length))


# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------


def test_parse_connect_fields() -> None:
    data = mb.gen_connect(
        "cid",
        proto_ver=5,
        clean_session=False,
        keepalive=30,
        username="u",
        password=b"pw",
        will_topic="w/t",
        will_payload=b"bye",
        will_qos=2,
        will_retain=True,
        will_properties={"will_delay_interval": 9},
        properties={"receive_maximum": 4},
    )
    packet = mb.parse_packet(data, 5)
    assert packet.name == "CONNECT"
    assert (packet.protocol_name, packet.protocol_level) == ("MQTT", 5)
    assert (packet.client_id, packet.keepalive, packet.clean_session) == ("cid", 30, False)
    assert packet.properties == {"receive_maximum": 4}
    assert packet.will_properties == {"will_delay_interval": 9}
    assert (packet.will_topic, packet.will_payload, packet.qos, packet.retain) == (
        "w/t",
        b"bye",
        2,
        True,
    )
    assert (packet.username, packet.password) == ("u", b"pw")


def test_parse_publish_v5_properties_in_order() -> None:
    data = mb.gen_publish(
        "t",
        b"p",
        qos=1,
        mid=5,
        proto_ver=5,
        properties=mb.props(
            ("user_property", ("z", "1")),
            ("subscription_identifier", 3),
            ("user_property", ("a", "2")),
            ("subscription_identifier", 1),
        ),
    )
    packet = mb.parse_packet(data, 5)
    assert packet.user_properties == [("z", "1"), ("a", "2")]
    assert packet.properties["subscription_identifier"] == [3, 1]
    assert [name for name, _ in packet.property_list] == [
        "user_property",
        "subscription_identifier",
        "user_property",
        "subscription_identifier",
    ]


def test_parse_v5_acks_short_forms() -> None:
    assert mb.parse_packet(bytes.fromhex("40 02 00 07"), 5).reason_code == 0
    assert mb.parse_packet(bytes.fromhex("40 03 00 07 10"), 5).reason_code == 0x10
    assert mb.parse_packet(bytes.fromhex("e0 00"), 5).reason_code == 0
    assert mb.parse_packet(bytes.fromhex("e0 01 8e"), 5).reason_code == 0x8E


def test_parse_suback_and_unsuback() -> None:
    suback = mb.parse_packet(mb.gen_suback(9, [1, 0x80]), 4)
    assert (suback.packet_id, suback.reason_codes) == (9, [1, 0x80])
    unsuback = mb.parse_packet(mb.gen_unsuback(9, [0x11], proto_ver=5), 5)
    assert (unsuback.packet_id, unsuback.reason_codes) == (9, [0x11])


@pytest.mark.parametrize(
    ("data", "level", "message"),
    [
        (mb.raw_packet(0x41, b"\x00\x01"), 4, "reserved flags"),
        (mb.raw_packet(0x36, b"\x00\x01a\x00\x01"), 4, "QoS 3"),
        (mb.raw_packet(0x00, b""), 4, "reserved packet type"),
        (mb.gen_auth(), 4, "reserved packet type"),
        (mb.raw_packet(0x30, b"\x00\x02\xff\xfe"), 4, "UTF-8"),
        (mb.gen_pingresp() + b"\x00", 4, "remaining length"),
        (mb.raw_packet(0xD0, b"\x00"), 4, "remaining length of 1"),
        (
            mb.gen_publish(
                "t", proto_ver=5, properties=mb.props(("topic_alias", 1), ("topic_alias", 2))
            ),
            5,
            "more than once",
        ),
        (mb.gen_publish("t", proto_ver=5, properties=mb.raw_props(b"\x7f\x00")), 5, "unknown"),
        (mb.raw_packet(0x20, b"\x02\x00"), 4, "reserved flag bits"),
    ],
)
def test_parse_rejects(data: bytes, level: int, message: str) -> None:
    with pytest.raises(mb.ParseError, match=message):
        mb.parse_packet(data, level)


def test_split_packet_frames_a_stream_fed_byte_by_byte() -> None:
    packets = [
        mb.gen_connack(),
        mb.gen_publish("x" * 200, b"y" * 300, qos=1, mid=1),
        mb.gen_pingresp(),
    ]
    stream = b"".join(packets)
    buffer, got = b"", []
    for byte in stream:
        buffer += bytes([byte])
        while (framed := mb.split_packet(buffer)) is not None:
            packet, buffer = framed
            got.append(packet)
    assert got == packets
    assert buffer == b""


def test_split_packet_rejects_five_byte_length() -> None:
    with pytest.raises(mb.ParseError):
        mb.split_packet(bytes.fromhex("30 ff ff ff ff 7f"))


def test_misuse_raises() -> None:
    with pytest.raises(ValueError, match="packet identifier"):
        mb.gen_publish("t", qos=1)
    with pytest.raises(ValueError, match="MQTT 5"):
        mb.gen_puback(1, 0x10)
    with pytest.raises(ValueError, match="MQTT 5"):
        mb.gen_publish("t", properties={"topic_alias": 1})


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------

topics = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#"), max_size=40
)


@given(
    topic=topics,
    payload=st.binary(max_size=300),
    qos=st.integers(0, 2),
    retain=st.booleans(),
    mid=st.integers(1, 65535),
    level=st.sampled_from([3, 4, 5]),
    user=st.lists(st.tuples(topics, topics), max_size=3),
    expiry=st.none() | st.integers(0, 2**32 - 1),
)
def test_publish_round_trip(
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    mid: int,
    level: int,
    user: list[tuple[str, str]],
    expiry: int | None,
) -> None:
    properties = None
    if level == 5:
        named: dict[str, object] = {"user_property": user}
        if expiry is not None:
            named["message_expiry_interval"] = expiry
        properties = mb.props(**named)
    data = mb.gen_publish(
        topic,
        payload,
        qos=qos,
        retain=retain,
        mid=mid if qos else None,
        proto_ver=level,
        properties=properties,
    )
    packet = mb.parse_packet(data, level)
    assert (packet.topic, packet.payload, packet.qos, packet.retain) == (
        topic,
        payload,
        qos,
        retain,
    )
    assert packet.packet_id == (mid if qos else None)
    if level == 5:
        assert packet.user_properties == user
        assert packet.properties.get("message_expiry_interval") == expiry


@given(
    filters=st.lists(st.tuples(topics, st.integers(0, 0x3F)), min_size=1, max_size=5),
    mid=st.integers(1, 65535),
    level=st.sampled_from([4, 5]),
)
def test_subscribe_round_trip(filters: list[tuple[str, int]], mid: int, level: int) -> None:
    packet = mb.parse_packet(mb.gen_subscribe(mid, filters, proto_ver=level), level)
    assert packet.packet_id == mid
    assert packet.subscriptions == filters
