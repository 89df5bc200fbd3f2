"""MQTT 5 features: topic aliases, message expiry, maximum packet size both ways,
subscription identifiers, subscription options, request/response, properties passed
through, reason codes on acknowledgements, server DISCONNECT reason codes."""

from __future__ import annotations

import time

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import (
    Clients,
    SubscribeOptions,
    connect_props,
    publish_props,
    subscribe_props,
)

RC = mb.ReasonCode

# --------------------------------------------------------------------------------------------
# Topic aliases (client -> broker), 3.3.2.3.4
# --------------------------------------------------------------------------------------------


def test_topic_alias_set_then_used_with_an_empty_topic(clients: Clients) -> None:
    sub5 = clients.raw_connect(5)
    sub5.subscribe("ta/#", 1)
    sub4 = clients.subscriber(4, "ta/#", 1)
    pub = clients.connect(5)
    assert pub.connack is not None
    assert pub.connack.prop("TopicAliasMaximum", 0) >= 2
    pub.publish("ta/one", b"1", 1, properties=publish_props(TopicAlias=1))
    pub.publish("", b"2", 1, properties=publish_props(TopicAlias=1))
    pub.publish("ta/two", b"3", 1, properties=publish_props(TopicAlias=1))  # remapped
    pub.publish("", b"4", 1, properties=publish_props(TopicAlias=1))
    expected = [("ta/one", b"1"), ("ta/one", b"2"), ("ta/two", b"3"), ("ta/two", b"4")]
    assert [(m.topic, m.payload) for m in sub4.expect_messages(4)] == expected
    raw = [sub5.recv_publish() for _ in range(4)]
    assert [(p.topic, p.payload) for p in raw] == expected
    # The subscriber set no Topic Alias Maximum: the Server MUST NOT send it aliases
    # [MQTT-3.1.2-27]; the publisher's alias is not forwarded.
    assert all("topic_alias" not in p.properties for p in raw)


@pytest.mark.gateway_config("mqtt:\n  max_topic_alias: 2\n")
def test_topic_alias_maximum_is_advertised_and_enforced(clients: Clients) -> None:
    # 3.2.2.3.8 advertise, [MQTT-3.3.2-9]: never exceeded by the client; 3.3.4: an alias
    # above it is a Protocol Error: DISCONNECT 0x94 Topic Alias invalid.
    witness = clients.raw_connect(5)
    witness.subscribe("w/t", 1)
    client = clients.raw(5)
    connack = client.do_connect("alias", proto_ver=5)
    assert connack.properties.get("topic_alias_maximum") == 2
    client.publish("ta/t", b"ok", qos=1, properties={"topic_alias": 2})
    client.send(mb.gen_publish("ta/t", b"x", proto_ver=5, properties={"topic_alias": 3}))
    client.expect_closed(reason_code=RC.TOPIC_ALIAS_INVALID, require_reason=True)
    witness.publish("w/t", b"alive", qos=1)
    assert witness.recv_publish().payload == b"alive"


@pytest.mark.gateway_config("mqtt:\n  max_topic_alias: 0\n")
def test_topic_aliases_disabled(clients: Clients) -> None:
    # Absent Topic Alias Maximum means 0: the client MUST NOT send aliases [MQTT-3.2.2-18].
    client = clients.raw(5)
    connack = client.do_connect("noalias", proto_ver=5)
    assert connack.properties.get("topic_alias_maximum", 0) == 0
    client.send(mb.gen_publish("ta/t", b"x", proto_ver=5, properties={"topic_alias": 1}))
    client.expect_closed(reason_code=RC.TOPIC_ALIAS_INVALID, require_reason=True)


def test_topic_alias_0_is_refused(clients: Clients) -> None:
    # [MQTT-3.3.2-8] the sender MUST NOT send Topic Alias 0; 3.3.4: "A Topic Alias value of
    # 0 or greater than the Maximum Topic Alias is a Protocol Error, the receiver uses
    # DISCONNECT with Reason Code of 0x94 (Topic Alias invalid)".
    client = clients.raw_connect(5)
    client.send(mb.gen_publish("ta/t", b"x", proto_ver=5, properties={"topic_alias": 0}))
    client.expect_closed(reason_code=RC.TOPIC_ALIAS_INVALID, require_reason=True)


