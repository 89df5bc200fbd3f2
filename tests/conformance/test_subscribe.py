"""SUBSCRIBE, SUBACK and topic matching: MQTT 3.1.1 and 5.0 sections 3.8, 3.9 and 4.7."""

from __future__ import annotations

import time

import pytest

from tests.conformance.support import (
    BOTH,
    MALFORMED_OR_PROTOCOL,
    Clients,
    deviation,
    short_wait,
)
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import PacketType, ReasonCode, sub_options
from tests.helpers.raw_client import RawClient


@BOTH
def test_subscribe_reserved_flags_close_the_connection(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.8.1-1: SUBSCRIBE fixed-header flags MUST be 0010; others close the connection
    (5.0: Malformed Packet)."""
    client = clients.connect(proto)
    client.send(mb.gen_subscribe(1, f"{root}/t", 0, proto_ver=proto, flags=0x00))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)


@BOTH
def test_subscribe_without_topic_filters_closes_the_connection(
    clients: Clients, proto: int
) -> None:
    """MQTT-3.8.3-3 (3.1.1) / MQTT-3.8.3-2 (5.0): the payload MUST contain at least one Topic
    Filter; an empty one is a protocol violation."""
    client = clients.connect(proto)
    client.send(mb.gen_subscribe(1, [], proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
def test_subscribe_qos_3_closes_the_connection(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3-8.3-4 (3.1.1): a requested QoS other than 0, 1, 2 is malformed; 5.0 3.8.3.1:
    Maximum QoS 3 is a Protocol Error."""
    client = clients.connect(proto)
    client.send(mb.gen_subscribe(1, f"{root}/t", 3, proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@pytest.mark.parametrize(
    ("proto", "options"),
    [(4, 0x04), (4, 0x40), (5, sub_options(1, reserved=1)), (5, sub_options(1, reserved=2))],
    ids=["v311-bit2", "v311-bit6", "v5-bit6", "v5-bit7"],
)
def test_subscribe_reserved_option_bits_close_the_connection(
    clients: Clients, root: str, proto: int, options: int
) -> None:
    """MQTT-3-8.3-4 (3.1.1: bits 7-2 of the requested QoS byte are reserved) / MQTT-3.8.3-5
    (5.0: bits 7-6 of Subscription Options): non-zero reserved bits are malformed."""
    client = clients.connect(proto)
    client.send(mb.gen_subscribe(1, [(f"{root}/t", options)], proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


def test_v5_retain_handling_3_closes_the_connection(clients: Clients, root: str) -> None:
    """5.0 3.8.3.1: a Retain Handling value of 3 is a Protocol Error."""
    client = clients.connect(5)
    client.send(
        mb.gen_subscribe(1, [(f"{root}/t", sub_options(0, retain_handling=3))], proto_ver=5)
    )
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
def test_subscribe_packet_identifier_0_closes_the_connection(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-2.3.1-1 (3.1.1) / MQTT-2.2.1-3 (5.0): SUBSCRIBE MUST carry a non-zero Packet
    Identifier."""
    client = clients.connect(proto)
    client.send(mb.gen_subscribe(0, f"{root}/t", 0, proto_ver=proto))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@BOTH
@pytest.mark.parametrize(
    "topic_filter",
    ["{root}/#/x", "{root}/a#", "{root}/a+/b", "{root}/+a", "", "{root}/\x00"],
    ids=["hash-not-last", "hash-in-level", "plus-in-level", "plus-prefix", "empty", "nul"],
)
def test_invalid_topic_filter_is_refused(
    clients: Clients, root: str, proto: int, topic_filter: str
) -> None:
    """MQTT-4.7.1-1/-2 (3.1.1: #, + occupy a whole level, # last) / MQTT-4.7.1-1/-2 (5.0),
    MQTT-4.7.3-1/-2: an invalid Topic Filter is refused, with a SUBACK failure code (3.1.1:
    0x80; 5.0: >= 0x80, e.g. 0x8F) or by closing the connection."""
    client = clients.connect(proto)
    client.send(mb.gen_subscribe(5, topic_filter.format(root=root), 1, proto_ver=proto))
    try:
        suback = client.expect_packet(PacketType.SUBACK, packet_id=5)
    except AssertionError:
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL | {0x8F})
        return
    assert len(suback.reason_codes) == 1
    assert suback.reason_codes[0] == 0x80 if proto == 4 else suback.reason_codes[0] >= 0x80


@BOTH
def test_suback_matches_subscribe(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.8.4-1/-2 (SUBACK with the same Packet Identifier), MQTT-3.8.4-4/-5 (3.1.1) /
    MQTT-3.8.4-5/-6/-7 (5.0) and MQTT-3.9.3-1: one return code per filter, in order, each
    the granted QoS (at most the requested) or a failure; MQTT-3.9.3-2 (3.1.1): only 0x00,
    0x01, 0x02, 0x80."""
    client = clients.connect(proto)
    filters = [(f"{root}/a", 2), (f"{root}/b", 0), (f"{root}/+/c", 1)]
    suback = client.subscribe(filters, mid=0xBEEF)
    assert suback.packet_id == 0xBEEF
    assert len(suback.reason_codes) == 3
    for (_, requested), code in zip(filters, suback.reason_codes, strict=True):
        assert code <= requested or code >= 0x80
        if proto == 4:
            assert code in (0, 1, 2, 0x80)


@BOTH
@pytest.mark.parametrize(("granted", "published"), [(0, 2), (1, 2), (0, 1), (2, 1)])
def test_delivery_qos_is_the_minimum_of_granted_and_published(
    clients: Clients, root: str, proto: int, granted: int, published: int
) -> None:
    """MQTT-3.8.4-6 (3.1.1) / MQTT-3.8.4-8 (5.0): messages are sent at the minimum of the
    published QoS and the granted QoS."""
    topic = f"{root}/min"
    subscriber = clients.connect(proto)
    suback = subscriber.subscribe(topic, granted)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"x", qos=published)
    message = subscriber.recv_publish()
    assert message.qos == min(published, suback.reason_codes[0])


@BOTH
def test_resubscribe_replaces_the_subscription(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.8.4-3: a SUBSCRIBE with an existing Topic Filter replaces that subscription (one
    copy per message, at the new QoS) and re-sends matching retained messages (3.1.1 text;
    5.0 MQTT-3.8.4-4 with Retain Handling 0)."""
    topic = f"{root}/again"
    publisher = clients.connect(proto)
    publisher.publish(topic, b"retained", qos=1, retain=True)
    subscriber = clients.connect(proto)
    subscriber.subscribe(topic, 0)
    assert subscriber.recv_publish().qos == 0
    subscriber.subscribe(topic, 1)
    again = subscriber.recv_publish()
    assert (again.payload, again.retain, again.qos) == (b"retained", True, 1)
    publisher.publish(topic, b"live", qos=1)
    message = subscriber.recv_publish()
    assert (message.payload, message.qos) == (b"live", 1)
    subscriber.expect_no_packet(short_wait())
    publisher.publish(topic, b"", retain=True)


@BOTH
def test_multiple_filters_in_one_subscribe(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.8.4-4 (3.1.1) / MQTT-3.8.4-5 (5.0): several filters in one SUBSCRIBE act as a
    sequence of SUBSCRIBEs answered by one SUBACK."""
    subscriber = clients.connect(proto)
    suback = subscriber.subscribe([(f"{root}/x", 1), (f"{root}/y", 2)])
    assert suback.reason_codes == [1, 2]
    publisher = clients.connect(proto)
    publisher.publish(f"{root}/x", b"x", qos=2)
    publisher.publish(f"{root}/y", b"y", qos=2)
    got = sorted((m.topic, m.qos) for m in (subscriber.recv_publish(), subscriber.recv_publish()))
    assert got == [(f"{root}/x", 1), (f"{root}/y", 2)]


# Topic matching examples of MQTT 3.1.1 4.7.1 / MQTT 5.0 4.7.1, under a unique root.
MATCHING = {
    "{r}/sport/tennis/player1/#": {
        "{r}/sport/tennis/player1": True,
        "{r}/sport/tennis/player1/ranking": True,
        "{r}/sport/tennis/player1/score/wimbledon": True,
        "{r}/sport/tennis/player2": False,
    },
    "{r}/sport/#": {"{r}/sport": True, "{r}/sports": False, "{r}/sport/": True},
    "{r}/sport/tennis/+": {
        "{r}/sport/tennis/player1": True,
        "{r}/sport/tennis/player2": True,
        "{r}/sport/tennis/player1/ranking": False,
        "{r}/sport/tennis": False,
    },
    "{r}/sport/+": {"{r}/sport": False, "{r}/sport/": True},
    "{r}/+/+": {"{r}//finance": True, "{r}/a/b": True, "{r}/a": False},
    "{r}/+/tennis/#": {"{r}/sport/tennis": True, "{r}/x/y/tennis": False},
    "{r}/#": {"{r}": True, "{r}/a/b/c": True, "{r}x": False},
}


@BOTH
def test_wildcard_matching(clients: Clients, root: str, proto: int) -> None:
    """MQTT-4.7.1-1/-2/-3 (3.1.1) / 4.7.1 (5.0): '#' matches the parent and any number of
    levels, '+' exactly one level (possibly empty); MQTT-3.3.2-3: the Topic Name sent matches
    the filter (MQTT-4.7.3-4: no normalization)."""
    subscribers: dict[str, RawClient] = {}
    for topic_filter in MATCHING:
        subscribers[topic_filter] = clients.subscriber(topic_filter.format(r=root), 0, proto)
    publisher = clients.connect(proto)
    topics = sorted({t for cases in MATCHING.values() for t in cases})
    for topic in topics:
        publisher.publish(topic.format(r=root), topic.format(r=root).encode(), qos=1)
    for topic_filter, cases in MATCHING.items():
        expected = {t.format(r=root) for t, matches in cases.items() if matches}
        # Other filters' topics may match too: compute the full expectation from the table.
        for other_cases in MATCHING.values():
            for topic in other_cases:
                if topic in cases:
                    continue
                if _matches(topic_filter.format(r=root), topic.format(r=root)):
                    expected.add(topic.format(r=root))
        got = set()
        deadline = time.monotonic() + short_wait() * 5
        subscriber = subscribers[topic_filter]
        while got != expected and time.monotonic() < deadline:
            message = subscriber.recv_publish()
            assert message.payload == (message.topic or "").encode()
            got.add(message.topic)
        assert got == expected, topic_filter
    for subscriber in subscribers.values():
        extra = [p for p in subscriber.collect(short_wait() / 4) if p.type == PacketType.PUBLISH]
        assert extra == []


def _matches(topic_filter: str, topic: str) -> bool:
    """Reference matcher used to complete the expectation table (4.7.1)."""
    f_levels, t_levels = topic_filter.split("/"), topic.split("/")
    for i, level in enumerate(f_levels):
        if level == "#":
            return True
        if i >= len(t_levels):
            return False
        if level not in ("+", t_levels[i]):
            return False
    return len(f_levels) == len(t_levels)


@BOTH
def test_dollar_topics_are_not_matched_by_leading_wildcards(
    clients: Clients, uid: str, proto: int
) -> None:
    """MQTT-4.7.2-1: Topic Filters starting with a wildcard MUST NOT match Topic Names
    starting with '$' ('$cf/x' is matched by '$cf/x' or '$cf/+', not by '+/...' or '#')."""
    topic = f"$cf{uid}/{uid}/x"
    exact = clients.subscriber(topic, 0, proto)
    dollar_plus = clients.subscriber(f"$cf{uid}/+/x", 0, proto)
    wild = clients.connect(proto)
    filters: list[tuple[str, int]] = [(f"+/{uid}/x", 0), (f"+/{uid}/#", 0)]
    if proto == 5:
        filters.append(("#", sub_options(0, retain_handling=2)))
    wild.subscribe(filters)
    publisher = clients.connect(proto)
    publisher.publish(topic, b"dollar", qos=1)
    # The wildcard subscriber keeps seeing ordinary topics: a control message.
    publisher.publish(f"cf/{uid}/x", b"control", qos=1)
    assert exact.recv_publish().topic == topic
    assert dollar_plus.recv_publish().topic == topic
    received = [p.topic for p in wild.collect(short_wait()) if p.type == PacketType.PUBLISH]
    assert f"cf/{uid}/x" in received
    assert [t for t in received if t and t.startswith("$")] == []


# ---------------------------------------------------------------------------------------------
# MQTT 5 subscription options and identifiers
# ---------------------------------------------------------------------------------------------


def test_v5_no_local(clients: Clients, root: str) -> None:
    """MQTT-3.8.3-3 (5.0): with No Local 1 the Server MUST NOT forward the Client's own
    messages to it; other clients still get them."""
    topic = f"{root}/nl"
    client = clients.connect(5)
    client.subscribe([(topic, sub_options(1, no_local=True))])
    other = clients.subscriber(topic, 1, 5)
    client.publish(topic, b"mine", qos=1)
    assert other.recv_publish().payload == b"mine"
    client.expect_no_packet(short_wait())
    third = clients.connect(5)
    third.publish(topic, b"theirs", qos=1)
    assert client.recv_publish().payload == b"theirs"


@pytest.mark.parametrize("rap", [False, True], ids=["rap0", "rap1"])
def test_v5_retain_as_published(clients: Clients, root: str, rap: bool) -> None:
    """MQTT-3.3.1-12/-13 (5.0): with Retain As Published 0 the forwarded RETAIN flag is 0;
    with 1 it equals the published RETAIN flag. Retained messages sent on subscription keep
    RETAIN 1 either way (MQTT-3.3.1-9)."""
    topic = f"{root}/rap"
    subscriber = clients.connect(5)
    subscriber.subscribe([(topic, sub_options(1, retain_as_published=rap))])
    publisher = clients.connect(5)
    publisher.publish(topic, b"r", qos=1, retain=True)
    publisher.publish(topic, b"n", qos=1, retain=False)
    first, second = subscriber.recv_publish(), subscriber.recv_publish()
    assert (first.payload, first.retain) == (b"r", rap)
    assert (second.payload, second.retain) == (b"n", False)
    late = clients.connect(5)
    late.subscribe([(topic, sub_options(1, retain_as_published=rap))])
    assert late.recv_publish().retain is True
    publisher.publish(topic, b"", retain=True)


@pytest.mark.parametrize("handling", [0, 1, 2])
def test_v5_retain_handling(clients: Clients, root: str, handling: int) -> None:
    """MQTT-3.3.1-9/-10/-11 (5.0), MQTT-3.8.4-4: Retain Handling 0 sends retained messages
    on every SUBSCRIBE, 1 only when the subscription is new, 2 never."""
    topic = f"{root}/rh"
    publisher = clients.connect(5)
    publisher.publish(topic, b"kept", qos=1, retain=True)
    subscriber = clients.connect(5)
    for attempt in ("new", "existing"):
        subscriber.subscribe([(topic, sub_options(1, retain_handling=handling))])
        sent = handling == 0 or (handling == 1 and attempt == "new")
        if sent:
            message = subscriber.recv_publish()
            assert (message.payload, message.retain) == (b"kept", True)
        subscriber.expect_no_packet(short_wait() / 2)
    publisher.publish(topic, b"", retain=True)


def test_v5_subscription_identifier_is_sent_with_matching_messages(
    clients: Clients, root: str
) -> None:
    """MQTT-3.3.4-3 (5.0): the Server sends the Subscription Identifier of the matching
    subscription with each message; none for subscriptions without one."""
    subscriber = clients.connect(5)
    subscriber.subscribe(f"{root}/id/#", 1, properties={"subscription_identifier": 42})
    subscriber.subscribe(f"{root}/plain", 1)
    publisher = clients.connect(5)
    publisher.publish(f"{root}/id/x", b"a", qos=1)
    message = subscriber.recv_publish()
    assert message.properties.get("subscription_identifier") == [42]
    publisher.publish(f"{root}/plain", b"b", qos=1)
    plain = subscriber.recv_publish()
    assert "subscription_identifier" not in plain.properties


def test_v5_overlapping_subscription_identifiers(clients: Clients, root: str) -> None:
    """MQTT-3.3.4-3/-4/-5 (5.0): with overlapping subscriptions, one copy carries every
    matching Subscription Identifier, or each copy carries its own."""
    subscriber = clients.connect(5)
    subscriber.subscribe(f"{root}/o/#", 1, properties={"subscription_identifier": 1})
    subscriber.subscribe(f"{root}/o/+", 1, properties={"subscription_identifier": 268435455})
    publisher = clients.connect(5)
    publisher.publish(f"{root}/o/x", b"x", qos=1)
    copies = [subscriber.recv_publish()]
    copies += [p for p in subscriber.collect(short_wait()) if p.type == PacketType.PUBLISH]
    for packet in copies[1:]:
        subscriber.ack_publish(packet)
    ids = [sorted(c.properties.get("subscription_identifier", [])) for c in copies]
    if len(copies) == 1:
        assert ids == [[1, 268435455]]
    else:
        assert sorted(ids) == [[1], [268435455]]


def test_v5_subscription_identifier_is_replaced_with_the_subscription(
    clients: Clients, root: str
) -> None:
    """MQTT-3.8.4-3 (5.0), 3.8.2.1.2: re-subscribing replaces the subscription, including its
    Subscription Identifier."""
    topic = f"{root}/replace-id"
    subscriber = clients.connect(5)
    subscriber.subscribe(topic, 1, properties={"subscription_identifier": 5})
    subscriber.subscribe(topic, 1, properties={"subscription_identifier": 6})
    publisher = clients.connect(5)
    publisher.publish(topic, b"x", qos=1)
    assert subscriber.recv_publish().properties.get("subscription_identifier") == [6]
    subscriber.expect_no_packet(short_wait())


def test_v5_subscription_identifier_0_is_a_protocol_error(clients: Clients, root: str) -> None:
    """5.0 3.8.2.1.2: a Subscription Identifier of 0 is a Protocol Error."""
    client = clients.connect(5)
    client.send(
        mb.gen_subscribe(1, f"{root}/t", 0, proto_ver=5, properties={"subscription_identifier": 0})
    )
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


def test_v5_publish_with_subscription_identifier_is_a_protocol_error(
    clients: Clients, root: str
) -> None:
    """MQTT-3.3.4-6 (5.0): a PUBLISH from a Client MUST NOT contain a Subscription Identifier;
    the Server treats it as a Protocol Error (MQTT-4.13.1-1)."""
    client = clients.connect(5)
    client.send(
        mb.gen_publish(f"{root}/t", b"x", proto_ver=5, properties={"subscription_identifier": 3})
    )
    with deviation(
        clients.broker, "accepts a Subscription Identifier in a Client's PUBLISH (MQTT-3.3.4-6)"
    ):
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


def test_v5_suback_reason_codes(clients: Clients, root: str) -> None:
    """MQTT-3.9.3-2 (5.0): each SUBACK Reason Code is one of the Subscribe Reason Codes."""
    allowed = {0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2}
    client = clients.connect(5)
    suback = client.subscribe([(f"{root}/a", 0), (f"{root}/b", 1), (f"{root}/c/#", 2)])
    assert set(suback.reason_codes) <= allowed
    assert len(suback.reason_codes) == 3


def test_v5_server_capabilities_are_honoured(clients: Clients, root: str) -> None:
    """MQTT-3.2.2-9/-10 and 3.2.2.3 (5.0): a Server that advertises Wildcard / Subscription
    Identifier / Shared Subscription Available 0 answers such SUBSCRIBEs with 0xA2 / 0xA1 /
    0x9E (or DISCONNECT with them), and with Maximum QoS still accepts SUBSCRIBE at QoS 2."""
    client = clients.connect(5)
    assert client.connack is not None
    caps = client.connack.properties
    checks = [
        ("wildcard_subscription_available", f"{root}/+", None, 0xA2),
        ("subscription_identifier_available", f"{root}/s", {"subscription_identifier": 1}, 0xA1),
        ("shared_subscription_available", f"$share/g/{root}/s", None, 0x9E),
    ]
    tested = 0
    for name, topic_filter, properties, code in checks:
        if caps.get(name, 1) != 0:
            continue
        tested += 1
        probe = clients.connect(5)
        probe.send(mb.gen_subscribe(1, topic_filter, 0, proto_ver=5, properties=properties))
        try:
            suback = probe.expect_packet(PacketType.SUBACK)
        except AssertionError:
            probe.expect_closed(reason_code=code, require_reason=True)
            continue
        assert suback.reason_codes == [code]
    if "maximum_qos" in caps:
        tested += 1
        suback = client.subscribe(f"{root}/q", 2)
        assert suback.reason_codes[0] < 0x80
    if not tested:
        pytest.skip("the Server advertises every optional capability and QoS 2")
