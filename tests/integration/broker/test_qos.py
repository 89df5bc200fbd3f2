"""QoS 0/1/2 in both directions, packet identifiers, the inflight window (Receive
Maximum / ``mqtt.max_inflight``), QoS 2 exactly-once on receive, ordering."""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import BOTH, Clients, connect_props, short_wait, wait_until

QOS = [0, 1, 2]


@BOTH
@pytest.mark.parametrize("sub_qos", QOS, ids=lambda q: f"sub{q}")
@pytest.mark.parametrize("pub_qos", QOS, ids=lambda q: f"pub{q}")
def test_delivered_at_the_lower_of_publish_and_subscription_qos(
    clients: Clients, proto: int, pub_qos: int, sub_qos: int
) -> None:
    # [MQTT-3.8.4-8] (5.0) / [MQTT-3.8.4-6] (3.1.1): delivered at min(published, granted).
    sub = clients.subscriber(proto, "q/t", sub_qos)
    pub = clients.connect(proto)
    pub.publish("q/t", b"hello", pub_qos)
    message = sub.expect_message()
    assert (message.topic, message.payload, message.qos) == ("q/t", b"hello", min(pub_qos, sub_qos))
    # No second copy: the next message is the one published after it (ordered topic).
    pub.publish("q/t", b"next", pub_qos)
    assert sub.expect_message().payload == b"next"


@pytest.mark.parametrize(
    ("pub_proto", "sub_proto"), [(4, 5), (5, 4)], ids=["v311-to-v5", "v5-to-v311"]
)
def test_qos2_across_protocol_versions(clients: Clients, pub_proto: int, sub_proto: int) -> None:
    sub = clients.subscriber(sub_proto, "x/#", 2)
    pub = clients.connect(pub_proto)
    pub.publish("x/y", b"across", 2)
    message = sub.expect_message()
    assert (message.topic, message.payload, message.qos) == ("x/y", b"across", 2)


@BOTH
@pytest.mark.parametrize("qos", [1, 2])
def test_packet_ids_of_messages_in_flight_are_non_zero_and_distinct(
    clients: Clients, proto: int, qos: int
) -> None:
    # [MQTT-2.2.1-3]: a fresh non-zero packet id per QoS > 0 PUBLISH, unique while in flight.
    sub = clients.raw_connect(proto)
    sub.subscribe("ids/t", qos)
    pub = clients.connect(proto)
    for i in range(5):
        pub.publish("ids/t", f"m{i}", qos)
    packets = [sub.recv_publish(ack=False) for _ in range(5)]
    assert [p.payload for p in packets] == [f"m{i}".encode() for i in range(5)]
    assert [p.qos for p in packets] == [qos] * 5
    ids = [p.packet_id for p in packets]
    assert 0 not in ids
    assert len(set(ids)) == 5
    for packet in packets:
        sub.ack_publish(packet)
    sub.ping()  # every flow completed: nothing else pending


@BOTH
def test_qos2_flow_client_to_broker(clients: Clients, gw: RunningGateway, proto: int) -> None:
    sub = clients.subscriber(proto, "q2/in", 2)
    pub = clients.raw_connect(proto, "q2pub")
    pub.send(mb.gen_publish("q2/in", b"once", qos=2, mid=77, proto_ver=proto))
    pubrec = pub.expect_packet(mb.PacketType.PUBREC, packet_id=77)
    assert pubrec.reason_code in (None, 0)

    def unreleased() -> set[int]:
        state = gw.broker.sessions.get("q2pub")
        assert state is not None
        return set(state.incoming_qos2 or ())

    # Until PUBREL the broker keeps the packet id as "received, not released".
    assert gw.call(unreleased) == {77}
    pub.send(mb.gen_pubrel(77, proto_ver=proto))
    pub.expect_packet(mb.PacketType.PUBCOMP, packet_id=77)
    assert gw.call(unreleased) == set()
    message = sub.expect_message()
    assert (message.payload, message.qos) == (b"once", 2)


