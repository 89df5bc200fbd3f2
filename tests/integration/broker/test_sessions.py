"""Clean session / clean start, session present, session expiry, persistent sessions with
their offline queues (bounded, with a drop policy and a counter), in-flight messages
resent on reconnect."""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import (
    BOTH,
    Clients,
    PahoClient,
    connect_props,
    disconnect_props,
    wait_until,
)


def _persistent(clients: Clients, proto: int, client_id: str, expiry: int = 60) -> PahoClient:
    """A paho client resuming (or starting) a persistent session."""
    client = clients.paho(proto, client_id, clean_session=False)
    props = connect_props(SessionExpiryInterval=expiry) if proto == 5 else None
    client.connect(clean_start=False, properties=props)
    return client


def _session_exists(gw: RunningGateway, client_id: str) -> bool:
    return gw.call(lambda: gw.broker.sessions.get(client_id) is not None)


@BOTH
def test_new_persistent_session_is_not_present(clients: Clients, proto: int) -> None:
    # [MQTT-3.2.2-3] (5.0) / [MQTT-3.2.2-3] (3.1.1): no session: Session Present 0.
    client = _persistent(clients, proto, "fresh")
    assert client.connack is not None
    assert client.connack.session_present is False


@BOTH
def test_persistent_session_keeps_subscriptions_and_queues_messages(
    clients: Clients, gw: RunningGateway, proto: int
) -> None:
    # [MQTT-3.1.2-4..5] (5.0) / [MQTT-3.1.2-4] (3.1.1): the session (subscriptions, QoS 1
    # and 2 messages) outlives the connection; [MQTT-3.2.2-2]: Session Present 1.
    first = _persistent(clients, proto, "p1")
    assert first.subscribe("ps/#", 2) == [2]
    first.disconnect()
    assert _session_exists(gw, "p1") is True
    pub = clients.connect(proto)
    for i in range(6):
        pub.publish(f"ps/{i}", f"{i}", 1 + i % 2)
    again = _persistent(clients, proto, "p1")
    assert again.connack is not None
    assert again.connack.session_present is True
    received = again.expect_messages(6)
    # paho hands a QoS 2 message over at PUBREL, so compare the order per QoS here (the
    # wire order is checked by the raw test below) [MQTT-4.6.0-6].
    for qos in (1, 2):
        assert [(m.topic, m.payload) for m in received if m.qos == qos] == [
            (f"ps/{i}", f"{i}".encode()) for i in range(6) if 1 + i % 2 == qos
        ]
    # Still subscribed without a new SUBSCRIBE.
    pub.publish("ps/live", b"live", 1)
    assert again.expect_message().payload == b"live"


@BOTH
def test_offline_queue_is_delivered_in_publication_order(clients: Clients, proto: int) -> None:
    # 4.6: the queued QoS 1 and 2 messages go out in the order they were published.
    props = {"session_expiry_interval": 60} if proto == 5 else None
    sub = clients.raw_connect(proto, "order", clean_session=False, properties=props)
    sub.subscribe("po/t", 2)
    sub.disconnect()
    pub = clients.connect(proto)
    for i in range(20):
        pub.publish("po/t", f"{i}", 1 + i % 2)
    again = clients.raw(proto)
    connack = again.do_connect("order", proto_ver=proto, clean_session=False, properties=props)
    assert connack.session_present is True
    received = [again.recv_publish() for _ in range(20)]
    assert [(int(p.payload), p.qos) for p in received] == [(i, 1 + i % 2) for i in range(20)]


@BOTH
def test_clean_session_discards_the_stored_session(clients: Clients, proto: int) -> None:
    # [MQTT-3.1.2-4] (5.0 Clean Start 1) / [MQTT-3.1.2-6] (3.1.1 CleanSession 1): the
    # Server MUST discard any existing session; Session Present 0 [MQTT-3.2.2-2].
    first = _persistent(clients, proto, "p2")
    assert first.subscribe("old/t", 1) == [1]
    first.disconnect()
    pub = clients.connect(proto)
    pub.publish("old/t", b"queued for the old session", 1)
    clean = clients.connect(proto, "p2", clean=True)
    assert clean.connack is not None
    assert clean.connack.session_present is False
    assert clean.subscribe("new/t", 1) == [1]
    pub.publish("old/t", b"to a subscription that is gone", 1)
    pub.publish("new/t", b"sentinel", 1)
    assert clean.expect_message().payload == b"sentinel"