def test_unknown_topic_alias_is_a_protocol_error(clients: Clients) -> None:
    # 3.3.4: a zero length Topic Name with a Topic Alias that has no mapping is a Protocol
    # Error: DISCONNECT 0x82.
    client = clients.raw_connect(5)
    client.send(mb.gen_publish("", b"x", proto_ver=5, properties={"topic_alias": 1}))
    client.expect_closed(reason_code=RC.PROTOCOL_ERROR, require_reason=True)


def test_topic_aliases_do_not_survive_the_connection(clients: Clients) -> None:
    # [MQTT-3.3.2-7]: aliases are per Network Connection and start anew.
    props = {"session_expiry_interval": 60}
    first = clients.raw_connect(5, "alias2", clean_session=False, properties=props)
    first.publish("ta/t", b"1", qos=1, properties={"topic_alias": 1})
    first.disconnect()
    again = clients.raw_connect(5, "alias2", clean_session=False, properties=props)
    again.send(mb.gen_publish("", b"2", qos=1, mid=2, proto_ver=5, properties={"topic_alias": 1}))
    again.expect_closed(reason_code=RC.PROTOCOL_ERROR, require_reason=True)


# --------------------------------------------------------------------------------------------
# Message expiry, 3.3.2.3.3
# --------------------------------------------------------------------------------------------


def test_message_expiry_interval_is_forwarded_to_a_live_subscriber(clients: Clients) -> None:
    sub = clients.subscriber(5, "me/t", 1)
    pub = clients.connect(5)
    pub.publish("me/t", b"x", 1, properties=publish_props(MessageExpiryInterval=60))
    message = sub.expect_message()
    assert message.properties.MessageExpiryInterval in (59, 60)


def test_expired_messages_are_not_delivered_from_the_offline_queue(
    clients: Clients, gw: RunningGateway
) -> None:
    # [MQTT-3.3.2-5]: expired: the Server MUST NOT publish it to any subscriber that has
    # not started receiving it; [MQTT-3.3.2-6]: the forwarded interval is what is left.
    props = connect_props(SessionExpiryInterval=60)
    sub = clients.paho(5, "offline")
    sub.connect(clean_start=False, properties=props)
    assert sub.subscribe("me/q", 1) == [1]
    sub.disconnect()
    pub = clients.connect(5)
    pub.publish("me/q", b"short", 1, properties=publish_props(MessageExpiryInterval=1))
    pub.publish("me/q", b"long", 1, properties=publish_props(MessageExpiryInterval=60))
    pub.publish("me/q", b"forever", 1)
    time.sleep(1.2)  # the time that makes "short" expire and shortens "long"
    again = clients.paho(5, "offline")
    assert again.connect(clean_start=False, properties=props).session_present is True
    long, forever = again.expect_messages(2)
    assert long.payload == b"long"
    assert 0 < long.properties.MessageExpiryInterval < 60
    assert forever.payload == b"forever"
    assert getattr(forever.properties, "MessageExpiryInterval", None) is None
    assert gw.call(lambda: gw.broker.counters.dropped_expired) == 1


def test_expired_retained_message_is_not_sent_to_new_subscribers(clients: Clients) -> None:
    pub = clients.connect(5)
    pub.publish("mr/short", b"short", 1, True, publish_props(MessageExpiryInterval=1))
    pub.publish("mr/long", b"long", 1, True, publish_props(MessageExpiryInterval=60))
    time.sleep(1.2)  # the time that makes "short" expire
    sub = clients.subscriber(5, "mr/#", 1)
    message = sub.expect_message()
    assert (message.topic, message.retain) == ("mr/long", True)
    assert 0 < message.properties.MessageExpiryInterval < 60
    sub.expect_no_message()


# --------------------------------------------------------------------------------------------
# Maximum Packet Size, 3.1.2.11.4 / 3.2.2.3.6
# --------------------------------------------------------------------------------------------


