"""MQTT 5.0 4.8.2: what an ended member of a shared subscription owed goes to another one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


def _member(gw: RunningGateway, client_id: str, proto: int, qos: int) -> RawClient:
    client = RawClient("127.0.0.1", gw.port, protocol_level=proto)
    client.do_connect(client_id, proto_ver=proto)
    client.subscribe("$share/workers/jobs/#", qos)
    return client


def _wait_gone(gw: RunningGateway, client_id: str) -> None:
    """Until the broker has ended ``client_id``'s session."""
    deadline = time.monotonic() + unit(10)
    while gw.call(lambda: gw.broker.sessions.get(client_id)) is not None:
        assert time.monotonic() < deadline, f"session {client_id} did not end"
        time.sleep(0.02)


def _publish(gw: RunningGateway, proto: int, qos: int, count: int) -> None:
    pub = RawClient("127.0.0.1", gw.port, protocol_level=proto)
    pub.do_connect("producer", proto_ver=proto)
    for i in range(count):
        pub.send(mb.gen_publish(f"jobs/{i}", f"job-{i}", qos=qos, mid=i + 1, proto_ver=proto))
        ack = mb.PacketType.PUBACK if qos == 1 else mb.PacketType.PUBREC
        assert pub.expect_packet(ack).packet_id == i + 1
        if qos == 2:
            pub.send(mb.gen_pubrel(i + 1, proto_ver=proto))
            pub.expect_packet(mb.PacketType.PUBCOMP)
    pub.close()


@pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])
def test_unacknowledged_qos1_messages_of_a_lost_member_go_to_the_others(
    tmp_path: Path, proto: int
) -> None:
    with running_gateway(tmp_path) as gw:
        lost = _member(gw, "lost", proto, 1)
        kept = _member(gw, "kept", proto, 1)
        _publish(gw, proto, 1, 6)
        # Round robin: each member got three; "lost" acknowledges none and goes away.
        owed = sorted(lost.expect_packet(mb.PacketType.PUBLISH).payload for _ in range(3))
        lost.abort()
        got = []
        while len(got) < 6:
            packet = kept.expect_packet(mb.PacketType.PUBLISH)
            got.append(packet.payload)
            kept.send(mb.gen_puback(packet.packet_id, proto_ver=proto))
        assert sorted(got) == sorted(f"job-{i}".encode() for i in range(6))
        assert set(owed) <= set(got)
        kept.expect_no_packet(0.3)
        assert gw.call(lambda: gw.broker.counters.shared_redelivered) == 3
        kept.close()


def test_a_qos2_message_already_sent_goes_to_no_one_else(tmp_path: Path) -> None:
    with running_gateway(tmp_path) as gw:
        lost = _member(gw, "lost", 5, 2)
        kept = _member(gw, "kept", 5, 2)
        _publish(gw, 5, 2, 2)
        first = lost.expect_packet(mb.PacketType.PUBLISH)  # never PUBREC'd [MQTT-4.8.2-5]
        lost.abort()
        _wait_gone(gw, "lost")
        other = kept.expect_packet(mb.PacketType.PUBLISH)
        assert {first.payload, other.payload} == {b"job-0", b"job-1"}
        kept.send(mb.gen_pubrec(other.packet_id, proto_ver=5))
        kept.expect_packet(mb.PacketType.PUBREL)
        kept.send(mb.gen_pubcomp(other.packet_id, proto_ver=5))
        kept.expect_no_packet(0.5)
        assert gw.call(lambda: gw.broker.counters.shared_redelivered) == 0
        kept.close()


def test_a_member_with_an_ordinary_subscription_too_keeps_those_messages(
    tmp_path: Path,
) -> None:
    with running_gateway(tmp_path) as gw:
        lost = _member(gw, "lost", 5, 1)
        lost.subscribe("jobs/#", 1)
        kept = _member(gw, "kept", 5, 1)
        _publish(gw, 5, 1, 1)
        lost.expect_packet(mb.PacketType.PUBLISH)
        lost.abort()
        _wait_gone(gw, "lost")
        # "kept" got the message through the group or "lost" got it twice; either way,
        # nothing of "lost" is handed on: which of its copies came through the group is
        # not known.
        assert gw.call(lambda: gw.broker.counters.shared_redelivered) == 0
        kept.close()


@pytest.mark.parametrize("qos", [1, 2])
def test_when_a_persistent_members_session_expires_later(tmp_path: Path, qos: int) -> None:
    # The member's session outlives its connection (expiry 1 s): what it owed goes on
    # when the session ends. QoS 1: everything unacknowledged; QoS 2: what it was not
    # sent yet (behind its Receive Maximum of 1), never the one already sent
    # [MQTT-4.8.2-5] (4.8.2's SHOULD is about QoS 1).
    with running_gateway(tmp_path) as gw:
        lost = RawClient("127.0.0.1", gw.port, protocol_level=5)
        lost.do_connect(
            "lost",
            proto_ver=5,
            clean_session=False,
            properties={"session_expiry_interval": 1, "receive_maximum": 1},
        )
        lost.subscribe("$share/workers/jobs/#", qos)
        _publish(gw, 5, qos, 3)
        first = lost.expect_packet(mb.PacketType.PUBLISH)  # the others wait behind it
        assert first.payload == b"job-0"
        kept = _member(gw, "kept", 5, qos)
        lost.abort()
        _wait_gone(gw, "lost")
        got: list[bytes] = []
        expected = 3 if qos == 1 else 2
        while len(got) < expected:
            packet = kept.recv_publish()
            got.append(packet.payload)
        kept.expect_no_packet(0.3)
        owed = [b"job-0", b"job-1", b"job-2"] if qos == 1 else [b"job-1", b"job-2"]
        assert sorted(got) == owed
        assert gw.call(lambda: gw.broker.counters.shared_redelivered) == expected
        kept.close()