def test_v311_clean_session_ends_with_the_connection(clients: Clients, gw: RunningGateway) -> None:
    # [MQTT-3.1.2-6]: the Session lasts as long as the Network Connection.
    client = clients.connect(4, "c311", clean=True)
    assert client.subscribe("c/t", 1) == [1]
    client.disconnect()
    wait_until(lambda: not _session_exists(gw, "c311"), what="session c311 discarded")
    assert _persistent(clients, 4, "c311").connack.session_present is False  # type: ignore[union-attr]


def test_mqtt5_session_without_expiry_ends_with_the_connection(
    clients: Clients, gw: RunningGateway
) -> None:
    # 3.1.2.11.2: absent Session Expiry Interval means 0: the session ends at close.
    client = clients.paho(5, "noexp")
    client.connect(clean_start=False)
    assert client.subscribe("n/t", 1) == [1]
    client.disconnect()
    wait_until(lambda: not _session_exists(gw, "noexp"), what="session noexp discarded")
    again = clients.paho(5, "noexp")
    assert again.connect(clean_start=False).session_present is False


def test_mqtt5_session_is_gone_after_its_expiry_interval(
    clients: Clients, gw: RunningGateway
) -> None:
    # [MQTT-3.1.2-23]: the Server MUST store the session for the Session Expiry Interval
    # after the close, and may discard it then (4.1).
    first = _persistent(clients, 5, "exp1", expiry=1)
    assert first.subscribe("e/t", 1) == [1]
    first.disconnect()
    pub = clients.connect(5)
    pub.publish("e/t", b"queued, then expired with the session", 1)
    assert _session_exists(gw, "exp1") is True
    wait_until(lambda: not _session_exists(gw, "exp1"), unit(4), what="session exp1 expired")
    again = _persistent(clients, 5, "exp1")
    assert again.connack is not None
    assert again.connack.session_present is False
    assert again.subscribe("s/t", 1) == [1]
    pub.publish("e/t", b"no subscription any more", 1)
    pub.publish("s/t", b"sentinel", 1)
    assert again.expect_message().payload == b"sentinel"


def test_mqtt5_session_resumed_within_its_expiry_interval(clients: Clients) -> None:
    first = _persistent(clients, 5, "exp2", expiry=30)
    assert first.subscribe("r/t", 1) == [1]
    first.abort()
    pub = clients.connect(5)
    pub.publish("r/t", b"kept", 1)
    again = _persistent(clients, 5, "exp2", expiry=30)
    assert again.connack is not None
    assert again.connack.session_present is True
    assert again.expect_message().payload == b"kept"


def test_mqtt5_disconnect_can_end_the_session_now(clients: Clients, gw: RunningGateway) -> None:
    # 3.14.2.2.2: the Session Expiry Interval may be changed on DISCONNECT.
    client = _persistent(clients, 5, "exp3", expiry=300)
    client.disconnect(0, disconnect_props(SessionExpiryInterval=0))
    wait_until(lambda: not _session_exists(gw, "exp3"), what="session exp3 discarded")


@pytest.mark.gateway_config("mqtt:\n  max_session_expiry: 5\n")
def test_mqtt5_session_expiry_is_capped_and_the_client_told(clients: Clients) -> None:
    # 3.2.2.3.2: a Server using another Session Expiry Interval than the one requested
    # sends it in CONNACK.
    client = _persistent(clients, 5, "cap", expiry=3600)
    assert client.connack is not None
    assert client.connack.prop("SessionExpiryInterval") == 5


def _bounded(policy: str, expected: list[int]) -> object:
    config = f"mqtt:\n  max_queued_messages: 5\n  queue_overflow: {policy}\n"
    return pytest.param(expected, marks=pytest.mark.gateway_config(config), id=policy)


@pytest.mark.parametrize(
    "expected", [_bounded("drop_oldest", [3, 4, 5, 6, 7]), _bounded("drop_new", [0, 1, 2, 3, 4])]
)
@BOTH
def test_offline_queue_is_bounded_and_counts_what_it_drops(
    clients: Clients, gw: RunningGateway, proto: int, expected: list[int]
) -> None:
    # mqtt.max_queued_messages bounds a session's queue; queue_overflow chooses what goes;
    # counters.dropped_queue_full counts it.
    sub = _persistent(clients, proto, "bounded")
    assert sub.subscribe("b/t", 1) == [1]
    sub.disconnect()
    pub = clients.connect(proto)
    for i in range(8):
        pub.publish("b/t", f"{i}", 1)
    assert gw.call(lambda: gw.broker.counters.dropped_queue_full) == 3
    again = _persistent(clients, proto, "bounded")
    received = again.expect_messages(5)
    assert [int(m.payload) for m in received] == expected
    pub.publish("b/t", b"sentinel", 1)
    assert again.expect_message().payload == b"sentinel"
    assert gw.call(lambda: gw.broker.counters.dropped_queue_full) == 3