def _publish_of_size(size: int, topic: str = "mp/t", qos: int = 0) -> bytes:
    """An MQTT 5 PUBLISH of exactly ``size`` bytes."""
    frame = mb.gen_publish(topic, b"", qos=qos, mid=1 if qos else None, proto_ver=5)
    payload = b"p" * (size - len(frame))
    while (
        len(frame := mb.gen_publish(topic, payload, qos=qos, mid=1 if qos else None, proto_ver=5))
        > size
    ):
        payload = payload[:-1]
    assert len(frame) == size
    return frame


@pytest.mark.gateway_config("mqtt:\n  max_packet_size: 1024\n")
def test_broker_maximum_packet_size_is_advertised_and_enforced(clients: Clients) -> None:
    # 3.2.2.3.6: the CONNACK carries the Maximum Packet Size; a client MUST NOT exceed it
    # [MQTT-3.2.2-15]; a bigger packet is an error: DISCONNECT 0x95 Packet too large.
    witness = clients.subscriber(5, "mp/#", 0)
    client = clients.raw(5)
    connack = client.do_connect("big", proto_ver=5)
    assert connack.properties.get("maximum_packet_size") == 1024
    client.send(_publish_of_size(1024))  # exactly the limit: accepted
    assert len(witness.expect_message().payload) > 900
    client.send(_publish_of_size(1025), allow_closed=True)
    client.expect_closed(reason_code=RC.PACKET_TOO_LARGE, require_reason=True)
    assert witness.is_connected


@pytest.mark.gateway_config("mqtt:\n  max_packet_size: 1024\n")
def test_paho_publish_over_the_maximum_packet_size_is_refused(clients: Clients) -> None:
    witness = clients.subscriber(5, "mp/#", 1)
    client = clients.connect(5)
    client.client.publish("mp/big", b"x" * 2000, 1)
    info = client.wait_disconnected()
    assert (info.from_server, info.reason_code) == (True, RC.PACKET_TOO_LARGE)
    other = clients.connect(5)
    other.publish("mp/small", b"fine", 1)
    assert witness.expect_message().payload == b"fine"


@pytest.mark.parametrize("qos", [0, 1])
def test_messages_over_the_client_maximum_packet_size_are_not_sent(
    clients: Clients, gw: RunningGateway, qos: int
) -> None:
    # [MQTT-3.1.2-24]: the Server MUST NOT send packets exceeding the client's Maximum
    # Packet Size; [MQTT-3.1.2-25]: it discards such a message as if sent.
    sub = clients.connect(5, properties=connect_props(MaximumPacketSize=200))
    assert sub.subscribe("cs/t", qos) == [qos]
    pub = clients.connect(5)
    pub.publish("cs/t", b"x" * 300, qos)
    pub.publish("cs/t", b"small", qos)
    assert sub.expect_message().payload == b"small"
    assert gw.call(lambda: gw.broker.counters.dropped_too_large) == 1
    assert sub.is_connected


# --------------------------------------------------------------------------------------------
# Subscription identifiers, 3.8.2.1.2
# --------------------------------------------------------------------------------------------


def test_subscription_identifiers_come_with_matching_messages(clients: Clients) -> None:
    sub = clients.connect(5)
    assert sub.subscribe("si/+", 1, properties=subscribe_props(SubscriptionIdentifier=7)) == [1]
    assert sub.subscribe("si/#", 1, properties=subscribe_props(SubscriptionIdentifier=9)) == [1]
    plain = clients.subscriber(5, "si/#", 1)
    pub = clients.connect(5)
    pub.publish("si/a", b"both", 1)
    pub.publish("si/a/b", b"only #", 1)
    both = sub.expect_message()
    # [MQTT-3.3.4-3..5]: one message carrying every matching identifier.
    assert (both.payload, sorted(both.properties.SubscriptionIdentifier)) == (b"both", [7, 9])
    deep = sub.expect_message()
    assert (deep.payload, deep.properties.SubscriptionIdentifier) == (b"only #", [9])
    # Another subscriber's identifiers are its own.
    for message in plain.expect_messages(2):
        assert getattr(message.properties, "SubscriptionIdentifier", None) is None


