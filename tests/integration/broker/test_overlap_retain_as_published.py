"""Overlapping subscriptions that differ in Retain As Published (MQTT 5.0 3.3.1.3, 3.8.3.1,
3.3.4).

A retained PUBLISH matching a client's subscription with Retain As Published 1 and
another with 0 cannot go as one copy: the first needs RETAIN 1 [MQTT-3.3.1-13], the
second RETAIN 0 [MQTT-3.3.1-12]. 3.3.4 lets the Server send a copy per subscription
[MQTT-3.3.4-5]: the broker sends two, each at the maximum QoS of its subscriptions and
with their Subscription Identifiers (as mosquitto does). A message without the retain
flag still goes once, at the maximum QoS, with every identifier [MQTT-3.3.4-2, -4].
"""

from __future__ import annotations

from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import Clients

PT = mb.PacketType


def _subscribe(client: RawClient, mid: int, topic_filter: str, options: int, sub_id: int) -> None:
    client.send(
        mb.gen_subscribe(
            mid,
            [(topic_filter, options)],
            proto_ver=5,
            properties={"subscription_identifier": sub_id},
        )
    )
    client.expect_packet(PT.SUBACK, packet_id=mid)


def test_a_retained_message_goes_once_per_retain_as_published_value(clients: Clients) -> None:
    sub = clients.raw_connect(5)
    _subscribe(sub, 1, "ov/#", mb.sub_options(0, retain_as_published=True), 1)
    _subscribe(sub, 2, "ov/x", mb.sub_options(2), 2)
    pub = clients.raw_connect(5)
    pub.send(mb.gen_publish("ov/x", b"r", qos=2, mid=1, retain=True, proto_ver=5))
    pub.expect_packet(PT.PUBREC, packet_id=1)
    pub.send(mb.gen_pubrel(1, proto_ver=5))
    pub.expect_packet(PT.PUBCOMP, packet_id=1)
    copies = set()
    for _ in range(2):
        got = sub.recv_publish()
        copies.add((got.qos, got.retain, tuple(got.properties.get("subscription_identifier", []))))
    assert copies == {(0, True, (1,)), (2, False, (2,))}
    sub.expect_no_packet()
    # Without the retain flag: one copy, QoS 2, both identifiers.
    pub.send(mb.gen_publish("ov/x", b"live", qos=1, mid=2, proto_ver=5))
    pub.expect_packet(PT.PUBACK, packet_id=2)
    got = sub.recv_publish()
    assert (got.payload, got.qos, got.retain) == (b"live", 1, False)
    assert sorted(got.properties.get("subscription_identifier", [])) == [1, 2]
    sub.expect_no_packet()


def test_all_retain_as_published_still_one_copy(clients: Clients) -> None:
    sub = clients.raw_connect(5)
    _subscribe(sub, 1, "ow/#", mb.sub_options(1, retain_as_published=True), 1)
    _subscribe(sub, 2, "ow/x", mb.sub_options(2, retain_as_published=True), 2)
    pub = clients.raw_connect(5)
    pub.send(mb.gen_publish("ow/x", b"r", qos=1, mid=1, retain=True, proto_ver=5))
    pub.expect_packet(PT.PUBACK, packet_id=1)
    got = sub.recv_publish()
    assert (got.qos, got.retain) == (1, True)
    assert sorted(got.properties.get("subscription_identifier", [])) == [1, 2]
    sub.expect_no_packet()
