"""A second CONNECT [MQTT-3.1.0-2], or an AUTH when the CONNECT named no authentication
method, behind a CONNECT in the same read is not blamed on that CONNECT (MQTT 5.0
4.13.1): the CONNECT gets its CONNACK 0x00, then the error closes the connection as it
would once connected, with DISCONNECT 0x82 for MQTT 5, and the will is published: the
same answer as when the packets come in separate reads (``Session._behind_connect``).
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import BOTH, Clients, wait_until

CONNACK = mb.PacketType.CONNACK
AUTH = b"\xf0\x02\x18\x00"  # AUTH 0x18 (continue authentication), no properties


def _connect(cid: str, proto: int) -> bytes:
    return mb.gen_connect(cid, proto_ver=proto, will_topic="pe/will", will_payload=b"gone")


def _closed_with_will(
    raw: RawClient, clients: Clients, gw: RunningGateway, cid: str, proto: int, before: int
) -> None:
    if proto == 5:
        raw.expect_closed(reason_code=0x82, require_reason=True)
    else:
        raw.expect_closed(packet_type=None)
    wait_until(lambda: clients.offline(cid), what="the connection's end")
    assert gw.call(lambda: gw.broker.sessions.online) == before


@BOTH
@pytest.mark.parametrize("split", [False, True], ids=["one-write", "two-writes"])
def test_a_second_connect_behind_a_connect(
    gw: RunningGateway, clients: Clients, proto: int, split: bool
) -> None:
    watcher = clients.subscriber(5, "pe/#")
    before = gw.call(lambda: gw.broker.sessions.online)
    cid = clients.client_id("pe")
    connect = _connect(cid, proto)
    raw = clients.raw(proto)
    if split:
        raw.send(connect)
        assert raw.expect_packet(CONNACK).reason_code == 0
        raw.send(mb.gen_pingreq() + connect)
    else:
        raw.send(connect + mb.gen_pingreq() + connect)
        assert raw.expect_packet(CONNACK).reason_code == 0
    raw.expect_packet(mb.PacketType.PINGRESP)
    _closed_with_will(raw, clients, gw, cid, proto, before)
    message = watcher.expect_message()
    assert (message.topic, message.payload) == ("pe/will", b"gone")


@pytest.mark.parametrize("split", [False, True], ids=["one-write", "two-writes"])
def test_an_auth_behind_a_connect_without_an_authentication_method(
    gw: RunningGateway, clients: Clients, split: bool
) -> None:
    watcher = clients.subscriber(5, "pe/#")
    before = gw.call(lambda: gw.broker.sessions.online)
    cid = clients.client_id("pa")
    connect = _connect(cid, 5)
    raw = clients.raw(5)
    if split:
        raw.send(connect)
        assert raw.expect_packet(CONNACK).reason_code == 0
        raw.send(AUTH)
    else:
        raw.send(connect + AUTH)
        assert raw.expect_packet(CONNACK).reason_code == 0
    _closed_with_will(raw, clients, gw, cid, 5, before)
    message = watcher.expect_message()
    assert (message.topic, message.payload) == ("pe/will", b"gone")
