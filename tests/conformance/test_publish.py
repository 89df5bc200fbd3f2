"""PUBLISH and its acknowledgements: MQTT 3.1.1 and 5.0 sections 3.3 to 3.7, 4.3, 4.6."""

from __future__ import annotations

import unicodedata

import pytest

from tests.conformance.support import (
    BOTH,
    MALFORMED_OR_PROTOCOL,
    Clients,
    deviation,
    short_wait,
)
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import PacketType, ReasonCode

ACK_TYPES = {1: PacketType.PUBACK, 2: PacketType.PUBREC}


@BOTH
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_is_acknowledged_and_delivered(
    clients: Clients, root: str, proto: int, qos: int
) -> None:
    """MQTT-3.3.4-1: the receiver answers a PUBLISH as its QoS says (none, PUBACK, PUBREC then
    PUBCOMP for PUBREL) with the same Packet Identifier: MQTT-2.3.1-6, MQTT-4.3.2-2,
    MQTT-4.3.3-2 (3.1.1) / MQTT-2.2.1-5, MQTT-4.3.2-4, MQTT-4.3.3-8/-11 (5.0). The subscriber
    gets the message with DUP 0 and, when QoS > 0, a non-zero Packet Identifier:
    MQTT-4.3.1-1 (3.1.1 and 5.0); MQTT-2.3.1-1/-4, MQTT-4.3.2-1, MQTT-4.3.3-1 (3.1.1) /
    MQTT-2.2.1-4, MQTT-4.3.2-2, MQTT-4.3.3-2 (5.0)."""
    topic = f"{root}/q{qos}"
    subscriber = clients.subscriber(topic, 2, proto)
    publisher = clients.connect(proto)
    mid = 0x1234
    publisher.send(
        mb.gen_publish(topic, b"payload", qos=qos, mid=mid if qos else None, proto_ver=proto)
    )
    if qos:
        ack = publisher.expect_packet(ACK_TYPES[qos], packet_id=mid)
        assert ack.reason_code in (None, ReasonCode.SUCCESS, ReasonCode.NO_MATCHING_SUBSCRIBERS)
    if qos == 2:
        publisher.send(mb.gen_pubrel(mid, proto_ver=proto))
        publisher.expect_packet(PacketType.PUBCOMP, packet_id=mid)
    message = subscriber.recv_publish()
    assert (message.topic, message.payload, message.qos) == (topic, b"payload", qos)
    assert message.dup is False
    assert message.retain is False
    if qos:
        assert message.packet_id not in (None, 0)
    else:
        assert message.packet_id is None


@BOTH
def test_qos_3_publish_closes_the_connection(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.3.1-4: a PUBLISH MUST NOT have both QoS bits set; receiving one, the Server
    closes the connection (5.0: Malformed Packet)."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/q3", b"x", qos=3, mid=1, proto_ver=proto))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)
    clients.check_alive(proto)


@BOTH
def test_dup_with_qos_0_closes_the_connection(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.3.1-2: the DUP flag MUST be 0 for QoS 0 messages; invalid fixed-header flags
    close the connection (MQTT-2.2.2-2 (3.1.1), 2.1.3 (5.0): Malformed Packet)."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/dup0", b"x", dup=True, proto_ver=proto))
    with deviation(clients.broker, "accepts a QoS 0 PUBLISH with DUP 1 (MQTT-3.3.1-2, 2.2.2)"):
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
def test_dup_flag_is_not_propagated(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.3.1-3: the outgoing DUP flag is set only by whether the outgoing PUBLISH is a
    retransmission, not copied from the incoming one."""
    topic = f"{root}/dup"
    subscriber = clients.subscriber(topic, 1, proto)
    publisher = clients.connect(proto)
    publisher.send(mb.gen_publish(topic, b"x", qos=1, mid=3, dup=True, proto_ver=proto))
    publisher.expect_packet(PacketType.PUBACK, packet_id=3)
    message = subscriber.recv_publish()
    assert message.dup is False


@BOTH
@pytest.mark.parametrize("name", ["+", "a/+", "a/#", "#", "a/b+"])
def test_wildcards_in_topic_name_close_the_connection(
    clients: Clients, root: str, proto: int, name: str
) -> None:
    """MQTT-3.3.2-2 and MQTT-4.7.0-1 (3.1.1 and 5.0): a Topic Name MUST NOT contain wildcard
    characters; the Server closes the connection (5.0 reason 0x81, 0x82 or 0x90)."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/{name}", b"x", proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL | {ReasonCode.TOPIC_NAME_INVALID})