def test_subscription_identifier_comes_with_retained_messages(clients: Clients) -> None:
    pub = clients.connect(5)
    pub.publish("sr/t", b"kept", 1, retain=True)
    sub = clients.connect(5)
    assert sub.subscribe("sr/#", 1, properties=subscribe_props(SubscriptionIdentifier=42)) == [1]
    message = sub.expect_message()
    assert (message.payload, message.retain) == (b"kept", True)
    assert message.properties.SubscriptionIdentifier == [42]


def test_resubscribing_replaces_the_subscription_identifier(clients: Clients) -> None:
    sub = clients.connect(5)
    sub.subscribe("sx/t", 1, properties=subscribe_props(SubscriptionIdentifier=1))
    sub.subscribe("sx/t", 1, properties=subscribe_props(SubscriptionIdentifier=2))
    pub = clients.connect(5)
    pub.publish("sx/t", b"x", 1)
    assert sub.expect_message().properties.SubscriptionIdentifier == [2]


# --------------------------------------------------------------------------------------------
# Subscription options, 3.8.3.1
# --------------------------------------------------------------------------------------------


def test_no_local_keeps_a_client_from_its_own_messages(clients: Clients) -> None:
    # [MQTT-3.8.3-3]: No Local 1: not forwarded to the connection that published it.
    me = clients.connect(5)
    assert me.subscribe("nl/t", options=SubscribeOptions(qos=1, noLocal=True)) == [1]
    assert me.subscribe("nl/own", options=SubscribeOptions(qos=1, noLocal=False)) == [1]
    me.publish("nl/t", b"mine", 1)
    me.publish("nl/own", b"mine too", 1)
    assert me.expect_message().payload == b"mine too"
    other = clients.connect(5)
    other.publish("nl/t", b"theirs", 1)
    assert me.expect_message().payload == b"theirs"


def test_retain_as_published(clients: Clients) -> None:
    # [MQTT-3.3.1-12] / [MQTT-3.3.1-13]
    kept = clients.connect(5)
    assert kept.subscribe("rap/t", options=SubscribeOptions(qos=1, retainAsPublished=True)) == [1]
    cleared = clients.connect(5)
    assert cleared.subscribe("rap/t", options=SubscribeOptions(qos=1, retainAsPublished=False)) == [
        1
    ]
    pub = clients.connect(5)
    pub.publish("rap/t", b"retained", 1, retain=True)
    pub.publish("rap/t", b"plain", 1, retain=False)
    assert [(m.payload, m.retain) for m in kept.expect_messages(2)] == [
        (b"retained", True),
        (b"plain", False),
    ]
    assert [(m.payload, m.retain) for m in cleared.expect_messages(2)] == [
        (b"retained", False),
        (b"plain", False),
    ]


@pytest.mark.parametrize(
    ("handling", "first", "second"),
    [(0, True, True), (1, True, False), (2, False, False)],
    ids=["send", "send-if-new", "never"],
)
def test_retain_handling(clients: Clients, handling: int, first: bool, second: bool) -> None:
    # [MQTT-3.3.1-9] (0: on every subscribe), [MQTT-3.3.1-10] (1: only if the
    # subscription did not exist), [MQTT-3.3.1-11] (2: never).
    pub = clients.connect(5)
    pub.publish("rh/t", b"retained", 1, retain=True)
    sub = clients.connect(5)
    options = SubscribeOptions(qos=1, retainHandling=handling)
    for expect_retained in (first, second):
        assert sub.subscribe("rh/t", options=options) == [1]
        # Retained messages follow the SUBACK; a live message published now comes after.
        pub.publish("rh/t", b"live", 1)
        if expect_retained:
            retained = sub.expect_message()
            assert (retained.payload, retained.retain) == (b"retained", True)
        assert sub.expect_message().payload == b"live"


# --------------------------------------------------------------------------------------------
# Request / response and properties passed through, 3.3.2.3
# --------------------------------------------------------------------------------------------


