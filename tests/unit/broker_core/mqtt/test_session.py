"""The sans-I/O session: bytes in, events and bytes out, no sockets, no clock."""

from __future__ import annotations

import pytest

from broker_core.context import Context
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.events import (
    ConnectionClosing,
    ConnectRequested,
    DisconnectReceived,
    PublishReceived,
    SubscribeRequested,
)
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import Connack
from broker_core.mqtt.properties import Properties
from broker_core.mqtt.session import ConnState, Session
from broker_core.mqtt.session_state import Counters, SessionState
from tests.helpers import mqtt_builder as mb

T0 = 1_000_000.0


def connected(
    level: int = 4,
    limits: ServerLimits | None = None,
    present: bool = False,
    state: SessionState | None = None,
    **connect_kw: object,
) -> Session:
    limits = limits or ServerLimits()
    session = Session(limits, T0, "peer")
    session.receive_data(mb.gen_connect("c", proto_ver=level, **connect_kw), T0)  # type: ignore[arg-type]
    [event] = session.events()
    assert isinstance(event, ConnectRequested)
    session.accept(state or SessionState("c", limits, Counters()), present, T0)
    session.data_to_send()
    return session


def parse_all(data: bytes, level: int) -> list[mb.Packet]:
    out = []
    while data:
        split = mb.split_packet(data)
        assert split is not None
        frame, data = split
        out.append(mb.parse_packet(frame, level))
    return out


def test_the_first_packet_must_be_connect() -> None:
    session = Session(ServerLimits(), T0)
    session.receive_data(mb.gen_publish("a", b"x"), T0)
    assert session.closed
    assert session.data_to_send() == b""  # [MQTT-3.1.0-1]: no CONNACK


@pytest.mark.parametrize("level", [3, 4, 5])
def test_accept_sends_connack(level: int) -> None:
    session = Session(ServerLimits(), T0)
    session.receive_data(mb.gen_connect("c", proto_ver=level), T0)
    assert session.conn_state is ConnState.CONNECTING
    session.accept(SessionState("c", ServerLimits(), Counters()), True, T0)
    [connack] = parse_all(session.data_to_send(), level)
    assert connack.type == mb.PacketType.CONNACK
    assert connack.session_present is (level != 3)  # 3.1: no flag, the byte is reserved
    assert connack.reason_code == 0


def test_v5_connack_advertises_limits() -> None:
    limits = ServerLimits(receive_maximum=10, max_qos=1, retain_available=False, max_topic_alias=5)
    session = Session(limits, T0)
    session.receive_data(mb.gen_connect("", proto_ver=5), T0)
    session.accept(SessionState("auto", limits, Counters()), False, T0, assigned_client_id="auto")
    [connack] = parse_all(session.data_to_send(), 5)
    assert connack.properties["receive_maximum"] == 10
    assert connack.properties["maximum_qos"] == 1
    assert connack.properties["retain_available"] == 0
    assert connack.properties["topic_alias_maximum"] == 5
    assert connack.properties["assigned_client_identifier"] == "auto"


def test_packets_pipelined_after_connect_wait_for_accept() -> None:
    session = Session(ServerLimits(), T0)
    session.receive_data(mb.gen_connect("c") + mb.gen_subscribe(1, "a/#") + mb.gen_pingreq(), T0)
    assert [type(e) for e in session.events()] == [ConnectRequested]
    session.accept(SessionState("c", ServerLimits(), Counters()), False, T0)
    assert session.events() == ()  # held until the broker is done accepting
    session.handle_held(T0)
    assert [type(e) for e in session.events()] == [SubscribeRequested]
    packets = parse_all(session.data_to_send(), 4)
    assert [p.type for p in packets] == [mb.PacketType.CONNACK, mb.PacketType.PINGRESP]


def test_reject_sends_the_reason_and_closes() -> None:
    session = Session(ServerLimits(), T0)
    session.receive_data(mb.gen_connect("c", proto_ver=4), T0)
    session.reject(0x86)
    assert session.data_to_send() == mb.gen_connack(False, 4)  # 0x86 -> 3.1.1 code 4
    assert session.closed


def test_unsupported_protocol_level_gets_connack_0x01() -> None:
    session = Session(ServerLimits(), T0)
    session.receive_data(mb.gen_connect("c", proto_ver=7), T0)
    assert session.data_to_send() == b"\x20\x02\x00\x01"  # [MQTT-3.1.2-2]
    assert session.closed


def test_malformed_v5_connect_gets_connack_with_reason() -> None:
    session = Session(ServerLimits(), T0)
    session.receive_data(mb.gen_connect("c", proto_ver=5, reserved_flag=True), T0)
    [connack] = parse_all(session.data_to_send(), 5)
    assert connack.reason_code == 0x81
    assert session.closed