@BOTH
def test_empty_topic_name_closes_the_connection(clients: Clients, proto: int) -> None:
    """MQTT-4.7.3-1: Topic Names MUST be at least one character long (5.0 3.3.2.3.4: a zero
    length Topic Name without a Topic Alias is a Protocol Error)."""
    client = clients.connect(proto)
    client.send(mb.gen_publish("", b"x", proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL | {ReasonCode.TOPIC_NAME_INVALID})


@BOTH
def test_null_character_in_topic_name_closes_the_connection(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-1.5.3-2 (3.1.1) / MQTT-1.5.4-2 (5.0) and MQTT-4.7.3-2: Topic Names MUST NOT include
    U+0000; the receiver closes the connection."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/a\x00b".encode(), b"x", proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL | {ReasonCode.TOPIC_NAME_INVALID})


@BOTH
@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82"],
    ids=["0xff", "surrogate", "overlong-2", "overlong-3", "above-U+10FFFF", "truncated"],
)
def test_ill_formed_utf8_topic_closes_the_connection(
    clients: Clients, root: str, proto: int, bad: bytes
) -> None:
    """MQTT-1.5.3-1 (3.1.1) / MQTT-1.5.4-1 (5.0), MQTT-3.3.2-1: the Topic Name is well-formed
    UTF-8 (RFC 3629: no surrogates, no over-long forms, nothing above U+10FFFF); otherwise
    the connection is closed (5.0: Malformed Packet)."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/".encode() + bad, b"x", proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL | {ReasonCode.TOPIC_NAME_INVALID})


@BOTH
@pytest.mark.parametrize("qos", [1, 2])
def test_publish_packet_identifier_0_closes_the_connection(
    clients: Clients, root: str, proto: int, qos: int
) -> None:
    """MQTT-2.3.1-1 (3.1.1) / MQTT-2.2.1-3 (5.0): a QoS > 0 PUBLISH MUST carry a non-zero
    Packet Identifier."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/mid0", b"x", qos=qos, mid=0, proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
def test_bom_is_not_stripped(clients: Clients, root: str, proto: int) -> None:
    """MQTT-1.5.3-3 (3.1.1) / MQTT-1.5.4-3 (5.0): 0xEF 0xBB 0xBF is U+FEFF wherever it
    appears and MUST NOT be skipped or stripped by a receiver."""
    topic = f"{root}/\ufeffbom"
    subscriber = clients.subscriber([topic, f"{root}/bom"], 0, proto)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x")
    message = subscriber.recv_publish()
    assert message.topic == topic
    subscriber.expect_no_packet(short_wait())


@BOTH
def test_topics_are_not_normalized(clients: Clients, root: str, proto: int) -> None:
    """MQTT-4.7.3-4: subscription matching MUST NOT normalize Topic Names or Filters (an NFD
    Topic Name does not match its NFC Topic Filter; case matters)."""
    nfc = f"{root}/caf\u00e9"
    nfd = unicodedata.normalize("NFD", nfc)
    subscriber = clients.subscriber(nfc, 0, proto)
    publisher = clients.connect(proto)
    publisher.publish(nfd, b"nfd")
    publisher.publish(nfc.upper(), b"upper")
    publisher.publish(nfc, b"nfc")
    message = subscriber.recv_publish()
    assert (message.topic, message.payload) == (nfc, b"nfc")
    subscriber.expect_no_packet(short_wait())


