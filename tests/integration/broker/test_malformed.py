"""Malformed input over raw sockets: each rule closes that connection (MQTT 5: with a
DISCONNECT, or CONNACK for a bad CONNECT, carrying the reason code the specification
names) while a client connected before keeps working, proven by a publish and receive.

MQTT 5.0 4.13 / 3.1.1 4.8: on a Malformed Packet or Protocol Error the Server MUST close
the Network Connection [MQTT-4.13.1-1]; in MQTT 5 it SHOULD first send DISCONNECT with
the reason code (here required), and MAY send CONNACK with it for an error in CONNECT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import Clients, raw_publish_ok

RC = mb.ReasonCode
MALFORMED = {RC.MALFORMED_PACKET}
PROTOCOL = {RC.PROTOCOL_ERROR}
MALFORMED_OR_PROTOCOL = MALFORMED | PROTOCOL
MAX_PACKET = 2048

pytestmark = pytest.mark.gateway_config(f"mqtt:\n  max_packet_size: {MAX_PACKET}\n")


@dataclass(frozen=True)
class Case:
    """One malformed-input rule: the bytes (for a protocol level) and what must follow."""

    name: str
    build: Callable[[int], bytes]
    codes: set[int]  # MQTT 5 reason codes allowed in the DISCONNECT / CONNACK
    in_connect: bool = False  # the bytes replace CONNECT (else: sent once connected)
    protos: tuple[int, ...] = (4, 5)
    v311_connack: set[int] = field(default_factory=set)  # 3.1.1 CONNACK codes allowed


def _publish(topic: bytes, *, qos: int = 0, mid: int | None = None, proto: int) -> bytes:
    """A PUBLISH whose topic is given as raw bytes."""
    flags = qos << 1
    body = mb.utf8(topic) + (mb.u16(mid) if mid is not None else b"")
    body += b"\x00" if proto == 5 else b""
    return mb.fixed_header(mb.PacketType.PUBLISH, flags, len(body) + 1) + body + b"x"


def _subscribe(topic_filter: bytes, proto: int, mid: int = 1) -> bytes:
    return mb.gen_subscribe(mid, [(topic_filter, 1)], proto_ver=proto)


def _unsubscribe(topic_filter: bytes, proto: int, mid: int = 1) -> bytes:
    return mb.gen_unsubscribe(mid, [topic_filter], proto_ver=proto)


def _big_publish(size: int, proto: int) -> bytes:
    frame = mb.gen_publish("big/t", b"", qos=1, mid=1, proto_ver=proto)
    return mb.gen_publish("big/t", b"x" * (size - len(frame) - 1), qos=1, mid=1, proto_ver=proto)


CASES = [
    # -- Remaining Length: at most four bytes (5.0 2.1.4; 3.1.1 2.2.3), minimally encoded in
    #    MQTT 5 only (5.0 1.5.5 [MQTT-1.5.5-1]; 3.1.1: test_remaining_length_non_minimal.py) --
    Case("remaining-length-5-bytes", lambda p: b"\x30" + mb.varint(268_435_456), MALFORMED),
    Case(
        "remaining-length-5-bytes-padded",
        lambda p: mb.raw_packet(0xC0, b"", width=5),
        MALFORMED,
    ),
    Case(
        "remaining-length-non-minimal",
        lambda p: mb.raw_packet(0xC0, b"", width=2),
        MALFORMED,
        protos=(5,),
    ),
    Case(
        "remaining-length-non-minimal-publish",
        lambda p: mb.raw_packet(0x30, mb.utf8("a/b") + b"\x00x", width=3),
        MALFORMED,
        protos=(5,),
    ),
    Case(
        "remaining-length-5-bytes-connect",
        lambda p: b"\x10" + mb.varint(0, width=5),
        MALFORMED,
        in_connect=True,
    ),
    # -- Reserved fixed-header flags (5.0 2.1.3 [MQTT-2.1.3-1]; 3.1.1 [MQTT-2.2.2-1, -2]) ----
    Case(
        "subscribe-flags-0", lambda p: mb.gen_subscribe(1, "a/b", proto_ver=p, flags=0), MALFORMED
    ),
    Case(
        "unsubscribe-flags-0",
        lambda p: mb.gen_unsubscribe(1, "a/b", proto_ver=p, flags=0),
        MALFORMED,
    ),
    Case("pubrel-flags-0", lambda p: mb.gen_pubrel(1, proto_ver=p, flags=0), MALFORMED),
    Case("pingreq-flags-1", lambda p: mb.raw_packet(0xC1), MALFORMED),
    Case("puback-flags-2", lambda p: mb.raw_packet(0x42, mb.u16(1)), MALFORMED),
    Case("disconnect-flags-1", lambda p: mb.gen_disconnect(proto_ver=p, flags=1), MALFORMED),
    Case(
        "connect-header-flags-1",
        lambda p: mb.gen_connect("f", proto_ver=p, header_flags=1),
        MALFORMED,
        in_connect=True,
    ),
    Case(
        "connect-reserved-flag",
        lambda p: mb.gen_connect("f", proto_ver=p, reserved_flag=True),
        MALFORMED,
        in_connect=True,
    ),
    # 5.0 3.1.2.11.10: Authentication Data without an Authentication Method.
    Case(
        "connect-auth-data-without-method",
        lambda p: mb.gen_connect("f", proto_ver=p, properties=mb.props(authentication_data=b"x")),
        PROTOCOL,
        in_connect=True,
        protos=(5,),
    ),
    # [MQTT-3.3.1-4]: QoS 3; [MQTT-3.3.1-2]: DUP on QoS 0.
    Case(
        "publish-qos-3", lambda p: mb.gen_publish("a/b", b"x", qos=3, mid=1, proto_ver=p), MALFORMED
    ),
    Case(
        "publish-dup-qos-0",
        lambda p: mb.gen_publish("a/b", b"x", dup=True, proto_ver=p),
        MALFORMED_OR_PROTOCOL,
    ),
    # 5.0 3.3.2.3: an MQTT 5 PUBLISH ending after its topic has no Property Length; the
    # byte after it, here the start of the next packet, is not its properties (it was
    # taken for an empty Property Length and the message forwarded as it came:
    # malformed for every MQTT 5 subscriber, ``alive/#`` among them).
    Case(
        "publish-v5-no-property-length",
        lambda p: mb.fixed_header(mb.PacketType.PUBLISH, 0, 9) + mb.utf8("alive/x") + b"\x00",
        MALFORMED,
        protos=(5,),
    ),
    # Maximum QoS 3: a Protocol Error in MQTT 5 (3.8.3.1), malformed in 3.1.1 [MQTT-3.8.3-4].
    Case(
        "subscribe-maximum-qos-3",
        lambda p: mb.gen_subscribe(1, [("a/b", 3)], proto_ver=p),
        PROTOCOL,
    ),
    # Subscription options: reserved bits (5.0 [MQTT-3.8.3-5]; 3.1.1 [MQTT-3.8.3-4]).
    Case(
        "subscription-options-reserved-bits",
        lambda p: mb.gen_subscribe(
            1, [("a/b", mb.sub_options(1, reserved=1) if p == 5 else 0x41)], proto_ver=p
        ),
        MALFORMED,
    ),
    Case("reserved-packet-type-0", lambda p: mb.raw_packet(0x00), MALFORMED),
    Case("auth-in-mqtt-3.1.1", lambda p: mb.gen_auth(), MALFORMED, protos=(4,)),
    # -- UTF-8 strings: well-formed, no surrogates, no U+0000 (5.0 1.5.4 [MQTT-1.5.4-1, -2];
    #    3.1.1 1.5.3 [MQTT-1.5.3-1, -2]) ------------------------------------------------------
    Case("topic-invalid-utf8", lambda p: _publish(b"a/\xff", proto=p), MALFORMED),
    Case("topic-overlong-utf8", lambda p: _publish(b"a/\xc0\xaf", proto=p), MALFORMED),
    Case("topic-overlong-nul", lambda p: _publish(b"a/\xc0\x80", proto=p), MALFORMED),
    Case("topic-surrogate", lambda p: _publish(b"a/\xed\xa0\x80", proto=p), MALFORMED),
    Case("topic-u0000", lambda p: _publish(b"a/\x00b", proto=p), MALFORMED),
    Case(
        "topic-length-past-the-packet",
        lambda p: mb.raw_packet(0x30, mb.utf8(b"a/b", length=50)),
        MALFORMED,
    ),
    Case("filter-invalid-utf8", lambda p: _subscribe(b"a/\xfe", p), MALFORMED),
    Case("filter-u0000", lambda p: _subscribe(b"a/\x00", p), MALFORMED),
    Case("unsubscribe-filter-invalid-utf8", lambda p: _unsubscribe(b"\xe2\x82", p), MALFORMED),
    Case(
        "client-id-invalid-utf8",
        lambda p: mb.gen_connect(b"id\xff", proto_ver=p),
        MALFORMED | {RC.CLIENT_IDENTIFIER_NOT_VALID},
        in_connect=True,
        v311_connack={mb.ConnackCode.IDENTIFIER_REJECTED},
    ),
    Case(
        "client-id-u0000",
        lambda p: mb.gen_connect(b"id\x00x", proto_ver=p),
        MALFORMED | {RC.CLIENT_IDENTIFIER_NOT_VALID},
        in_connect=True,
        v311_connack={mb.ConnackCode.IDENTIFIER_REJECTED},
    ),
    Case(
        "will-topic-invalid-utf8",
        lambda p: mb.gen_connect("w", proto_ver=p, will_topic=b"w/\xff"),
        MALFORMED,
        in_connect=True,
    ),
    Case(
        "username-u0000",
        lambda p: mb.gen_connect("u", proto_ver=p, username=b"a\x00b"),
        MALFORMED,
        in_connect=True,
    ),
    Case(
        "user-property-invalid-utf8",
        lambda p: mb.gen_publish(
            "a/b",
            b"x",
            proto_ver=p,
            properties=mb.raw_props(b"\x26" + mb.utf8(b"k\xff") + mb.utf8("v")),
        ),
        MALFORMED,
        protos=(5,),
    ),
    # -- Wildcards in a Topic Name [MQTT-3.3.2-2] ---------------------------------------------
    Case(
        "publish-topic-plus",
        lambda p: mb.gen_publish("a/+", b"x", proto_ver=p),
        MALFORMED_OR_PROTOCOL | {RC.TOPIC_NAME_INVALID},
    ),
    Case(
        "publish-topic-hash",
        lambda p: mb.gen_publish("a/#", b"x", proto_ver=p),
        MALFORMED_OR_PROTOCOL | {RC.TOPIC_NAME_INVALID},
    ),
    Case(
        "publish-topic-only-hash",
        lambda p: mb.gen_publish("#", b"x", qos=1, mid=3, proto_ver=p),
        MALFORMED_OR_PROTOCOL | {RC.TOPIC_NAME_INVALID},
    ),
    Case(
        "will-topic-wildcard",
        lambda p: mb.gen_connect("w", proto_ver=p, will_topic="w/+"),
        MALFORMED_OR_PROTOCOL | {RC.TOPIC_NAME_INVALID},
        in_connect=True,
    ),
    # -- Malformed Topic Filters [MQTT-4.7.1-1, -2], [MQTT-4.7.3-1]; shared [MQTT-4.8.2-1, -2]
    Case("filter-hash-not-last", lambda p: _subscribe(b"a/#/b", p), MALFORMED_OR_PROTOCOL),
    Case("filter-hash-in-level", lambda p: _subscribe(b"a#", p), MALFORMED_OR_PROTOCOL),
    Case("filter-plus-in-level", lambda p: _subscribe(b"a/b+", p), MALFORMED_OR_PROTOCOL),
    Case("filter-plus-prefix", lambda p: _subscribe(b"+a/b", p), MALFORMED_OR_PROTOCOL),
    Case("filter-empty", lambda p: _subscribe(b"", p), MALFORMED_OR_PROTOCOL),
    Case("shared-empty-group", lambda p: _subscribe(b"$share//a", p), MALFORMED_OR_PROTOCOL),
    Case(
        "shared-wildcard-in-group", lambda p: _subscribe(b"$share/g+/a", p), MALFORMED_OR_PROTOCOL
    ),
    Case("shared-without-filter", lambda p: _subscribe(b"$share/g", p), MALFORMED_OR_PROTOCOL),
    Case("shared-empty-filter", lambda p: _subscribe(b"$share/g/", p), MALFORMED_OR_PROTOCOL),
    Case("unsubscribe-bad-filter", lambda p: _unsubscribe(b"a/#/b", p), MALFORMED_OR_PROTOCOL),
    Case(
        "subscribe-without-filters",
        lambda p: mb.gen_subscribe(1, [], proto_ver=p),
        MALFORMED_OR_PROTOCOL,
    ),
    # -- Packet Identifier 0 [MQTT-2.2.1-3] ---------------------------------------------------
    Case(
        "publish-qos1-packet-id-0",
        lambda p: mb.gen_publish("a/b", b"x", qos=1, mid=0, proto_ver=p),
        MALFORMED_OR_PROTOCOL,
    ),
    Case(
        "publish-qos2-packet-id-0",
        lambda p: mb.gen_publish("a/b", b"x", qos=2, mid=0, proto_ver=p),
        MALFORMED_OR_PROTOCOL,
    ),
    Case(
        "subscribe-packet-id-0",
        lambda p: mb.gen_subscribe(0, "a/b", proto_ver=p),
        MALFORMED_OR_PROTOCOL,
    ),
    Case(
        "unsubscribe-packet-id-0",
        lambda p: mb.gen_unsubscribe(0, "a/b", proto_ver=p),
        MALFORMED_OR_PROTOCOL,
    ),
    # -- Properties (5.0 2.2.2.2): twice where once is allowed: Protocol Error; an identifier
    #    not valid for the packet, or unknown: Malformed Packet --------------------------------
    Case(
        "publish-duplicate-message-expiry",
        lambda p: mb.gen_publish(
            "a/b",
            b"x",
            proto_ver=p,
            properties=[("message_expiry_interval", 5), ("message_expiry_interval", 6)],
        ),
        PROTOCOL,
        protos=(5,),
    ),
    Case(
        "publish-duplicate-content-type",
        lambda p: mb.gen_publish(
            "a/b", b"x", proto_ver=p, properties=[("content_type", "a"), ("content_type", "b")]
        ),
        PROTOCOL,
        protos=(5,),
    ),
    Case(
        "publish-duplicate-topic-alias",
        lambda p: mb.gen_publish(
            "a/b", b"x", proto_ver=p, properties=[("topic_alias", 1), ("topic_alias", 2)]
        ),
        PROTOCOL,
        protos=(5,),
    ),
    Case(
        "subscribe-duplicate-subscription-identifier",
        lambda p: mb.gen_subscribe(
            1,
            "a/b",
            proto_ver=p,
            properties=[("subscription_identifier", 1), ("subscription_identifier", 2)],
        ),
        PROTOCOL,
        protos=(5,),
    ),
    Case(
        "connect-duplicate-session-expiry",
        lambda p: mb.gen_connect(
            "d",
            proto_ver=p,
            properties=[("session_expiry_interval", 1), ("session_expiry_interval", 2)],
        ),
        PROTOCOL,
        in_connect=True,
        protos=(5,),
    ),
    Case(
        "will-duplicate-will-delay",
        lambda p: mb.gen_connect(
            "d",
            proto_ver=p,
            will_topic="w/t",
            will_properties=[("will_delay_interval", 1), ("will_delay_interval", 2)],
        ),
        PROTOCOL,
        in_connect=True,
        protos=(5,),
    ),
    Case(
        "disconnect-duplicate-reason-string",
        lambda p: mb.gen_disconnect(
            0, proto_ver=p, properties=[("reason_string", "a"), ("reason_string", "b")]
        ),
        PROTOCOL,
        protos=(5,),
    ),
    Case(
        "publish-property-not-for-publish",
        lambda p: mb.gen_publish(
            "a/b", b"x", proto_ver=p, properties={"session_expiry_interval": 5}
        ),
        MALFORMED,
        protos=(5,),
    ),
    Case(
        "publish-unknown-property",
        lambda p: mb.gen_publish("a/b", b"x", proto_ver=p, properties=mb.raw_props(b"\x7f\x00")),
        MALFORMED,
        protos=(5,),
    ),
    Case(
        "property-length-past-the-packet",
        lambda p: mb.gen_publish(
            "a/b", b"", proto_ver=p, properties=mb.raw_props(b"\x01\x01", length=40)
        ),
        MALFORMED,
        protos=(5,),
    ),
    # -- Packets over the Maximum Packet Size (5.0 3.2.2.3.6: DISCONNECT 0x95) ----------------
    Case(
        "publish-over-maximum-packet-size",
        lambda p: _big_publish(MAX_PACKET + 1, p),
        {RC.PACKET_TOO_LARGE},
    ),
    Case(
        "announced-length-over-maximum-packet-size",
        lambda p: b"\x32" + mb.varint(10 * MAX_PACKET) + mb.utf8("big/t"),
        {RC.PACKET_TOO_LARGE},
    ),
    Case(
        "subscribe-over-maximum-packet-size",
        lambda p: mb.gen_subscribe(1, [f"s/{i:04d}/#" for i in range(250)], proto_ver=p),
        {RC.PACKET_TOO_LARGE},
    ),
    Case(
        "connect-over-maximum-packet-size",
        lambda p: mb.gen_connect(
            "big", proto_ver=p, will_topic="w/t", will_payload=b"x" * (2 * MAX_PACKET)
        ),
        {RC.PACKET_TOO_LARGE, RC.MALFORMED_PACKET},
        in_connect=True,
    ),
]


def _params() -> list[object]:
    return [
        pytest.param(case, proto, id=f"{case.name}-{'v5' if proto == 5 else 'v311'}")
        for case in CASES
        for proto in case.protos
    ]


@pytest.fixture
def witnesses(clients: Clients) -> tuple[RawClient, RawClient]:
    """A subscriber (MQTT 5) and a publisher (3.1.1), connected before the bad client."""
    sub = clients.raw_connect(5, "witness-sub")
    sub.subscribe("alive/#", 1)
    pub = clients.raw_connect(4, "witness-pub")
    raw_publish_ok(pub, sub, "alive/before", b"before")
    return pub, sub


@pytest.mark.parametrize(("case", "proto"), _params())
def test_malformed_input_closes_only_that_connection(
    clients: Clients, witnesses: tuple[RawClient, RawClient], case: Case, proto: int
) -> None:
    bad = clients.raw(proto)
    if not case.in_connect:
        bad.do_connect("bad", proto_ver=proto)
    bad.send(case.build(proto), allow_closed=True)
    if proto == 5:
        if case.in_connect:
            final = bad.expect_closed(reason_code=case.codes, packet_type=mb.PacketType.CONNACK)
            if final is not None:
                assert final.session_present is False
        else:
            bad.expect_closed(reason_code=case.codes, require_reason=True)
    elif case.v311_connack:
        bad.expect_closed(reason_code=case.v311_connack, packet_type=mb.PacketType.CONNACK)
    else:
        bad.expect_closed(packet_type=None)
    pub, sub = witnesses
    raw_publish_ok(pub, sub, "alive/after", case.name.encode())
    # A new client is served too.
    fresh = clients.raw_connect(proto)
    fresh.ping()