@pytest.mark.parametrize(
    ("level", "expected"), [(4, b""), (5, mb.gen_disconnect(0x82, proto_ver=5))]
)
def test_second_connect_is_a_protocol_error(level: int, expected: bytes) -> None:
    session = connected(level)
    session.receive_data(mb.gen_connect("c", proto_ver=level), T0)
    assert session.data_to_send() == expected
    assert session.closed
    [event] = session.events()
    assert isinstance(event, ConnectionClosing)
    assert event.reason_code == 0x82


def test_qos1_publish_is_acknowledged_after_routing() -> None:
    session = connected()
    session.receive_data(mb.gen_publish("a/b", b"x", qos=1, mid=5), T0)
    [event] = session.events()
    assert isinstance(event, PublishReceived)
    assert (event.topic, event.payload, event.qos) == ("a/b", b"x", 1)
    assert session.data_to_send() == b""
    session.acknowledge(5, 1)
    assert session.data_to_send() == mb.gen_puback(5)


def test_v5_ack_carries_the_reason_code() -> None:
    session = connected(5)
    session.receive_data(mb.gen_publish("a", b"x", qos=1, mid=5, proto_ver=5), T0)
    session.events()
    session.acknowledge(5, 1, 0x10)
    assert session.data_to_send() == mb.gen_puback(5, 0x10, proto_ver=5)


def test_qos2_duplicate_is_delivered_once() -> None:
    session = connected()
    first = mb.gen_publish("a", b"x", qos=2, mid=9)
    dup = mb.gen_publish("a", b"x", qos=2, mid=9, dup=True)
    session.receive_data(first, T0)
    assert len(session.events()) == 1
    session.acknowledge(9, 2)
    session.receive_data(dup, T0)
    assert not session.events()  # not delivered twice
    assert session.data_to_send() == mb.gen_pubrec(9) + mb.gen_pubrec(9)
    session.receive_data(mb.gen_pubrel(9), T0)
    assert session.data_to_send() == mb.gen_pubcomp(9)
    session.receive_data(first, T0)  # after PUBCOMP the id is free: a new message
    assert len(session.events()) == 1


def test_receive_maximum_exceeded() -> None:
    session = connected(5, ServerLimits(receive_maximum=2))
    for mid in (1, 2, 3):
        session.receive_data(mb.gen_publish("a", b"x", qos=2, mid=mid, proto_ver=5), T0)
    assert session.closed
    assert session.data_to_send().endswith(mb.gen_disconnect(0x93, proto_ver=5)) is True


@pytest.mark.parametrize("level", [3, 4])
def test_mqtt311_qos2_over_receive_maximum_waits_for_a_pubrel(level: int) -> None:
    # 3.1.1 has no Receive Maximum: the third QoS 2 PUBLISH and what follows it wait,
    # in order, while PINGREQ and PUBREL are answered; a PUBREL lets them through.
    session = connected(level, ServerLimits(receive_maximum=2))
    data = b"".join(mb.gen_publish("a", b"%d" % m, qos=2, mid=m) for m in (1, 2, 3))
    session.receive_data(data + mb.gen_publish("a", b"q0") + mb.gen_pingreq(), T0)
    assert [e.packet.payload for e in session.events()] == [b"1", b"2"]  # type: ignore[attr-defined]
    assert session.data_to_send() == mb.gen_pingresp()
    assert not session.closed
    session.receive_data(mb.gen_pubrel(1), T0)
    assert session.data_to_send() == mb.gen_pubcomp(1)
    assert [e.packet.payload for e in session.events()] == [b"3", b"q0"]  # type: ignore[attr-defined]
    session.receive_data(mb.gen_publish("a", b"4", qos=2, mid=4), T0)  # 2 and 3 await PUBREL
    assert session.events() == ()
    session.receive_data(mb.gen_disconnect(), T0)
    assert session.closed
    assert [type(e) for e in session.events()] == [DisconnectReceived]  # 4 dropped