@BOTH
def test_unacknowledged_qos1_message_is_resent_with_dup_on_reconnect(
    clients: Clients, proto: int
) -> None:
    # [MQTT-4.4.0-1]: on reconnect with a session, resend unacknowledged PUBLISH packets
    # with their original packet identifiers; [MQTT-3.3.1-1]: DUP 1 on a re-delivery.
    props = {"session_expiry_interval": 60} if proto == 5 else None
    sub = clients.raw_connect(proto, "resend1", clean_session=False, properties=props)
    sub.subscribe("rs/t", 1)
    pub = clients.connect(proto)
    pub.publish("rs/t", b"ack me later", 1)
    first = sub.recv_publish(ack=False)
    assert first.dup is False
    sub.close()
    again = clients.raw(proto)
    connack = again.do_connect("resend1", proto_ver=proto, clean_session=False, properties=props)
    assert connack.session_present is True
    resent = again.recv_publish(ack=False)
    assert (resent.payload, resent.packet_id, resent.qos, resent.dup) == (
        b"ack me later",
        first.packet_id,
        1,
        True,
    )
    again.ack_publish(resent)
    again.expect_no_packet()


@BOTH
def test_pubrel_is_resent_on_reconnect(clients: Clients, proto: int) -> None:
    # [MQTT-4.4.0-1]: ... and unacknowledged PUBREL packets.
    props = {"session_expiry_interval": 60} if proto == 5 else None
    sub = clients.raw_connect(proto, "resend2", clean_session=False, properties=props)
    sub.subscribe("rs2/t", 2)
    pub = clients.connect(proto)
    pub.publish("rs2/t", b"two", 2)
    publish = sub.recv_publish(ack=False)
    mid = publish.packet_id or 0
    sub.send(mb.gen_pubrec(mid, proto_ver=proto))
    sub.expect_packet(mb.PacketType.PUBREL, packet_id=mid)
    sub.close()
    again = clients.raw(proto)
    assert again.do_connect(
        "resend2", proto_ver=proto, clean_session=False, properties=props
    ).session_present
    again.expect_packet(mb.PacketType.PUBREL, packet_id=mid)
    again.send(mb.gen_pubcomp(mid, proto_ver=proto))
    again.expect_no_packet()


def _online_bounded(policy: str, expected: list[int]) -> object:
    config = f"mqtt:\n  max_inflight: 1\n  max_queued_messages: 5\n  queue_overflow: {policy}\n"
    return pytest.param(expected, marks=pytest.mark.gateway_config(config), id=policy)


@pytest.mark.parametrize(
    "expected",
    [
        _online_bounded("drop_oldest", [0, 5, 6, 7, 8, 9]),
        _online_bounded("drop_new", [0, 1, 2, 3, 4, 5]),
    ],
)
@BOTH
def test_queue_behind_a_full_inflight_window_is_bounded(
    clients: Clients, gw: RunningGateway, proto: int, expected: list[int]
) -> None:
    # An online client whose window is full: the rest waits in the same bounded queue.
    sub = clients.raw_connect(proto, "slow")
    sub.subscribe("slow/t", 1)
    pub = clients.connect(proto)
    for i in range(10):
        pub.publish("slow/t", f"{i}", 1)
    first = sub.recv_publish(ack=False)
    sub.expect_no_packet()  # the window (max_inflight 1) is full
    assert gw.call(lambda: gw.broker.counters.dropped_queue_full) == 4
    received = [first]
    sub.ack_publish(first)
    while len(received) < len(expected):
        received.append(sub.recv_publish())
    assert [int(p.payload) for p in received] == expected
    sub.expect_no_packet()


@BOTH
def test_takeover_resends_in_flight_messages_to_the_new_connection(
    clients: Clients, proto: int
) -> None:
    props = {"session_expiry_interval": 60} if proto == 5 else None
    first = clients.raw_connect(proto, "moving", clean_session=False, properties=props)
    first.subscribe("mv/t", 1)
    pub = clients.connect(proto)
    pub.publish("mv/t", b"unacked", 1)
    sent = first.recv_publish(ack=False)
    second = clients.raw(proto)
    connack = second.do_connect("moving", proto_ver=proto, clean_session=False, properties=props)
    assert connack.session_present is True
    resent = second.recv_publish()
    assert (resent.payload, resent.packet_id, resent.dup) == (b"unacked", sent.packet_id, True)
