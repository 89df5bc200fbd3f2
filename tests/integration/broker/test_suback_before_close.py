"""A SUBSCRIBE followed by a DISCONNECT in the same read gets its SUBACK before the close
[MQTT-3.8.4-1], as mosquitto, which answers each packet in turn, sends it: the
acknowledgements the broker gives to the packets before a client's DISCONNECT still go
out (``Session._send_before_close``), and the close waits for those a persistent
session holds until the store has committed (``Session.acks_due``,
``MqttConnection._flush``).
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import BOTH, Clients, wait_until

CONNACK = mb.PacketType.CONNACK
SUBACK = mb.PacketType.SUBACK


def _persistent(proto: int) -> dict[str, int] | None:
    return {"session_expiry_interval": 3600} if proto == 5 else None


def _subscribe_then_disconnect(proto: int) -> bytes:
    return (
        mb.gen_subscribe(1, ["sb/a", "sb/b"], 1, proto_ver=proto)
        + mb.gen_publish("sb/a", b"m", qos=1, mid=2, proto_ver=proto)
        + mb.gen_disconnect(proto_ver=proto)
    )


def _suback_puback_then_close(raw: RawClient, cid: str, clients: Clients) -> None:
    """SUBACK, PUBACK (the session is closed when the message is routed: its copy to the
    client's own subscription is not sent), then the close."""
    assert raw.expect_packet(SUBACK, packet_id=1).reason_codes == [1, 1]
    raw.expect_packet(mb.PacketType.PUBACK, packet_id=2)
    raw.expect_closed(packet_type=None)
    wait_until(lambda: clients.offline(cid), what="the connection's end")


@BOTH
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "persistent"])
def test_behind_a_connect(gw: RunningGateway, clients: Clients, proto: int, clean: bool) -> None:
    """CONNECT + SUBSCRIBE + QoS 1 PUBLISH + DISCONNECT in one write."""
    cid = clients.client_id("sb")
    raw = clients.raw(proto)
    raw.send(
        mb.gen_connect(
            cid,
            proto_ver=proto,
            clean_session=clean,
            properties=None if clean else _persistent(proto),
            will_topic="sb/will",
        )
        + _subscribe_then_disconnect(proto)
    )
    assert raw.expect_packet(CONNACK).reason_code == 0
    _suback_puback_then_close(raw, cid, clients)


@BOTH
def test_on_an_established_connection(gw: RunningGateway, clients: Clients, proto: int) -> None:
    cid = clients.client_id("sb")
    raw = clients.raw_connect(proto, cid)
    raw.send(_subscribe_then_disconnect(proto))
    _suback_puback_then_close(raw, cid, clients)


@pytest.mark.gateway_config("persistence: sqlite\n")
@BOTH
@pytest.mark.parametrize("behind_connect", [True, False], ids=["behind-connect", "established"])
def test_a_persistent_sessions_acknowledgements_wait_for_their_commit_then_the_close(
    gw: RunningGateway, clients: Clients, proto: int, behind_connect: bool
) -> None:
    """With the SQLite store a persistent session's SUBACK and PUBACK go once what they
    changed is committed: behind a DISCONNECT they still go, and the close follows."""
    cid = clients.client_id("sb")
    connect = mb.gen_connect(
        cid, proto_ver=proto, clean_session=False, properties=_persistent(proto)
    )
    if behind_connect:
        raw = clients.raw(proto)
        raw.send(connect + _subscribe_then_disconnect(proto))
        assert raw.expect_packet(CONNACK).reason_code == 0
    else:
        raw = clients.raw_connect(proto, cid, clean_session=False, properties=_persistent(proto))
        raw.send(_subscribe_then_disconnect(proto))
    _suback_puback_then_close(raw, cid, clients)
    assert gw.call(lambda: gw.broker.sessions.online) == 0