def test_topic_alias_set_then_used() -> None:
    session = connected(5)
    session.receive_data(
        mb.gen_publish("long/topic", b"1", proto_ver=5, properties=[("topic_alias", 3)]), T0
    )
    session.receive_data(mb.gen_publish("", b"2", proto_ver=5, properties=[("topic_alias", 3)]), T0)
    events = session.events()
    assert [e.topic for e in events] == ["long/topic", "long/topic"]  # type: ignore[union-attr]
    assert all(e.properties.topic_alias is None for e in events)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("publish", "code"),
    [
        (mb.gen_publish("", b"2", proto_ver=5, properties=[("topic_alias", 4)]), 0x82),
        (mb.gen_publish("t", b"2", proto_ver=5, properties=[("topic_alias", 11)]), 0x94),
        (mb.gen_publish("", b"2", proto_ver=5), 0x82),
        (mb.gen_publish("t", b"2", proto_ver=5, properties=[("subscription_identifier", 1)]), 0x82),
    ],
    ids=["unknown-alias", "alias-over-maximum", "empty-topic", "subscription-id-from-client"],
)
def test_publish_errors_disconnect_with_reason(publish: bytes, code: int) -> None:
    session = connected(5, ServerLimits(max_topic_alias=10))
    session.receive_data(publish, T0)
    assert session.closed
    assert session.data_to_send() == mb.gen_disconnect(code, proto_ver=5)


def test_keep_alive_expires_at_one_and_a_half_times() -> None:
    session = connected(5, keepalive=10)
    assert session.next_deadline() == T0 + 15
    session.receive_data(mb.gen_pingreq(), T0 + 5)
    assert session.data_to_send() == mb.gen_pingresp()
    assert session.next_deadline() == T0 + 20
    session.handle_timeout(T0 + 19.9)
    assert not session.closed
    session.handle_timeout(T0 + 20)
    assert session.closed
    assert session.data_to_send() == mb.gen_disconnect(0x8D, proto_ver=5)


def test_connect_timeout() -> None:
    session = Session(ServerLimits(connect_timeout_s=3), T0)
    session.handle_timeout(T0 + 3)
    assert session.closed


def test_a_connect_sent_byte_by_byte_does_not_push_the_connect_deadline_back() -> None:
    session = Session(ServerLimits(connect_timeout_s=3), T0)
    connect = mb.gen_connect("slow", proto_ver=4)
    for i in range(3):
        session.receive_data(connect[i : i + 1], T0 + 1 + i * 0.5)
    assert session.next_deadline() == T0 + 3
    session.handle_timeout(T0 + 3)
    assert session.closed


def deliver(
    session: Session,
    topic: str,
    qos: int,
    payload: bytes = b"m",
    props: Properties | None = None,
    now: float = T0,
) -> None:
    context = Context(
        topic, payload, qos, properties=props or Properties(), received_at=int(T0 * 1e9)
    )
    assert session.state is not None
    session.state.deliver(context, qos, False, (), {}, now)


def test_outgoing_window_then_queue_then_drain_on_ack() -> None:
    session = connected(5, ServerLimits(max_inflight=2))
    for i in range(3):
        deliver(session, f"t/{i}", 1)
    sent = parse_all(session.data_to_send(), 5)
    assert [(p.topic, p.packet_id) for p in sent] == [("t/0", 1), ("t/1", 2)]
    session.receive_data(mb.gen_puback(1, proto_ver=5), T0)
    [third] = parse_all(session.data_to_send(), 5)
    assert (third.topic, third.packet_id) == ("t/2", 3)


def test_client_receive_maximum_caps_the_window() -> None:
    session = connected(5, properties=[("receive_maximum", 1)])
    deliver(session, "a", 1)
    deliver(session, "b", 1)
    assert [p.topic for p in parse_all(session.data_to_send(), 5)] == ["a"]


def test_outgoing_qos2_flow() -> None:
    session = connected()
    deliver(session, "a", 2)
    [publish] = parse_all(session.data_to_send(), 4)
    assert publish.qos == 2
    session.receive_data(mb.gen_pubrec(publish.packet_id), T0)
    assert session.data_to_send() == mb.gen_pubrel(publish.packet_id)
    session.receive_data(mb.gen_pubcomp(publish.packet_id), T0)
    assert session.state is not None and session.state.outgoing == {}


def test_inflight_messages_are_resent_with_dup_on_session_resume() -> None:
    limits = ServerLimits()
    state = SessionState("c", limits, Counters())
    first = connected(4, limits, state=state)
    deliver(first, "a", 1)
    deliver(first, "b", 2)
    sent = parse_all(first.data_to_send(), 4)
    first.receive_data(mb.gen_pubrec(sent[1].packet_id), T0)
    first.connection_lost()
    state.connection = None
    second = Session(limits, T0)
    second.receive_data(mb.gen_connect("c", clean_session=False), T0)
    second.events()
    second.accept(state, True, T0)
    packets = parse_all(second.data_to_send(), 4)
    assert [(p.type, p.packet_id) for p in packets] == [
        (mb.PacketType.CONNACK, None),
        (mb.PacketType.PUBLISH, sent[0].packet_id),
        (mb.PacketType.PUBREL, sent[1].packet_id),
    ]
    assert packets[1].dup is True  # [MQTT-4.4.0-1]