def test_request_response(clients: Clients) -> None:
    # 4.10: Response Topic and Correlation Data reach the responder unaltered.
    responder = clients.subscriber(5, "svc/+/req", 1)
    requester = clients.subscriber(5, "svc/replies/me", 1)
    requester.publish(
        "svc/sum/req",
        b"1+2",
        1,
        properties=publish_props(ResponseTopic="svc/replies/me", CorrelationData=b"\x00id-7\xff"),
    )
    request = responder.expect_message()
    assert request.properties.ResponseTopic == "svc/replies/me"
    assert request.properties.CorrelationData == b"\x00id-7\xff"
    responder.publish(
        request.properties.ResponseTopic,
        b"3",
        1,
        properties=publish_props(CorrelationData=request.properties.CorrelationData),
    )
    reply = requester.expect_message()
    assert (reply.topic, reply.payload, reply.properties.CorrelationData) == (
        "svc/replies/me",
        b"3",
        b"\x00id-7\xff",
    )


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_properties_pass_through_unaltered(clients: Clients, qos: int) -> None:
    # [MQTT-3.3.2-4] payload format, [MQTT-3.3.2-20] content type, [MQTT-3.3.2-17..18]
    # user properties in order, duplicates kept.
    users = [("b", "2"), ("a", "1"), ("a", "0"), ("z", ""), ("ü", "ñ")]
    sub5 = clients.subscriber(5, "pp/t", qos)
    sub4 = clients.subscriber(4, "pp/t", qos)
    pub = clients.connect(5)
    props = publish_props(
        PayloadFormatIndicator=1, ContentType="application/json", UserProperty=users
    )
    pub.publish("pp/t", b'{"v": 1}', qos, properties=props)
    message = sub5.expect_message()
    assert message.payload == b'{"v": 1}'
    assert message.properties.PayloadFormatIndicator == 1
    assert message.properties.ContentType == "application/json"
    assert message.properties.UserProperty == users
    assert sub4.expect_message().payload == b'{"v": 1}'


def test_properties_of_a_retained_message_are_kept(clients: Clients) -> None:
    pub = clients.connect(5)
    props = publish_props(ContentType="text/plain", UserProperty=[("k", "v")])
    pub.publish("pr/t", b"stored", 1, retain=True, properties=props)
    sub = clients.subscriber(5, "pr/t", 1)
    message = sub.expect_message()
    assert (message.retain, message.properties.ContentType, message.properties.UserProperty) == (
        True,
        "text/plain",
        [("k", "v")],
    )


# --------------------------------------------------------------------------------------------
# Reason codes on acknowledgements
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("qos", [1, 2])
def test_no_matching_subscribers_reason_code(clients: Clients, qos: int) -> None:
    # 3.4.2.1 (PUBACK) / 3.5.2.1 (PUBREC): 0x10 No matching subscribers; 0x00 once
    # somebody subscribed.
    pub = clients.raw_connect(5)
    ack = pub.publish("nobody/t", b"x", qos=qos)
    if qos == 2:  # publish() returned the PUBCOMP: look at the PUBREC instead
        pub.send(mb.gen_publish("nobody/t", b"x", qos=2, mid=10, proto_ver=5))
        ack = pub.expect_packet(mb.PacketType.PUBREC, packet_id=10)
        pub.send(mb.gen_pubrel(10, proto_ver=5))
        pub.expect_packet(mb.PacketType.PUBCOMP, packet_id=10)
    assert ack is not None
    assert ack.reason_code == RC.NO_MATCHING_SUBSCRIBERS
    paho = clients.connect(5)
    # paho reports the PUBACK's reason code (for QoS 2 it reports the PUBCOMP's).
    assert paho.publish("nobody/t", b"x", 1) == RC.NO_MATCHING_SUBSCRIBERS
    clients.subscriber(5, "nobody/#", 1)
    assert paho.publish("nobody/t", b"x", 1) == RC.SUCCESS
    pub.send(mb.gen_publish("nobody/t", b"x", qos=qos, mid=11, proto_ver=5))
    ack_type = mb.PacketType.PUBACK if qos == 1 else mb.PacketType.PUBREC
    assert pub.expect_packet(ack_type, packet_id=11).reason_code == RC.SUCCESS


def test_unsuback_reason_codes(clients: Clients) -> None:
    # 3.11.3: 0x00 Success, 0x11 No subscription existed.
    client = clients.subscriber(5, "us/a", 1)
    assert client.unsubscribe("us/a") == [RC.SUCCESS]
    assert client.unsubscribe("us/a") == [RC.NO_SUBSCRIPTION_EXISTED]