# ---------------------------------------------------------------------------------------------
# Retained messages
# ---------------------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_retained_message_goes_to_new_subscribers(
    clients: Clients, root: str, proto: int, qos: int
) -> None:
    """MQTT-3.3.1-5/-6/-8 (3.1.1) / MQTT-3.3.1-5/-9 (5.0): a retained message (and its QoS)
    is stored and sent to new subscriptions with RETAIN 1, at the minimum of its QoS and the
    granted QoS; MQTT-3.1.2-7 (3.1.1): it outlives the publisher's session."""
    topic = f"{root}/retained"
    publisher = clients.connect(proto)
    publisher.publish(topic, b"kept", qos=qos, retain=True)
    publisher.disconnect()
    for granted in (0, 2):
        subscriber = clients.connect(proto)
        subscriber.subscribe(topic, granted)
        message = subscriber.recv_publish()
        assert (message.topic, message.payload, message.retain) == (topic, b"kept", True)
        assert message.qos == min(qos, granted)
        subscriber.expect_no_packet(short_wait() / 2)


@BOTH
def test_retain_flag_is_0_for_established_subscriptions(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.3.1-9 (3.1.1) / MQTT-3.3.1-12 (5.0, Retain As Published 0): a message sent
    because it matches an established subscription has RETAIN 0."""
    topic = f"{root}/live"
    subscriber = clients.subscriber(topic, 1, proto)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"live", qos=1, retain=True)
    message = subscriber.recv_publish()
    assert message.retain is False
    clear = clients.connect(proto)
    clear.publish(topic, b"", retain=True)


@BOTH
def test_zero_byte_retained_message_clears(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.3.1-10/-11 (3.1.1) / MQTT-3.3.1-6/-7 (5.0): a retained PUBLISH with an empty
    payload is delivered as normal (RETAIN 0) and removes the retained message; it is not
    stored itself."""
    topic = f"{root}/clear"
    publisher = clients.connect(proto)
    publisher.publish(topic, b"old", qos=1, retain=True)
    subscriber = clients.connect(proto)
    subscriber.subscribe(topic, 1)
    assert subscriber.recv_publish().payload == b"old"
    publisher.publish(topic, b"", qos=1, retain=True)
    message = subscriber.recv_publish()
    assert (message.payload, message.retain) == (b"", False)
    late = clients.connect(proto)
    late.subscribe(topic, 1)
    late.expect_no_packet(short_wait())


@BOTH
def test_non_retained_publish_keeps_the_retained_message(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.3.1-12 (3.1.1) / MQTT-3.3.1-8 (5.0): with RETAIN 0 the Server MUST NOT store the
    message nor remove or replace the existing retained message."""
    topic = f"{root}/keep"
    publisher = clients.connect(proto)
    publisher.publish(topic, b"retained", qos=1, retain=True)
    publisher.publish(topic, b"not retained", qos=1)
    publisher.publish(topic, b"", qos=1)
    subscriber = clients.connect(proto)
    subscriber.subscribe(topic, 1)
    message = subscriber.recv_publish()
    assert (message.payload, message.retain) == (b"retained", True)
    subscriber.expect_no_packet(short_wait())
    publisher.publish(topic, b"", retain=True)


@BOTH
def test_retained_message_is_replaced(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.3.1-7 (3.1.1) / MQTT-3.3.1-5 (5.0): a new retained message (here QoS 0)
    replaces the one retained for that topic."""
    topic = f"{root}/replace"
    publisher = clients.connect(proto)
    publisher.publish(topic, b"first", qos=2, retain=True)
    publisher.publish(topic, b"second", qos=0, retain=True)
    publisher.ping()  # the QoS 0 PUBLISH has been read before the PINGRESP
    subscriber = clients.connect(proto)
    subscriber.subscribe(topic, 2)
    message = subscriber.recv_publish()
    assert (message.payload, message.qos, message.retain) == (b"second", 0, True)
    subscriber.expect_no_packet(short_wait())


@BOTH
def test_retained_messages_for_wildcard_subscriptions(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.3.1-6 (3.1.1) / MQTT-3.3.1-9 (5.0): the last retained message of EACH topic
    matching the new subscription's filter is sent."""
    publisher = clients.connect(proto)
    topics = [f"{root}/w/a", f"{root}/w/b/c", f"{root}/w"]
    for topic in topics:
        publisher.publish(topic, topic.encode(), qos=1, retain=True)
    publisher.publish(f"{root}/other", b"x", qos=1, retain=True)
    subscriber = clients.connect(proto)
    subscriber.subscribe(f"{root}/w/#", 1)
    received = {subscriber.recv_publish().topic for _ in topics}
    assert received == set(topics)
    subscriber.expect_no_packet(short_wait())


# ---------------------------------------------------------------------------------------------
# QoS flows
# ---------------------------------------------------------------------------------------------


@BOTH
def test_qos2_duplicate_publish_is_not_delivered_twice(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-4.3.3-2 (3.1.1) / MQTT-4.3.3-10 (5.0): until PUBREL, a PUBLISH with the same
    Packet Identifier is answered with PUBREC again and MUST NOT cause a duplicate delivery;
    MQTT-4.3.3-12 (5.0): after PUBCOMP the identifier starts a new message."""
    topic = f"{root}/exactly-once"
    subscriber = clients.subscriber(topic, 2, proto)
    publisher = clients.connect(proto)
    first = mb.gen_publish(topic, b"one", qos=2, mid=7, proto_ver=proto)
    publisher.send(first)
    publisher.expect_packet(PacketType.PUBREC, packet_id=7)
    publisher.send(mb.gen_publish(topic, b"one", qos=2, mid=7, dup=True, proto_ver=proto))
    publisher.expect_packet(PacketType.PUBREC, packet_id=7)
    publisher.send(mb.gen_pubrel(7, proto_ver=proto))
    publisher.expect_packet(PacketType.PUBCOMP, packet_id=7)
    assert subscriber.recv_publish().payload == b"one"
    subscriber.expect_no_packet(short_wait())
    publisher.send(mb.gen_publish(topic, b"two", qos=2, mid=7, proto_ver=proto))
    publisher.expect_packet(PacketType.PUBREC, packet_id=7)
    publisher.send(mb.gen_pubrel(7, proto_ver=proto))
    publisher.expect_packet(PacketType.PUBCOMP, packet_id=7)
    assert subscriber.recv_publish().payload == b"two"


@BOTH
def test_qos1_packet_identifier_is_reusable_after_puback(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-4.3.2-5 (5.0; 4.3.2 of 3.1.1): after PUBACK, a PUBLISH with the same Packet
    Identifier is a new message, whatever its DUP flag."""
    topic = f"{root}/at-least-once"
    subscriber = clients.subscriber(topic, 1, proto)
    publisher = clients.connect(proto)
    for payload, dup in ((b"one", False), (b"two", True)):
        publisher.send(mb.gen_publish(topic, payload, qos=1, mid=9, dup=dup, proto_ver=proto))
        publisher.expect_packet(PacketType.PUBACK, packet_id=9)
        assert subscriber.recv_publish().payload == payload


@BOTH
def test_pubrel_reserved_flags_close_the_connection(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.6.1-1: PUBREL fixed-header flags MUST be 0010; others close the connection."""
    client = clients.connect(proto)
    client.send(mb.gen_publish(f"{root}/rel", b"x", qos=2, mid=5, proto_ver=proto))
    client.expect_packet(PacketType.PUBREC, packet_id=5)
    client.send(mb.gen_pubrel(5, proto_ver=proto, flags=0x00))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)


@BOTH
def test_pubrel_for_unknown_packet_identifier(clients: Clients, proto: int) -> None:
    """MQTT-4.3.3-11 (5.0; 4.3.3 of 3.1.1): the receiver answers PUBREL with PUBCOMP of the
    same Packet Identifier; in 5.0 an unknown one MAY be reported with 0x92."""
    client = clients.connect(proto)
    client.send(mb.gen_pubrel(77, proto_ver=proto))
    pubcomp = client.expect_packet(PacketType.PUBCOMP, packet_id=77)
    if proto == 5:
        assert pubcomp.reason_code in {
            ReasonCode.SUCCESS,
            ReasonCode.PACKET_IDENTIFIER_NOT_FOUND,
        }


@BOTH
def test_server_uses_distinct_packet_identifiers(clients: Clients, root: str, proto: int) -> None:
    """MQTT-2.3.1-2/-4 (3.1.1) / MQTT-2.2.1-4 (5.0): the Server assigns each new QoS > 0
    PUBLISH a non-zero Packet Identifier not in use."""
    topic = f"{root}/ids"
    subscriber = clients.subscriber(topic, 1, proto)
    publisher = clients.connect(proto)
    for i in range(5):
        publisher.publish(topic, b"%d" % i, qos=1)
    messages = [subscriber.recv_publish(ack=False) for _ in range(5)]
    ids = [m.packet_id for m in messages]
    assert 0 not in ids
    assert len(set(ids)) == 5
    for message in messages:
        subscriber.ack_publish(message)


@BOTH
def test_server_qos2_delivery_flow(clients: Clients, root: str, proto: int) -> None:
    """MQTT-4.3.3-1 (3.1.1) / MQTT-4.3.3-2/-4 (5.0): as sender the Server sends PUBLISH QoS 2
    with DUP 0, then on PUBREC a PUBREL (flags 0010) with the same Packet Identifier, and
    completes on PUBCOMP."""
    topic = f"{root}/server-qos2"
    subscriber = clients.subscriber(topic, 2, proto)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x", qos=2)
    message = subscriber.recv_publish(ack=False)
    assert (message.qos, message.dup) == (2, False)
    subscriber.send(mb.gen_pubrec(message.packet_id or 0, proto_ver=proto))
    pubrel = subscriber.expect_packet(PacketType.PUBREL, packet_id=message.packet_id)
    assert pubrel.flags == 0x02
    subscriber.send(mb.gen_pubcomp(message.packet_id or 0, proto_ver=proto))
    subscriber.ping()


@BOTH
def test_messages_are_delivered_in_order(clients: Clients, root: str, proto: int) -> None:
    """MQTT-4.6.0-5/-6 (3.1.1) / MQTT-4.6.0-5/-6 (5.0): every topic is an Ordered Topic; the
    Server sends PUBLISH packets of one Client's topic and QoS in the order received."""
    topic = f"{root}/ordered"
    subscriber = clients.subscriber(topic, 2, proto)
    publisher = clients.connect(proto)
    count = 10
    for qos in (0, 1, 2):
        mids = [i + 1 if qos else None for i in range(count)]
        publisher.send(
            b"".join(
                mb.gen_publish(topic, b"%d-%d" % (qos, i), qos=qos, mid=mid, proto_ver=proto)
                for i, mid in enumerate(mids)
            )
        )
        if qos:
            for mid in mids:
                publisher.wait_for(lambda p, mid=mid: p.packet_id == mid, what=f"ack {mid}")
        if qos == 2:
            publisher.send(b"".join(mb.gen_pubrel(mid or 0, proto_ver=proto) for mid in mids))
            for mid in mids:
                publisher.wait_for(lambda p, mid=mid: p.packet_id == mid, what=f"PUBCOMP {mid}")
        got = [subscriber.recv_publish().payload for _ in range(count)]
        assert got == [b"%d-%d" % (qos, i) for i in range(count)]


@BOTH
def test_overlapping_subscriptions_respect_the_maximum_qos(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.3.5-1 (3.1.1) / MQTT-3.3.4-2 (5.0): a message matching several of a Client's
    subscriptions is delivered respecting the maximum QoS of them (extra copies allowed)."""
    topic = f"{root}/overlap/x"
    subscriber = clients.connect(proto)
    subscriber.subscribe([(f"{root}/overlap/#", 2), (topic, 0)])
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x", qos=2)
    copies = [subscriber.recv_publish()]
    copies += [p for p in subscriber.collect(short_wait()) if p.type == PacketType.PUBLISH]
    for packet in copies[1:]:
        subscriber.ack_publish(packet)
    assert len(copies) <= 2
    with deviation(
        clients.broker,
        "to a 3.1.1 client it sends one copy at the QoS of the first matching subscription, "
        "not the maximum (MQTT-3.3.5-1)",
    ):
        assert max(c.qos for c in copies) == 2


# ---------------------------------------------------------------------------------------------
# Sessions: queued messages and retransmission
# ---------------------------------------------------------------------------------------------


def _persistent(proto: int) -> dict[str, object]:
    return {"properties": {"session_expiry_interval": 300}} if proto == 5 else {}


@BOTH
def test_messages_are_queued_for_an_offline_session(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.1.2-4/-5 (3.1.1) / MQTT-3.1.2-5/-23, MQTT-4.5.0-1 (5.0): a disconnected session
    keeps its subscriptions and stores QoS 1 and 2 messages matching them; they are sent on
    resumption."""
    topic = f"{root}/offline"
    cid = clients.client_id("off")
    sub = clients.connect(proto, cid, clean=False, **_persistent(proto))
    sub.subscribe(topic, 2)
    sub.disconnect()
    publisher = clients.connect(proto)
    publisher.publish(topic, b"q1", qos=1)
    publisher.publish(topic, b"q2", qos=2)
    sub = clients.connect(proto, cid, clean=False, session_present=True, **_persistent(proto))
    got = sorted((m.payload, m.qos) for m in (sub.recv_publish(), sub.recv_publish()))
    assert got == [(b"q1", 1), (b"q2", 2)]
    clients.connect(proto, cid, clean=True)


@BOTH
def test_unacknowledged_publish_is_resent_on_resumption(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-4.4.0-1: on reconnection with a session present the Server resends unacknowledged
    PUBLISH packets with their original Packet Identifiers, with DUP 1 (MQTT-3.3.1-1)."""
    topic = f"{root}/resend"
    cid = clients.client_id("rs")
    sub = clients.connect(proto, cid, clean=False, **_persistent(proto))
    sub.subscribe(topic, 1)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"unacked", qos=1)
    first = sub.recv_publish(ack=False)
    sub.close()
    sub = clients.connect(proto, cid, clean=False, session_present=True, **_persistent(proto))
    again = sub.recv_publish(ack=False)
    assert (again.payload, again.packet_id, again.dup) == (b"unacked", first.packet_id, True)
    sub.ack_publish(again)
    sub.expect_no_packet(short_wait())
    clients.connect(proto, cid, clean=True)


@BOTH
def test_unacknowledged_pubrel_is_resent_on_resumption(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-4.4.0-1: on reconnection with a session present the Server resends unacknowledged
    PUBREL packets with their original Packet Identifiers (and not the PUBLISH,
    MQTT-4.3.3-6 (5.0))."""
    topic = f"{root}/resend-rel"
    cid = clients.client_id("rr")
    sub = clients.connect(proto, cid, clean=False, **_persistent(proto))
    sub.subscribe(topic, 2)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x", qos=2)
    message = sub.recv_publish(ack=False)
    sub.send(mb.gen_pubrec(message.packet_id or 0, proto_ver=proto))
    sub.expect_packet(PacketType.PUBREL, packet_id=message.packet_id)
    sub.close()
    sub = clients.connect(proto, cid, clean=False, session_present=True, **_persistent(proto))
    sub.expect_packet(PacketType.PUBREL, packet_id=message.packet_id)
    sub.send(mb.gen_pubcomp(message.packet_id or 0, proto_ver=proto))
    sub.expect_no_packet(short_wait())
    clients.connect(proto, cid, clean=True)


def test_v5_no_retransmission_on_a_live_connection(clients: Clients, root: str) -> None:
    """MQTT-4.4.0-1 (5.0): resending is REQUIRED only on reconnection; Clients and Servers
    MUST NOT resend messages at any other time."""
    topic = f"{root}/no-resend"
    sub = clients.subscriber(topic, 1, 5)
    publisher = clients.connect(5)
    publisher.publish(topic, b"x", qos=1)
    message = sub.recv_publish(ack=False)
    sub.expect_no_packet(short_wait() * 2)
    sub.ack_publish(message)