def test_expired_messages_are_not_delivered_and_the_rest_is_forwarded() -> None:
    session = connected(5, ServerLimits(max_inflight=1))
    deliver(session, "first", 1)
    deliver(session, "short", 1, props=Properties(message_expiry_interval=5))
    deliver(session, "long", 1, props=Properties(message_expiry_interval=60))
    session.data_to_send()
    session.receive_data(mb.gen_puback(1, proto_ver=5), T0 + 10)  # "short" expired meanwhile
    [long] = parse_all(session.data_to_send(), 5)
    assert long.topic == "long"
    assert long.properties["message_expiry_interval"] == 50
    assert session.counters.dropped_expired == 1


def test_messages_over_the_clients_maximum_packet_size_are_dropped() -> None:
    session = connected(5, properties=[("maximum_packet_size", 50)])
    deliver(session, "big", 1, payload=b"x" * 100)
    deliver(session, "small", 1)
    assert [p.topic for p in parse_all(session.data_to_send(), 5)] == ["small"]
    assert session.counters.dropped_too_large == 1


def test_paused_writes_queue_then_drain() -> None:
    session = connected()
    session.set_writable(False, T0)
    deliver(session, "a", 0)
    deliver(session, "b", 1)
    assert session.data_to_send() == b""
    session.set_writable(True, T0)
    assert [p.topic for p in parse_all(session.data_to_send(), 4)] == ["a", "b"]


@pytest.mark.parametrize(("reason", "will_kept"), [(0x00, False), (0x04, True)])
def test_disconnect_and_the_will(reason: int, will_kept: bool) -> None:
    session = connected(5, will_topic="w", will_payload=b"gone")
    session.receive_data(mb.gen_disconnect(reason, proto_ver=5), T0)
    [event] = session.events()
    assert isinstance(event, DisconnectReceived)
    assert event.publish_will is will_kept
    assert (session.will is not None) is will_kept
    assert session.closed


def test_session_expiry_on_disconnect_after_zero_is_a_protocol_error() -> None:
    session = connected(5)
    session.receive_data(
        mb.gen_disconnect(0, proto_ver=5, properties=[("session_expiry_interval", 60)]), T0
    )
    assert session.data_to_send() == mb.gen_disconnect(0x82, proto_ver=5)  # [MQTT-3.14.2-2]


def test_server_disconnect_v5_carries_reason() -> None:
    session = connected(5)
    session.disconnect(0x8E)
    assert session.data_to_send() == mb.gen_disconnect(0x8E, proto_ver=5)
    assert session.closed


@pytest.mark.parametrize(("maximum", "kept"), [(1000, True), (40, False)])
def test_server_disconnect_leaves_out_a_reason_string_too_large_for_the_client(
    maximum: int, kept: bool
) -> None:
    """The Reason String must not make the DISCONNECT larger than the client's Maximum
    Packet Size (MQTT 5.0 3.14.2.2.2): without it when it would."""
    session = connected(5, properties=[("maximum_packet_size", maximum)])
    reason = "store write failed: " + "x" * 40
    session.disconnect(0x80, reason)
    sent = session.data_to_send()
    assert len(sent) <= maximum
    [packet] = parse_all(sent, 5)
    assert packet.reason_code == 0x80
    assert packet.properties.get("reason_string") == (reason if kept else None)


def test_pubrel_for_unknown_id() -> None:
    session = connected(5)
    session.receive_data(mb.gen_pubrel(77, proto_ver=5), T0)
    assert session.data_to_send() == mb.gen_pubcomp(77, 0x92, proto_ver=5)


@pytest.mark.parametrize("level", [3, 4, 5])
@pytest.mark.parametrize("present", [False, True])
def test_the_connack_of_an_accepted_connect_is_the_encoders(level: int, present: bool) -> None:
    # Before MQTT 5 it is written prebuilt; it must stay the bytes the encoder makes.
    limits = ServerLimits()
    session = Session(limits, T0, "peer")
    session.receive_data(mb.gen_connect("c", proto_ver=level, clean_session=not present), T0)
    session.events()
    session.accept(SessionState("c", limits, Counters()), present, T0)
    connack = session.data_to_send()
    assert connack[0] == 0x20 and connack[2] == int(present and level != 3) and connack[3] == 0
    if level < 5:
        assert connack == encode(Connack(present, 0), level)
    assert session.clean_start is not present
    assert session.connect is None  # not kept once accepted (no authentication method)
