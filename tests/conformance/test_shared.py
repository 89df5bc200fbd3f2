"""Shared subscriptions: MQTT 5.0 section 4.8.2 (and 3.8.3.1 No Local)."""

from __future__ import annotations

import pytest

from tests.conformance.support import MALFORMED_OR_PROTOCOL, Clients, deviation, short_wait
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import PacketType, sub_options
from tests.helpers.raw_client import RawClient


def _require_shared(client: RawClient) -> None:
    assert client.connack is not None
    if client.connack.properties.get("shared_subscription_available", 1) == 0:
        pytest.skip("the Server advertises Shared Subscription Available 0")


def test_shared_subscription_delivers_each_message_to_one_member(
    clients: Clients, root: str
) -> None:
    """4.8.2 (5.0): each message matching a Shared Subscription goes to exactly one session of
    the group; a non-shared subscription and another group still get every message."""
    members = [clients.connect(5) for _ in range(2)]
    _require_shared(members[0])
    for member in members:
        member.subscribe(f"$share/g{clients.uid}/{root}/work/+", 1)
    other_group = clients.subscriber(f"$share/h{clients.uid}/{root}/work/+", 1, 5)
    plain = clients.subscriber(f"{root}/work/+", 1, 5)
    publisher = clients.connect(5)
    count = 10
    for i in range(count):
        publisher.publish(f"{root}/work/{i}", b"%d" % i, qos=1)
    assert sorted(plain.recv_publish().payload for _ in range(count)) == sorted(
        b"%d" % i for i in range(count)
    )
    assert len([other_group.recv_publish() for _ in range(count)]) == count
    got = []
    for member in members:
        for packet in member.collect(short_wait()):
            if packet.type == PacketType.PUBLISH:
                member.ack_publish(packet)
                got.append(packet.payload)
    assert sorted(got) == sorted(b"%d" % i for i in range(count))


def test_shared_subscription_with_no_local_is_a_protocol_error(clients: Clients, root: str) -> None:
    """MQTT-3.8.3-4 (5.0): setting No Local on a Shared Subscription is a Protocol Error."""
    client = clients.connect(5)
    _require_shared(client)
    client.send(
        mb.gen_subscribe(1, [(f"$share/g/{root}/t", sub_options(1, no_local=True))], proto_ver=5)
    )
    with deviation(clients.broker, "accepts No Local on a Shared Subscription (MQTT-3.8.3-4)"):
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


def test_retained_messages_are_not_sent_to_shared_subscriptions(
    clients: Clients, root: str
) -> None:
    """5.0 3.3.1.3 / 4.8.2: retained messages are sent when a new non-shared subscription is
    made, not on a Shared Subscription."""
    topic = f"{root}/retained"
    publisher = clients.connect(5)
    publisher.publish(topic, b"kept", qos=1, retain=True)
    member = clients.connect(5)
    _require_shared(member)
    member.subscribe(f"$share/g{clients.uid}/{topic}", 1)
    try:
        with deviation(
            clients.broker,
            "sends retained messages on a new Shared Subscription (5.0 3.3.1.3: only a new "
            "Non-shared Subscription gets them)",
        ):
            member.expect_no_packet(short_wait())
    finally:
        publisher.publish(topic, b"", retain=True)


def test_shared_subscription_respects_granted_qos(clients: Clients, root: str) -> None:
    """MQTT-4.8.2-3 (5.0): the Server respects the granted QoS of the member's subscription."""
    topic = f"{root}/qos"
    member = clients.connect(5)
    _require_shared(member)
    member.subscribe(f"$share/g{clients.uid}/{topic}", 0)
    publisher = clients.connect(5)
    publisher.publish(topic, b"x", qos=2)
    assert member.recv_publish().qos == 0


@pytest.mark.parametrize(
    "topic_filter",
    ["$share/{uid}", "$share//{root}/t", "$share/g+/{root}/t", "$share/g#/{root}/t"],
    ids=["no-filter", "empty-share-name", "plus-in-share-name", "hash-in-share-name"],
)
def test_invalid_shared_subscription_is_refused(
    clients: Clients, root: str, topic_filter: str
) -> None:
    """MQTT-4.8.2-1/-2 (5.0): a Shared Subscription filter starts with '$share/', a ShareName of
    at least one character without '/', '+' or '#', then '/' and a Topic Filter; others are
    refused with a SUBACK failure (0x8F) or by closing the connection."""
    client = clients.connect(5)
    _require_shared(client)
    client.send(
        mb.gen_subscribe(3, topic_filter.format(uid=clients.uid, root=root), 0, proto_ver=5)
    )
    try:
        suback = client.expect_packet(PacketType.SUBACK, packet_id=3)
    except AssertionError:
        client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL | {0x8F})
        return
    with deviation(
        clients.broker,
        "grants a '$share/' filter without ShareName or Topic Filter (MQTT-4.8.2-1/-2)",
    ):
        assert suback.reason_codes[0] >= 0x80


def test_unsubscribe_from_a_shared_subscription(clients: Clients, root: str) -> None:
    """MQTT-3.10.4-1/-2 (5.0): UNSUBSCRIBE with the full '$share/...' filter removes the
    Shared Subscription."""
    topic = f"{root}/leave"
    shared = f"$share/g{clients.uid}/{topic}"
    member = clients.connect(5)
    _require_shared(member)
    member.subscribe(shared, 1)
    unsuback = member.unsubscribe(shared)
    assert unsuback.reason_codes == [0x00]
    publisher = clients.connect(5)
    publisher.publish(topic, b"x", qos=1)
    member.expect_no_packet(short_wait())
