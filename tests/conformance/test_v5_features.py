"""MQTT 5.0 features: properties, topic aliases, expiry, flow control, packet sizes."""

from __future__ import annotations

import math
import time

import pytest

from tests.conformance.support import MALFORMED_OR_PROTOCOL, Clients, deviation, short_wait
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import PacketType, ReasonCode
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

# ---------------------------------------------------------------------------------------------
# Application message properties
# ---------------------------------------------------------------------------------------------


def test_publish_properties_are_forwarded_unaltered(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-4 (Payload Format Indicator), -15 (Response Topic), -16 (Correlation Data),
    -17/-18 (User Properties, unaltered and in order), -20 (Content Type) (5.0)."""
    topic = f"{root}/props"
    subscriber = clients.subscriber(topic, 1, 5)
    users = [("b", "2"), ("a", "1"), ("b", "1"), ("\u00e9", "")]
    publisher = clients.connect(5)
    publisher.publish(
        topic,
        "h\u00e9llo".encode(),
        qos=1,
        properties=mb.props(
            payload_format_indicator=1,
            content_type="text/plain; charset=utf-8",
            response_topic=f"{root}/reply",
            correlation_data=b"\x00\xffid",
            user_property=users,
        ),
    )
    message = subscriber.recv_publish()
    assert message.payload == "h\u00e9llo".encode()
    assert message.properties["payload_format_indicator"] == 1
    assert message.properties["content_type"] == "text/plain; charset=utf-8"
    assert message.properties["response_topic"] == f"{root}/reply"
    assert message.properties["correlation_data"] == b"\x00\xffid"
    assert message.user_properties == users


def test_request_response(clients: Clients, root: str) -> None:
    """4.10 (5.0): a responder uses the Response Topic and Correlation Data of a request to
    answer; the Server forwards both unaltered (MQTT-3.3.2-15/-16)."""
    requester = clients.subscriber(f"{root}/responses/+", 1, 5)
    responder = clients.subscriber(f"{root}/requests", 1, 5)
    requester.publish(
        f"{root}/requests",
        b"ping",
        qos=1,
        properties={"response_topic": f"{root}/responses/me", "correlation_data": b"42"},
    )
    request = responder.recv_publish()
    responder.publish(
        request.properties["response_topic"],
        b"pong",
        qos=1,
        properties={"correlation_data": request.properties["correlation_data"]},
    )
    response = requester.recv_publish()
    assert (response.topic, response.payload) == (f"{root}/responses/me", b"pong")
    assert response.properties["correlation_data"] == b"42"


def test_response_topic_with_wildcards_is_a_protocol_error(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-14 (5.0): the Response Topic MUST NOT contain wildcards; the Server treats
    such a PUBLISH as a Protocol Error (MQTT-4.13.1-1)."""
    client = clients.connect(5)
    client.send(
        mb.gen_publish(f"{root}/t", b"x", proto_ver=5, properties={"response_topic": f"{root}/+"})
    )
    with deviation(clients.broker, "accepts a Response Topic containing wildcards (MQTT-3.3.2-14)"):
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


def test_properties_reach_a_311_subscriber_as_plain_messages(clients: Clients, root: str) -> None:
    """3.3 (3.1.1) / 3.3.2.3 (5.0): a 5.0 PUBLISH with properties reaches a 3.1.1 subscriber as
    a valid 3.1.1 PUBLISH (topic and payload unaltered, no property bytes)."""
    topic = f"{root}/mixed"
    subscriber = clients.subscriber(topic, 1, 4)
    publisher = clients.connect(5)
    publisher.publish(
        topic, b"payload", qos=1, properties={"user_property": ("k", "v"), "content_type": "x"}
    )
    message = subscriber.recv_publish()
    assert message.raw == mb.gen_publish(topic, b"payload", qos=1, mid=message.packet_id)


def test_311_messages_reach_a_v5_subscriber(clients: Clients, root: str) -> None:
    """3.3.2.3 (5.0): a 3.1.1 message is sent to a 5.0 subscriber with a Property Length (no
    properties beyond what the Server adds)."""
    topic = f"{root}/mixed"
    subscriber = clients.subscriber(topic, 0, 5)
    publisher = clients.connect(4)
    publisher.publish(topic, b"payload")
    message = subscriber.recv_publish()
    assert (message.topic, message.payload) == (topic, b"payload")
    assert "user_property" not in message.properties


def test_puback_reason_codes(clients: Clients, root: str) -> None:
    """MQTT-3.4.2-1 / MQTT-3.5.2-1 / MQTT-3.7.2-1 (5.0): PUBACK, PUBREC and PUBCOMP carry valid
    reason codes; with no subscriber, 0x00 or 0x10 (No matching subscribers)."""
    client = clients.connect(5)
    puback = client.publish(f"{root}/nobody", b"x", qos=1)
    assert puback is not None
    assert puback.reason_code in {ReasonCode.SUCCESS, ReasonCode.NO_MATCHING_SUBSCRIBERS}
    pubcomp = client.publish(f"{root}/nobody", b"x", qos=2)
    assert pubcomp is not None
    assert pubcomp.reason_code == ReasonCode.SUCCESS


# ---------------------------------------------------------------------------------------------
# Topic aliases
# ---------------------------------------------------------------------------------------------


def _alias_maximum(client: RawClient) -> int:
    assert client.connack is not None
    return int(client.connack.properties.get("topic_alias_maximum", 0))


def test_topic_alias_from_client(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-12 (5.0): the Server accepts every Topic Alias from 1 to its Topic Alias
    Maximum; a PUBLISH with the alias and an empty Topic Name uses the mapped topic, and a
    new topic re-maps the alias (3.3.2.3.4)."""
    publisher = clients.connect(5)
    maximum = _alias_maximum(publisher)
    if maximum == 0:
        pytest.skip("the Server accepts no Topic Alias")
    subscriber = clients.subscriber(f"{root}/#", 1, 5)
    for alias in sorted({1, maximum}):
        publisher.publish(f"{root}/a{alias}", b"set", qos=1, properties={"topic_alias": alias})
        publisher.publish("", b"use", qos=1, properties={"topic_alias": alias})
        publisher.publish(f"{root}/b{alias}", b"remap", qos=1, properties={"topic_alias": alias})
        publisher.publish("", b"use again", qos=1, properties={"topic_alias": alias})
        got = [(m.topic, m.payload) for m in (subscriber.recv_publish() for _ in range(4))]
        assert got == [
            (f"{root}/a{alias}", b"set"),
            (f"{root}/a{alias}", b"use"),
            (f"{root}/b{alias}", b"remap"),
            (f"{root}/b{alias}", b"use again"),
        ]


def test_topic_alias_0_is_refused(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-8 (5.0): a Topic Alias of 0 is not permitted, a Protocol Error; the Server
    uses DISCONNECT with 0x94 (Topic Alias invalid) or 0x82 (Protocol Error)."""
    client = clients.connect(5)
    client.send(mb.gen_publish(f"{root}/t", b"x", proto_ver=5, properties={"topic_alias": 0}))
    with deviation(
        clients.broker,
        "reports Topic Alias 0 as a Malformed Packet (0x81), not a Protocol Error "
        "(0x94 / 0x82) (MQTT-3.3.2-8, 4.13)",
    ):
        client.expect_closed(
            reason_code={ReasonCode.TOPIC_ALIAS_INVALID, ReasonCode.PROTOCOL_ERROR},
            require_reason=True,
        )


def test_topic_alias_above_maximum_is_refused(clients: Clients, root: str) -> None:
    """MQTT-3.2.2-17, MQTT-3.3.2-9 (5.0): a Topic Alias above the Server's Topic Alias Maximum
    (absent: 0) is a Protocol Error; the Server uses DISCONNECT with 0x94."""
    client = clients.connect(5)
    alias = _alias_maximum(client) + 1
    if alias > 65535:
        pytest.skip("the Server accepts every Topic Alias a Two Byte Integer can carry")
    client.send(mb.gen_publish(f"{root}/t", b"x", proto_ver=5, properties={"topic_alias": alias}))
    client.expect_closed(reason_code=ReasonCode.TOPIC_ALIAS_INVALID, require_reason=True)


def test_unknown_topic_alias_is_a_protocol_error(clients: Clients) -> None:
    """5.0 3.3.2.3.4: a PUBLISH with an empty Topic Name and an alias the receiver has no
    mapping for is a Protocol Error."""
    client = clients.connect(5)
    if _alias_maximum(client) == 0:
        pytest.skip("the Server accepts no Topic Alias")
    client.send(mb.gen_publish("", b"x", proto_ver=5, properties={"topic_alias": 1}))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


def test_topic_aliases_do_not_outlive_the_connection(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-7 (5.0): Topic Alias mappings MUST NOT be carried from one connection to
    another, even of the same session."""
    cid = clients.client_id("ta")
    persistent = {"properties": {"session_expiry_interval": 60}}
    first = clients.connect(5, cid, clean=False, **persistent)
    if _alias_maximum(first) == 0:
        pytest.skip("the Server accepts no Topic Alias")
    first.publish(f"{root}/t", b"x", qos=1, properties={"topic_alias": 1})
    first.disconnect()
    second = clients.connect(5, cid, clean=False, session_present=True, **persistent)
    second.send(mb.gen_publish("", b"x", qos=1, mid=1, proto_ver=5, properties={"topic_alias": 1}))
    second.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    clients.connect(5, cid, clean=True)


def test_server_sends_no_topic_alias_unless_allowed(clients: Clients, root: str) -> None:
    """MQTT-3.1.2-27 (5.0): without Topic Alias Maximum in CONNECT the Server MUST NOT send
    Topic Aliases; MQTT-3.1.2-26/MQTT-3.3.2-11: with one, never above it, and an alias-only
    PUBLISH uses a mapping the Server set before on this connection."""
    topic = f"{root}/alias-out"
    plain = clients.subscriber(topic, 0, 5)
    allowing = clients.subscriber(topic, 0, 5, properties={"topic_alias_maximum": 2})
    publisher = clients.connect(5)
    for i in range(4):
        publisher.publish(topic, b"%d" % i)
    for _ in range(4):
        message = plain.recv_publish()
        assert "topic_alias" not in message.properties
        assert message.topic == topic
    mapping: dict[int, str] = {}
    for _ in range(4):
        message = allowing.recv_publish()
        alias = message.properties.get("topic_alias")
        if alias is None:
            assert message.topic == topic
            continue
        assert 1 <= alias <= 2
        if message.topic:
            mapping[alias] = message.topic
        assert mapping.get(alias) == topic


# ---------------------------------------------------------------------------------------------
# Message expiry
# ---------------------------------------------------------------------------------------------


def test_message_expiry_interval_counts_down(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-6 (5.0): the forwarded Message Expiry Interval is the received value minus
    the time the message waited in the Server (here as a retained message)."""
    topic = f"{root}/expiry"
    publisher = clients.connect(5)
    publisher.publish(topic, b"x", qos=1, retain=True, properties={"message_expiry_interval": 30})
    published = time.monotonic()
    time.sleep(1.2)  # the message waits in the Server
    subscriber = clients.connect(5)
    subscriber.subscribe(topic, 1)
    message = subscriber.recv_publish()
    waited = time.monotonic() - published
    remaining = message.properties.get("message_expiry_interval")
    assert remaining is not None
    assert 30 - math.ceil(waited) - 1 <= remaining <= 29
    publisher.publish(topic, b"", retain=True)


def test_expired_messages_are_not_delivered(clients: Clients, root: str) -> None:
    """MQTT-3.3.2-5 (5.0): once the Message Expiry Interval has passed without onward delivery
    having started, the Server deletes the message (queued for an offline session, or
    retained); messages without expiry are still delivered."""
    topic = f"{root}/expire"
    cid = clients.client_id("exp")
    persistent = {"properties": {"session_expiry_interval": 60}}
    sub = clients.connect(5, cid, clean=False, **persistent)
    sub.subscribe(topic, 1)
    sub.disconnect()
    publisher = clients.connect(5)
    publisher.publish(topic, b"short", qos=1, properties={"message_expiry_interval": 1})
    publisher.publish(topic, b"no expiry", qos=1)
    publisher.publish(
        f"{topic}/retained",
        b"short",
        qos=1,
        retain=True,
        properties={"message_expiry_interval": 1},
    )
    time.sleep(1.0 + unit(1.0))  # bounded wait for the messages to expire
    sub = clients.connect(5, cid, clean=False, session_present=True, **persistent)
    assert sub.recv_publish().payload == b"no expiry"
    sub.subscribe(f"{topic}/retained", 1)
    sub.expect_no_packet(short_wait())
    clients.connect(5, cid, clean=True)


# ---------------------------------------------------------------------------------------------
# Maximum Packet Size
# ---------------------------------------------------------------------------------------------


def test_server_does_not_exceed_the_clients_maximum_packet_size(
    clients: Clients, root: str
) -> None:
    """MQTT-3.1.2-24/-25 (5.0): the Server MUST NOT send packets larger than the Client's
    Maximum Packet Size; it discards such a message for that Client and goes on."""
    topic = f"{root}/size"
    limit = 128
    subscriber = clients.subscriber(topic, 1, 5, properties={"maximum_packet_size": limit})
    publisher = clients.connect(5)
    publisher.publish(topic, b"x" * 400, qos=1)
    publisher.publish(topic, b"small", qos=1)
    message = subscriber.recv_publish()
    assert message.payload == b"small"
    assert len(message.raw) <= limit
    subscriber.expect_no_packet(short_wait())


def test_retained_message_too_large_for_the_client_is_skipped(clients: Clients, root: str) -> None:
    """MQTT-3.1.2-24/-25 (5.0): also for retained messages sent on subscription."""
    publisher = clients.connect(5)
    publisher.publish(f"{root}/big", b"x" * 400, qos=1, retain=True)
    publisher.publish(f"{root}/small", b"y", qos=1, retain=True)
    subscriber = clients.connect(5, properties={"maximum_packet_size": 128})
    subscriber.subscribe(f"{root}/+", 1)
    message = subscriber.recv_publish()
    assert message.topic == f"{root}/small"
    subscriber.expect_no_packet(short_wait())
    publisher.publish(f"{root}/big", b"", retain=True)
    publisher.publish(f"{root}/small", b"", retain=True)


def test_packet_larger_than_the_servers_maximum_is_refused(clients: Clients, root: str) -> None:
    """MQTT-3.2.2-15 and 3.2.2.3.6 (5.0): a packet above the Maximum Packet Size in CONNACK is a
    Protocol Error; the Server uses DISCONNECT with 0x95 (Packet too large)."""
    client = clients.connect(5)
    assert client.connack is not None
    limit = client.connack.properties.get("maximum_packet_size")
    if limit is None or limit > 4_000_000:
        pytest.skip(f"the Server's Maximum Packet Size is {limit}")
    header = mb.gen_publish(f"{root}/t", b"", proto_ver=5)
    packet = mb.gen_publish(f"{root}/t", b"x" * (limit - len(header) + 8), proto_ver=5)
    assert len(packet) > limit
    # A Server may refuse on the fixed header alone: give it the chance before sending the
    # rest, or its DISCONNECT could be lost to the reset caused by closing with unread data.
    client.send(packet[:64])
    early = client.collect(short_wait())
    if not early and not client.closed_by_peer:
        client.send(packet[64:], allow_closed=True)
    client.backlog.extend(early)
    client.expect_closed(
        timeout=unit(5), reason_code=ReasonCode.PACKET_TOO_LARGE, require_reason=True
    )
    clients.check_alive(5)


# ---------------------------------------------------------------------------------------------
# Receive Maximum (flow control)
# ---------------------------------------------------------------------------------------------


def test_server_respects_the_clients_receive_maximum(clients: Clients, root: str) -> None:
    """MQTT-3.3.4-9, MQTT-4.9.0-2 (5.0): the Server MUST NOT have more unacknowledged QoS 1/2
    PUBLISH packets to a Client than its Receive Maximum; MQTT-3.3.4-10, MQTT-4.9.0-3: other
    packets are not held back; an acknowledgement releases the next message."""
    topic = f"{root}/flow"
    subscriber = clients.subscriber(topic, 2, 5, properties={"receive_maximum": 2})
    publisher = clients.connect(5)
    for i in range(5):
        publisher.publish(topic, b"%d" % i, qos=1 + i % 2)
    first = [subscriber.recv_publish(ack=False) for _ in range(2)]
    subscriber.expect_no_packet(short_wait())
    subscriber.ping()
    subscriber.ack_publish(first[0])
    third = subscriber.recv_publish(ack=False)
    with deviation(
        clients.broker,
        "after one acknowledgement it sends two more messages, exceeding the Client's "
        "Receive Maximum (MQTT-3.3.4-9)",
    ):
        subscriber.expect_no_packet(short_wait() / 2)
    subscriber.ack_publish(first[1])
    subscriber.ack_publish(third)
    rest = [subscriber.recv_publish() for _ in range(2)]
    assert [m.payload for m in [*first, third, *rest]] == [b"0", b"1", b"2", b"3", b"4"]


def test_exceeding_the_servers_receive_maximum_is_refused(clients: Clients, root: str) -> None:
    """MQTT-3.3.4-7 (5.0) and 3.3.4: a Client sending more unacknowledged QoS 2 PUBLISH
    packets than the Server's Receive Maximum gets DISCONNECT 0x93 (Receive Maximum
    exceeded)."""
    client = clients.connect(5)
    assert client.connack is not None
    maximum = int(client.connack.properties.get("receive_maximum", 65535))
    if maximum > 1000:
        pytest.skip(f"the Server's Receive Maximum is {maximum}")
    data = b"".join(
        mb.gen_publish(f"{root}/t", b"x", qos=2, mid=i + 1, proto_ver=5) for i in range(maximum + 1)
    )
    client.send(data, allow_closed=True)
    with deviation(
        clients.broker,
        "does not enforce its Receive Maximum on incoming QoS 2 PUBLISH (MQTT-3.3.4-7, 0x93)",
    ):
        final = client.wait_for(
            lambda p: p.type == PacketType.DISCONNECT, timeout=unit(3), what="DISCONNECT"
        )
        assert final.reason_code == ReasonCode.RECEIVE_MAXIMUM_EXCEEDED
    assert {p.type for p in client.backlog} <= {PacketType.PUBREC}
    client.backlog.clear()
    client.expect_closed(packet_type=None)


# ---------------------------------------------------------------------------------------------
# Capabilities in CONNACK
# ---------------------------------------------------------------------------------------------


def test_publish_above_maximum_qos_is_refused(clients: Clients, root: str) -> None:
    """MQTT-3.2.2-11 (5.0) and 3.2.2.3.4: a PUBLISH above the Server's Maximum QoS is refused
    with DISCONNECT 0x9B (QoS not supported)."""
    client = clients.connect(5)
    assert client.connack is not None
    maximum = client.connack.properties.get("maximum_qos")
    if maximum is None:
        pytest.skip("the Server supports QoS 2")
    client.send(mb.gen_publish(f"{root}/t", b"x", qos=2, mid=1, proto_ver=5))
    client.expect_closed(reason_code=ReasonCode.QOS_NOT_SUPPORTED, require_reason=True)


def test_retain_when_not_available_is_refused(clients: Clients, root: str) -> None:
    """MQTT-3.2.2-14 (5.0) and 3.3.1.3: with Retain Available 0, a retained PUBLISH gets
    DISCONNECT 0x9A (Retain not supported)."""
    client = clients.connect(5)
    assert client.connack is not None
    if client.connack.properties.get("retain_available", 1) != 0:
        pytest.skip("the Server supports retained messages")
    client.send(mb.gen_publish(f"{root}/t", b"x", retain=True, proto_ver=5))
    client.expect_closed(reason_code=ReasonCode.RETAIN_NOT_SUPPORTED, require_reason=True)


# ---------------------------------------------------------------------------------------------
# Malformed properties
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "codes"),
    [
        (
            mb.props(("payload_format_indicator", 1), ("payload_format_indicator", 1)),
            {ReasonCode.PROTOCOL_ERROR},
        ),
        (
            mb.props(("message_expiry_interval", 1), ("message_expiry_interval", 2)),
            {ReasonCode.PROTOCOL_ERROR},
        ),
        (mb.props(session_expiry_interval=1), MALFORMED_OR_PROTOCOL),
        (mb.raw_props(mb.prop(0x7F, 1, prop_type=mb.PropType.BYTE)), MALFORMED_OR_PROTOCOL),
        (mb.raw_props(mb.prop("content_type", "x"), length=40), MALFORMED_OR_PROTOCOL),
        (mb.props(content_type=b"\xff\xfe"), MALFORMED_OR_PROTOCOL),
        (mb.props(user_property=("k\x00", "v")), MALFORMED_OR_PROTOCOL),
    ],
    ids=[
        "duplicate-payload-format",
        "duplicate-expiry",
        "not-allowed-in-publish",
        "unknown-identifier",
        "length-overrun",
        "ill-formed-utf8",
        "nul-in-user-property",
    ],
)
def test_invalid_publish_properties_close_the_connection(
    clients: Clients, root: str, properties: bytes, codes: set[int]
) -> None:
    """5.0 2.2.2.2 / 3.3.2.3: including a property twice (other than User Property and
    Subscription Identifier) is a Protocol Error; a property not allowed in PUBLISH, an
    unknown identifier, a bad Property Length, or ill-formed strings (MQTT-1.5.4-1/-2) is
    malformed; the Server closes the connection (MQTT-4.13.1-1)."""
    client = clients.connect(5)
    client.send(mb.gen_publish(f"{root}/t", b"x", proto_ver=5, properties=properties))
    client.expect_closed(reason_code=codes)
    clients.check_alive(5)
