"""The server's Receive Maximum over the client's PUBLISH packets (MQTT 5.0 3.3.4).

"If it receives more than Receive Maximum QoS 1 and QoS 2 PUBLISH packets where it has
not sent a PUBACK or PUBCOMP in response, the Server uses a DISCONNECT packet with Reason
Code 0x93": QoS 1 messages not PUBACKed count with QoS 2 ones not PUBCOMPed. The
PUBLISH packets before the one that exceeded it were accepted (and routed): their
acknowledgements go out before the DISCONNECT.
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import Clients, wait_until

RC = mb.ReasonCode
PT = mb.PacketType
LIMIT = "mqtt:\n  receive_maximum: 5\n"


def _subscriber(clients: Clients, topic: str) -> RawClient:
    sub = clients.raw_connect(5, properties={"receive_maximum": 100})
    assert sub.subscribe(topic, 2).reason_codes == [2]
    return sub


def _payloads(sub: RawClient, count: int) -> list[bytes]:
    got = []
    for _ in range(count):
        packet = sub.expect_packet(PT.PUBLISH)
        got.append(packet.payload)
    return got


@pytest.mark.gateway_config(LIMIT)
@pytest.mark.parametrize("qos", [1, 2])
def test_a_publish_beyond_five_qos2_awaiting_pubrel_is_refused_at_either_qos(
    clients: Clients, qos: int
) -> None:
    sub = _subscriber(clients, "rm/x")
    pub = clients.raw_connect(5)
    for mid in range(1, 6):
        pub.send(mb.gen_publish("rm/x", b"x", qos=2, mid=mid, proto_ver=5))
        pub.expect_packet(PT.PUBREC, packet_id=mid)  # no PUBREL: PUBCOMP not sent
    pub.send(mb.gen_publish("rm/x", b"sixth", qos=qos, mid=6, proto_ver=5))
    pub.expect_closed(reason_code=RC.RECEIVE_MAXIMUM_EXCEEDED, require_reason=True)
    assert _payloads(sub, 5) == [b"x"] * 5
    sub.expect_no_packet()  # "sixth" was not routed


@pytest.mark.gateway_config(LIMIT)
@pytest.mark.parametrize("qos", [1, 2])
def test_six_in_one_write_five_acknowledged_then_disconnect(clients: Clients, qos: int) -> None:
    sub = _subscriber(clients, "rm/y")
    pub = clients.raw_connect(5)
    pub.send(
        b"".join(
            mb.gen_publish("rm/y", str(mid).encode(), qos=qos, mid=mid, proto_ver=5)
            for mid in range(1, 7)
        )
    )
    ack = PT.PUBACK if qos == 1 else PT.PUBREC
    for mid in range(1, 6):
        pub.expect_packet(ack, packet_id=mid)
    pub.expect_closed(reason_code=RC.RECEIVE_MAXIMUM_EXCEEDED, require_reason=True)
    assert sorted(_payloads(sub, 5)) == [str(mid).encode() for mid in range(1, 6)]
    sub.expect_no_packet()


@pytest.mark.gateway_config(LIMIT)
def test_qos1_publishes_within_the_limit_go_on_after_their_pubacks(clients: Clients) -> None:
    pub = clients.raw_connect(5)
    for round_ in range(4):
        mids = range(round_ * 5 + 1, round_ * 5 + 6)
        pub.send(b"".join(mb.gen_publish("rm/z", b"z", qos=1, mid=m, proto_ver=5) for m in mids))
        for mid in mids:
            pub.expect_packet(PT.PUBACK, packet_id=mid)
    pub.ping()


@pytest.mark.gateway_config(LIMIT)
def test_an_mqtt311_client_is_not_bounded_at_qos1(clients: Clients) -> None:
    # A 3.1.1 client is told no Receive Maximum: its QoS 1 PUBLISH packets are not
    # counted (QoS 2 ones are, as before).
    pub = clients.raw_connect(4)
    pub.send(b"".join(mb.gen_publish("rm/v", b"v", qos=1, mid=m) for m in range(1, 11)))
    for mid in range(1, 11):
        pub.expect_packet(PT.PUBACK, packet_id=mid)
    pub.ping()


@pytest.mark.gateway_config(LIMIT)
def test_qos2_awaiting_pubrel_from_an_earlier_connection_do_not_count(
    clients: Clients, gw: RunningGateway
) -> None:
    """The client's send quota starts afresh on each connection (MQTT 5.0 4.9,
    [MQTT-4.9.0-1]): QoS 2 PUBLISH an earlier connection left awaiting PUBREL do not
    count against the new one's Receive Maximum (before: a first PUBLISH after resuming
    with five of them was ended with 0x93); new ones still do."""
    session = {"session_expiry_interval": 60}
    pub = clients.raw_connect(5, "rm-resume", clean_session=False, properties=session)
    for mid in range(1, 6):
        pub.send(mb.gen_publish("rm/r", b"x", qos=2, mid=mid, proto_ver=5))
        pub.expect_packet(PT.PUBREC, packet_id=mid)
    pub.close()  # no PUBREL: five left awaiting it
    wait_until(lambda: clients.offline("rm-resume"), what="rm-resume offline")
    again = clients.raw_connect(5, "rm-resume", clean_session=False, properties=session)
    assert again.connack is not None and again.connack.session_present
    again.send(mb.gen_publish("rm/r", b"q1", qos=1, mid=20, proto_ver=5))
    assert again.expect_packet(PT.PUBACK, packet_id=20).reason_code in (0, 0x10)  # 0x10: nobody
    for mid in range(21, 26):  # five new QoS 2 fill this connection's quota
        again.send(mb.gen_publish("rm/r", b"y", qos=2, mid=mid, proto_ver=5))
        again.expect_packet(PT.PUBREC, packet_id=mid)
    again.send(mb.gen_pubrel(1, proto_ver=5))  # an earlier one released: frees nothing here
    again.expect_packet(PT.PUBCOMP, packet_id=1)
    again.send(mb.gen_publish("rm/r", b"sixth", qos=1, mid=30, proto_ver=5))
    again.expect_closed(reason_code=RC.RECEIVE_MAXIMUM_EXCEEDED, require_reason=True)