@BOTH
def test_qos2_flow_broker_to_client(clients: Clients, gw: RunningGateway, proto: int) -> None:
    sub = clients.raw_connect(proto, "q2sub")
    sub.subscribe("q2/out", 2)
    pub = clients.connect(proto)
    pub.publish("q2/out", b"exactly", 2)
    publish = sub.recv_publish(ack=False)
    assert (publish.qos, publish.dup, publish.payload) == (2, False, b"exactly")
    mid = publish.packet_id
    assert mid
    sub.send(mb.gen_pubrec(mid, proto_ver=proto))
    sub.expect_packet(mb.PacketType.PUBREL, packet_id=mid)

    def in_flight() -> int:
        state = gw.broker.sessions.get("q2sub")
        assert state is not None
        return len(state.outgoing)

    # Released but not completed: still in flight until PUBCOMP (4.3.3).
    assert gw.call(in_flight) == 1
    sub.send(mb.gen_pubcomp(mid, proto_ver=proto))
    wait_until(lambda: gw.call(in_flight) == 0, what="in-flight message completed")
    sub.expect_no_packet()


def test_receive_maximum_bounds_unacknowledged_messages_from_the_broker(clients: Clients) -> None:
    # [MQTT-3.3.4-9]: the Server MUST NOT send more than Receive Maximum QoS 1/2 PUBLISH
    # packets for which it has not received PUBACK / PUBCOMP.
    sub = clients.connect(5, properties=connect_props(ReceiveMaximum=3), manual_ack=True)
    assert sub.subscribe("rm/t", 1) == [1]
    pub = clients.connect(5)
    for i in range(10):
        pub.publish("rm/t", f"{i}", 1)
    first = sub.expect_messages(3)
    assert [m.payload for m in first] == [b"0", b"1", b"2"]
    sub.expect_no_message()
    sub.ack(first[0])
    fourth = sub.expect_message()
    assert fourth.payload == b"3"
    sub.expect_no_message()
    received = [*first, fourth]
    for message in received[1:]:
        sub.ack(message)
    # Acknowledge as they come: the remaining six arrive, in order.
    while len(received) < 10:
        message = sub.expect_message()
        received.append(message)
        sub.ack(message)
    assert [m.payload for m in received] == [f"{i}".encode() for i in range(10)]
    sub.expect_no_message()


@pytest.mark.gateway_config("mqtt:\n  max_inflight: 3\n")
@BOTH
def test_max_inflight_bounds_unacknowledged_messages(clients: Clients, proto: int) -> None:
    sub = clients.connect(proto, manual_ack=True)
    assert sub.subscribe("mi/t", 1) == [1]
    pub = clients.connect(proto)
    for i in range(6):
        pub.publish("mi/t", f"{i}", 1)
    first = sub.expect_messages(3)
    sub.expect_no_message()
    for message in first:
        sub.ack(message)
    rest = sub.expect_messages(3)
    assert [m.payload for m in first + rest] == [f"{i}".encode() for i in range(6)]
    for message in rest:
        sub.ack(message)


def test_qos2_message_counts_against_receive_maximum_until_pubcomp(clients: Clients) -> None:
    # 4.9: the send quota is incremented on PUBCOMP (or PUBREC with an error), not on PUBREC.
    sub = clients.raw_connect(5, properties={"receive_maximum": 2})
    sub.subscribe("rm2/t", 2)
    pub = clients.connect(5)
    for i in range(3):
        pub.publish("rm2/t", f"{i}", 2)
    first = [sub.recv_publish(ack=False) for _ in range(2)]
    assert [p.payload for p in first] == [b"0", b"1"]
    for packet in first:
        sub.send(mb.gen_pubrec(packet.packet_id or 0, proto_ver=5))
    for packet in first:
        sub.wait_for(
            lambda p, pid=packet.packet_id: p.type == mb.PacketType.PUBREL and p.packet_id == pid,
            what="PUBREL",
        )
    sub.expect_no_packet(short_wait())
    sub.send(mb.gen_pubcomp(first[0].packet_id or 0, proto_ver=5))
    third = sub.recv_publish()
    assert third.payload == b"2"
    sub.send(mb.gen_pubcomp(first[1].packet_id or 0, proto_ver=5))
    sub.expect_no_packet()