@pytest.mark.gateway_config("mqtt:\n  max_qos: 1\n")
def test_maximum_qos_is_advertised_granted_and_enforced(clients: Clients) -> None:
    # [MQTT-3.2.2-9]: Maximum QoS in CONNACK; subscriptions granted at most that; 3.2.2.3.4:
    # a PUBLISH above it: DISCONNECT 0x9B QoS not supported.
    client = clients.raw(5)
    connack = client.do_connect("mq", proto_ver=5)
    assert connack.properties.get("maximum_qos") == 1
    assert client.subscribe("mq/t", 2).reason_codes == [1]
    client.send(mb.gen_publish("mq/t", b"x", qos=2, mid=3, proto_ver=5))
    client.expect_closed(reason_code=RC.QOS_NOT_SUPPORTED, require_reason=True)


@pytest.mark.gateway_config("mqtt:\n  retain_available: false\n")
def test_retain_not_available_is_advertised_and_enforced(clients: Clients) -> None:
    # 3.2.2.3.5: Retain Available 0; a retained PUBLISH then: DISCONNECT 0x9A.
    client = clients.raw(5)
    connack = client.do_connect("nr", proto_ver=5)
    assert connack.properties.get("retain_available") == 0
    client.send(mb.gen_publish("nr/t", b"x", retain=True, proto_ver=5))
    client.expect_closed(reason_code=RC.RETAIN_NOT_SUPPORTED, require_reason=True)


@pytest.mark.gateway_config("mqtt:\n  receive_maximum: 2\n")
def test_receive_maximum_of_the_broker_is_advertised_and_enforced(clients: Clients) -> None:
    # [MQTT-3.3.4-7] / 3.3.4: more unacknowledged QoS 2 PUBLISH than the Receive Maximum:
    # DISCONNECT 0x93 Receive Maximum exceeded.
    client = clients.raw(5)
    connack = client.do_connect("rmx", proto_ver=5)
    assert connack.properties.get("receive_maximum") == 2
    for mid in (1, 2):
        client.send(mb.gen_publish("rmx/t", b"x", qos=2, mid=mid, proto_ver=5))
        client.expect_packet(mb.PacketType.PUBREC, packet_id=mid)
    client.send(mb.gen_publish("rmx/t", b"x", qos=2, mid=3, proto_ver=5))
    client.expect_closed(reason_code=RC.RECEIVE_MAXIMUM_EXCEEDED, require_reason=True)


def test_pubrel_for_an_unknown_packet_id_gets_pubcomp_0x92(clients: Clients) -> None:
    client = clients.raw_connect(5)
    client.send(mb.gen_pubrel(99, proto_ver=5))
    pubcomp = client.expect_packet(mb.PacketType.PUBCOMP, packet_id=99)
    assert pubcomp.reason_code == RC.PACKET_IDENTIFIER_NOT_FOUND


@pytest.mark.parametrize(
    ("name", "frames", "codes"),
    [
        ("second-connect", [mb.gen_connect("again", proto_ver=5)], {RC.PROTOCOL_ERROR}),
        (
            "publish-with-subscription-identifier",
            [mb.gen_publish("pe/t", b"x", proto_ver=5, properties={"subscription_identifier": 1})],
            {RC.PROTOCOL_ERROR},
        ),
        (
            "shared-subscription-with-no-local",
            [
                mb.gen_subscribe(
                    1, [("$share/g/pe/t", mb.sub_options(1, no_local=True))], proto_ver=5
                )
            ],
            {RC.PROTOCOL_ERROR},
        ),
        (
            "subscription-identifier-0",
            [mb.gen_subscribe(1, "pe/t", proto_ver=5, properties={"subscription_identifier": 0})],
            {RC.PROTOCOL_ERROR, RC.MALFORMED_PACKET},
        ),
        (
            "qos-3-publish",
            [mb.gen_publish("pe/t", b"x", qos=3, mid=1, proto_ver=5)],
            {RC.MALFORMED_PACKET},
        ),
        ("empty-topic-without-alias", [mb.gen_publish("", b"x", proto_ver=5)], {RC.PROTOCOL_ERROR}),
        (
            "retain-handling-3",
            [mb.gen_subscribe(1, [("pe/t", mb.sub_options(1, retain_handling=3))], proto_ver=5)],
            {RC.PROTOCOL_ERROR, RC.MALFORMED_PACKET},
        ),
    ],
)
def test_server_disconnect_carries_the_reason_code(
    clients: Clients, name: str, frames: list[bytes], codes: set[int]
) -> None:
    # 4.13: on a protocol error the Server SHOULD send DISCONNECT with the reason code,
    # then MUST close the connection.
    witness = clients.raw_connect(5)
    witness.subscribe("alive/t", 1)
    client = clients.raw_connect(5)
    for frame in frames:
        client.send(frame, allow_closed=True)
    client.expect_closed(reason_code=codes, require_reason=True)
    witness.publish("alive/t", name, qos=1)
    assert witness.recv_publish().payload == name.encode()


