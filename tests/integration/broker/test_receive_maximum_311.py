"""An MQTT 3.1.1 or 3.1 client's QoS 2 messages awaiting PUBREL beyond
``mqtt.receive_maximum``: flow control, not a disconnect.

MQTT 3.1.1 has no Receive Maximum (the client is never told one), so exceeding it is no
protocol error. The broker holds the QoS 2 PUBLISH that would exceed it, and every
packet after it, unanswered and in order, until a PUBREL makes room: the client's own
in-flight window then slows it down, as TCP would. PUBREL, PINGREQ and the
acknowledgements of messages sent to the client are still handled (the PUBREL that
makes room is behind the held packets); a DISCONNECT ends the connection at once and
the held packets, never acknowledged, are dropped. At most 1,000 packets, and PUBLISH
topics and payloads of twice ``mqtt.max_packet_size``, wait: past that the connection
closes (limit ``receive_maximum_waiting``). Each QoS 2 PUBLISH held is counted in limit
``receive_maximum``.

Before: the sixth QoS 2 PUBLISH closed the connection (probe s19 misc.py: 40 pipelined,
32 PUBREC then FIN). mosquitto 2.0.11 sends PUBREC for all 40 and keeps the connection,
but delivers only the first 20 (max_inflight_messages) after their PUBRELs: the others
are acknowledged and lost (checked with raw sockets against ``mosquitto -p``).
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import Clients, wait_until

PT = mb.PacketType
LIMIT = "mqtt:\n  receive_maximum: 5\n"
PROTOS = pytest.mark.parametrize("proto", [3, 4], ids=["v31", "v311"])


def hits(gw: RunningGateway, limit: str) -> int:
    return gw.call(lambda: gw.broker.counters.limit_hits.get(limit, 0))


def subscriber(clients: Clients, topic_filter: str) -> RawClient:
    sub = clients.raw_connect(5, properties={"receive_maximum": 1000})
    assert sub.subscribe(topic_filter, 2).reason_codes == [2]
    return sub


def payloads(sub: RawClient, count: int) -> list[bytes]:
    return [sub.recv_publish().payload for _ in range(count)]


def no_answer(client: RawClient) -> None:
    """Nothing but the PINGRESP answers a PINGREQ: the client is connected, and what it
    sent before the PINGREQ is held."""
    client.send(mb.gen_pingreq())
    assert [p.type for p in client.collect()] == [PT.PINGRESP]


@pytest.mark.gateway_config(LIMIT)
@PROTOS
def test_qos2_beyond_receive_maximum_waits_for_pubrel(
    gw: RunningGateway, clients: Clients, proto: int
) -> None:
    sub = subscriber(clients, "w/#")
    pub = clients.raw_connect(proto, "w-pub")
    pub.send(b"".join(mb.gen_publish("w/t", b"%d" % m, qos=2, mid=m, proto_ver=proto)
                      for m in range(1, 9)))  # fmt: skip
    for mid in range(1, 6):
        pub.expect_packet(PT.PUBREC, packet_id=mid)
    no_answer(pub)  # was: the connection closed
    assert payloads(sub, 5) == [b"%d" % m for m in range(1, 6)]
    sub.expect_no_packet()
    for mid in range(1, 4):  # each PUBREL makes room for one held PUBLISH
        pub.send(mb.gen_pubrel(mid, proto_ver=proto))
        pub.expect_packet(PT.PUBCOMP, packet_id=mid)
        pub.expect_packet(PT.PUBREC, packet_id=mid + 5)
    for mid in range(4, 9):
        pub.send(mb.gen_pubrel(mid, proto_ver=proto))
        pub.expect_packet(PT.PUBCOMP, packet_id=mid)
    assert payloads(sub, 3) == [b"6", b"7", b"8"]
    pub.ping()
    assert hits(gw, "receive_maximum") >= 1


@pytest.mark.gateway_config(LIMIT)
@PROTOS
def test_what_follows_a_held_qos2_publish_waits_behind_it_in_order(
    gw: RunningGateway, clients: Clients, proto: int
) -> None:
    sub = subscriber(clients, "o/#")
    pub = clients.raw_connect(proto, "o-pub")
    pub.send(
        b"".join(
            mb.gen_publish("o/t", b"%d" % m, qos=2, mid=m, proto_ver=proto) for m in range(1, 7)
        )
        + mb.gen_publish("o/t", b"q1", qos=1, mid=20, proto_ver=proto)
        + mb.gen_publish("o/t", b"q0", proto_ver=proto)
        + mb.gen_subscribe(21, "o/sub", 1, proto_ver=proto)
    )
    for mid in range(1, 6):
        pub.expect_packet(PT.PUBREC, packet_id=mid)
    no_answer(pub)  # no PUBACK 20 and no SUBACK 21 before PUBREC 6
    pub.send(mb.gen_pubrel(1, proto_ver=proto))
    pub.expect_packet(PT.PUBCOMP, packet_id=1)
    pub.expect_packet(PT.PUBREC, packet_id=6)
    pub.expect_packet(PT.PUBACK, packet_id=20)
    assert pub.expect_packet(PT.SUBACK, packet_id=21).reason_codes == [1]
    for mid in range(2, 7):
        pub.send(mb.gen_pubrel(mid, proto_ver=proto))
        pub.expect_packet(PT.PUBCOMP, packet_id=mid)
    assert payloads(sub, 8) == [b"1", b"2", b"3", b"4", b"5", b"6", b"q1", b"q0"]


@pytest.mark.gateway_config(LIMIT)
def test_a_disconnect_while_packets_wait_ends_the_connection_without_its_will(
    gw: RunningGateway, clients: Clients
) -> None:
    sub = subscriber(clients, "d/#")
    pub = clients.raw(4)
    pub.do_connect("d-pub", proto_ver=4, will_topic="d/will", will_payload=b"gone")
    pub.send(b"".join(mb.gen_publish("d/t", b"%d" % m, qos=2, mid=m) for m in range(1, 7)))
    for mid in range(1, 6):
        pub.expect_packet(PT.PUBREC, packet_id=mid)
    no_answer(pub)
    pub.send(mb.gen_publish("d/t", b"q0") + mb.gen_disconnect())  # held, then DISCONNECT
    pub.expect_closed(packet_type=None)
    assert payloads(sub, 5) == [b"%d" % m for m in range(1, 6)]
    sub.expect_no_packet()  # neither the held sixth, nor the QoS 0 one, nor the will


@pytest.mark.gateway_config(LIMIT)
def test_more_than_1000_packets_waiting_close_the_connection(
    gw: RunningGateway, clients: Clients
) -> None:
    pub = clients.raw_connect(4, "flood-pub")
    pub.send(
        b"".join(mb.gen_publish("f/t", b"x", qos=2, mid=m) for m in range(1, 7))
        + b"".join(mb.gen_publish("f/t", b"0") for _ in range(999))
    )
    for mid in range(1, 6):
        pub.expect_packet(PT.PUBREC, packet_id=mid)
    no_answer(pub)  # 1,000 held: the sixth and 999 QoS 0 ones
    pub.send(mb.gen_publish("f/t", b"0"))
    pub.expect_closed(packet_type=None)
    wait_until(lambda: hits(gw, "receive_maximum_waiting") == 1, what="limit counted")


@pytest.mark.gateway_config(LIMIT)
def test_an_mqtt5_client_is_still_disconnected(gw: RunningGateway, clients: Clients) -> None:
    # MQTT 5.0 3.3.4: the client was told the Receive Maximum; 0x93 (unchanged).
    pub = clients.raw_connect(5, "v5-pub")
    pub.send(b"".join(mb.gen_publish("v/t", b"x", qos=2, mid=m, proto_ver=5) for m in range(1, 7)))
    for mid in range(1, 6):
        pub.expect_packet(PT.PUBREC, packet_id=mid)
    pub.expect_closed(reason_code=mb.ReasonCode.RECEIVE_MAXIMUM_EXCEEDED, require_reason=True)