@BOTH
def test_qos2_duplicate_publish_before_pubrel_is_delivered_once(
    clients: Clients, proto: int
) -> None:
    # 4.3.3 (5.0) / 4.3.3 (3.1.1), method B: until PUBREL the receiver MUST NOT cause the
    # message to be onward delivered more than once [MQTT-4.3.3-10] (3.1.1: MQTT-4.3.3-2).
    sub = clients.subscriber(proto, "dup/t", 2)
    pub = clients.raw_connect(proto)
    frame = mb.gen_publish("dup/t", b"one", qos=2, mid=9, proto_ver=proto)
    again = mb.gen_publish("dup/t", b"one", qos=2, mid=9, dup=True, proto_ver=proto)
    pub.send(frame)
    pub.expect_packet(mb.PacketType.PUBREC, packet_id=9)
    pub.send(again)
    pub.expect_packet(mb.PacketType.PUBREC, packet_id=9)
    pub.send(again)
    pub.expect_packet(mb.PacketType.PUBREC, packet_id=9)
    pub.send(mb.gen_pubrel(9, proto_ver=proto))
    pub.expect_packet(mb.PacketType.PUBCOMP, packet_id=9)
    message = sub.expect_message()
    assert (message.payload, message.qos) == (b"one", 2)
    # Exactly once: the next message is the one published after it.
    pub.publish("dup/t", b"two", qos=2)
    assert sub.expect_message().payload == b"two"


@BOTH
def test_qos2_packet_id_reused_after_pubcomp_is_a_new_message(clients: Clients, proto: int) -> None:
    sub = clients.subscriber(proto, "reuse/t", 2)
    pub = clients.raw_connect(proto)
    for payload in (b"first", b"second"):
        pub.publish("reuse/t", payload, qos=2, mid=5)
    assert [m.payload for m in sub.expect_messages(2)] == [b"first", b"second"]


@BOTH
@pytest.mark.parametrize("qos", QOS)
def test_messages_from_one_publisher_arrive_in_order(
    clients: Clients, proto: int, qos: int
) -> None:
    # [MQTT-4.6.0-6]: ordered topic, same QoS: the order of publication is kept.
    sub = clients.subscriber(proto, "order/#", qos)
    pub = clients.connect(proto)
    for i in range(40):
        pub.client.publish(f"order/{i % 3}", f"{i}", qos)
    received = sub.expect_messages(40)
    assert [m.payload for m in received] == [f"{i}".encode() for i in range(40)]


@BOTH
def test_mixed_qos_stream_keeps_order_per_qos(clients: Clients, proto: int) -> None:
    sub = clients.subscriber(proto, "mix/t", 2)
    pub = clients.connect(proto)
    for i in range(30):
        pub.client.publish("mix/t", f"{i}", i % 3)
    received = sub.expect_messages(30)
    for qos in QOS:
        got = [int(m.payload) for m in received if m.qos == qos]
        assert got == [i for i in range(30) if i % 3 == qos]


def test_receive_maximum_holds_when_in_flight_messages_are_resent(clients: Clients) -> None:
    # [MQTT-3.3.4-9] holds on a resumed session too: unacknowledged messages resent at
    # reconnection [MQTT-4.4.0-1] count against the Receive Maximum of the new connection.
    first = clients.raw_connect(
        5,
        "rm-resume",
        clean_session=False,
        properties={"session_expiry_interval": 60, "receive_maximum": 10},
    )
    first.subscribe("rr/t", 1)
    pub = clients.connect(5)
    for i in range(5):
        pub.publish("rr/t", f"{i}", 1)
    assert len([first.recv_publish(ack=False) for _ in range(5)]) == 5
    first.close()
    again = clients.raw(5)
    connack = again.do_connect(
        "rm-resume",
        proto_ver=5,
        clean_session=False,
        properties={"session_expiry_interval": 60, "receive_maximum": 2},
    )
    assert connack.session_present is True
    burst = again.collect(short_wait())
    publishes = [p for p in burst if p.type == mb.PacketType.PUBLISH]
    assert len(publishes) <= 2
    received = list(publishes)
    for packet in publishes:
        again.ack_publish(packet)
    while len(received) < 5:
        packet = again.recv_publish()
        received.append(packet)
    assert sorted(p.payload for p in received) == [f"{i}".encode() for i in range(5)]