def test_session_expiry_on_disconnect_after_zero_is_a_protocol_error(clients: Clients) -> None:
    # 3.14.2.2.2: Session Expiry Interval 0 on CONNECT, non-zero on DISCONNECT: Protocol
    # Error; the Server may say so with DISCONNECT 0x82, and closes.
    client = clients.raw_connect(5)
    client.send(mb.gen_disconnect(0, proto_ver=5, properties={"session_expiry_interval": 30}))
    client.expect_closed(reason_code=RC.PROTOCOL_ERROR)


@pytest.mark.gateway_config("mqtt:\n  max_qos: 1\n")
def test_will_qos_above_the_maximum_qos_is_refused(clients: Clients) -> None:
    # [MQTT-3.2.2-12]: a Will QoS exceeding the Server's capabilities: reject the
    # connection, CONNACK 0x9B QoS not supported (SHOULD), then close (MUST).
    client = clients.raw(5)
    client.send(mb.gen_connect("wq", proto_ver=5, will_topic="w/t", will_qos=2))
    final = client.expect_closed(
        reason_code=RC.QOS_NOT_SUPPORTED, require_reason=True, packet_type=mb.PacketType.CONNACK
    )
    assert final is not None
    assert final.session_present is False


@pytest.mark.gateway_config("mqtt:\n  retain_available: false\n")
def test_will_retain_without_retain_available_is_refused(clients: Clients) -> None:
    # [MQTT-3.2.2-13]: a Will with Will Retain 1 when retained messages are not supported:
    # reject the connection, CONNACK 0x9A Retain not supported (SHOULD), then close (MUST).
    client = clients.raw(5)
    client.send(mb.gen_connect("wr", proto_ver=5, will_topic="w/t", will_retain=True))
    final = client.expect_closed(
        reason_code=RC.RETAIN_NOT_SUPPORTED,
        require_reason=True,
        packet_type=mb.PacketType.CONNACK,
    )
    assert final is not None
    assert final.session_present is False


@pytest.mark.gateway_config(
    "mqtt:\n  wildcard_subscriptions: false\n  shared_subscriptions: false\n"
    "  subscription_identifiers: false\n"
)
def test_disabled_capabilities_are_advertised_and_refused(clients: Clients) -> None:
    # 3.2.2.3.11-13: Wildcard / Subscription Identifier / Shared Subscription Available 0;
    # SUBACK 0xA2, 0x9E; a Subscription Identifier then: DISCONNECT 0xA1.
    client = clients.raw(5)
    connack = client.do_connect("caps", proto_ver=5)
    assert connack.properties.get("wildcard_subscription_available") == 0
    assert connack.properties.get("shared_subscription_available") == 0
    assert connack.properties.get("subscription_identifier_available") == 0
    suback = client.subscribe([("caps/+", 1), ("$share/g/caps/t", 1), ("caps/t", 1)])
    assert suback.reason_codes == [
        RC.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED,
        RC.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED,
        1,
    ]
    client.send(
        mb.gen_subscribe(9, "caps/x", 1, proto_ver=5, properties={"subscription_identifier": 3})
    )
    client.expect_closed(reason_code=RC.SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED, require_reason=True)