@BOTH
def test_qos2_exactly_once_across_a_reconnect(clients: Clients, proto: int) -> None:
    # 4.3.3 / [MQTT-4.4.0-1]: the publisher resends the PUBLISH (DUP 1) after reconnecting
    # with its session; the Server, which already has it, MUST NOT deliver it again.
    sub = clients.subscriber(proto, "eo/t", 2)
    props = {"session_expiry_interval": 60} if proto == 5 else None
    pub = clients.raw_connect(proto, "eo-pub", clean_session=False, properties=props)
    pub.send(mb.gen_publish("eo/t", b"exactly once", qos=2, mid=7, proto_ver=proto))
    pub.expect_packet(mb.PacketType.PUBREC, packet_id=7)
    pub.close()  # before PUBREL
    again = clients.raw(proto)
    assert again.do_connect(
        "eo-pub", proto_ver=proto, clean_session=False, properties=props
    ).session_present
    again.send(mb.gen_publish("eo/t", b"exactly once", qos=2, mid=7, dup=True, proto_ver=proto))
    again.expect_packet(mb.PacketType.PUBREC, packet_id=7)
    again.send(mb.gen_pubrel(7, proto_ver=proto))
    again.expect_packet(mb.PacketType.PUBCOMP, packet_id=7)
    again.publish("eo/t", b"next", qos=2)
    assert [m.payload for m in sub.expect_messages(2)] == [b"exactly once", b"next"]


def test_pubrec_with_an_error_code_ends_the_flow_and_frees_the_window(clients: Clients) -> None:
    # 4.3.3: after PUBREC with a Reason Code >= 0x80 the sender MUST NOT send PUBREL for it
    # [MQTT-4.3.3-4]; 4.9: it counts as acknowledged for the Receive Maximum.
    sub = clients.raw_connect(5, properties={"receive_maximum": 1})
    sub.subscribe("pe/t", 2)
    pub = clients.connect(5)
    pub.publish("pe/t", b"refused", 2)
    pub.publish("pe/t", b"accepted", 2)
    first = sub.recv_publish(ack=False)
    assert first.payload == b"refused"
    sub.send(mb.gen_pubrec(first.packet_id or 0, mb.ReasonCode.UNSPECIFIED_ERROR, proto_ver=5))
    second = sub.recv_publish(ack=False)  # no PUBREL in between: wait_for would keep it
    assert second.payload == b"accepted"
    assert [p for p in sub.backlog if p.type == mb.PacketType.PUBREL] == []
    sub.ack_publish(second)
    sub.expect_no_packet()


@BOTH
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_large_payload_arrives_intact(clients: Clients, proto: int, qos: int) -> None:
    payload = bytes(range(256)) * 2000  # 512000 bytes, under the default 1 MB limit
    sub = clients.subscriber(proto, "big/t", qos)
    pub = clients.connect(proto)
    pub.publish("big/t", payload, qos)
    message = sub.expect_message(unit(5))
    assert (len(message.payload), message.payload == payload) == (len(payload), True)


@BOTH
def test_packet_fed_one_byte_at_a_time(clients: Clients, proto: int) -> None:
    sub = clients.subscriber(proto, "slowly/#", 1)
    pub = clients.raw_connect(proto)
    frame = mb.gen_publish("slowly/ü/日本", b"\x00\xff" * 50, qos=1, mid=3, proto_ver=proto)
    for i in range(len(frame)):
        pub.send(frame[i : i + 1])
    pub.expect_packet(mb.PacketType.PUBACK, packet_id=3)
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("slowly/ü/日本", b"\x00\xff" * 50)
