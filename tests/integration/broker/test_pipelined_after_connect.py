"""Packets a client sends behind its CONNECT, arriving in the same read: the CONNECT is
decided first (its CONNACK as it would be alone, the connection online, its will
registered), then they are handled in order, as mosquitto does (``Session.accept``,
``Session.handle_held``, ``broker_core.connect``).

Each case sends everything in one ``sendall`` to the in-process gateway over loopback.
"""

from __future__ import annotations

import logging

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import BOTH, Clients, wait_until

CONNACK = mb.PacketType.CONNACK
SUBACK = mb.PacketType.SUBACK


def _online(gw: RunningGateway) -> int:
    return gw.call(lambda: gw.broker.sessions.online)


def _persistent(proto: int) -> dict[str, int] | None:
    return {"session_expiry_interval": 3600} if proto == 5 else None


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@BOTH
def test_a_will_connect_and_a_disconnect_in_one_write(
    gw: RunningGateway, clients: Clients, proto: int, caplog: pytest.LogCaptureFixture
) -> None:
    """CONNECT with a will + DISCONNECT in one write (the fuzzer's
    ``101100044d5154540406000000000001740000e000``): CONNACK 0x00, then the close; the
    normal DISCONNECT discards the will; the connection counted online while it lasted,
    so the gauge is back where it was; nothing logged as an error."""
    watcher = clients.subscriber(5, "pw/#")
    before = _online(gw)
    for attempt in range(3):
        cid = clients.client_id("pw")
        raw = clients.raw(proto)
        raw.send(
            mb.gen_connect(cid, proto_ver=proto, will_topic="pw/will", will_payload=b"gone")
            + mb.gen_disconnect(proto_ver=proto)
        )
        assert raw.expect_packet(CONNACK).reason_code == 0, attempt
        raw.expect_closed(packet_type=None)
        wait_until(lambda: clients.offline(cid), what="the connection's end")  # noqa: B023
        assert _online(gw) == before
    watcher.expect_no_message()
    assert gw.call(lambda: gw.broker.wills.bytes) == 0
    assert _errors(caplog) == []


@BOTH
def test_a_subscribe_between_a_will_connect_and_a_disconnect_is_kept(
    gw: RunningGateway, clients: Clients, proto: int, caplog: pytest.LogCaptureFixture
) -> None:
    """CONNECT (persistent session, with a will) + SUBSCRIBE + DISCONNECT in one write:
    the subscription is made and kept in the session, which a message published after
    the close reaches on the next connection."""
    cid = clients.client_id("pw")
    raw = clients.raw(proto)
    raw.send(
        mb.gen_connect(
            cid,
            proto_ver=proto,
            clean_session=False,
            properties=_persistent(proto),
            will_topic="pw/will",
        )
        + mb.gen_subscribe(1, "pw/t", 1, proto_ver=proto)
        + mb.gen_disconnect(proto_ver=proto)
    )
    assert raw.expect_packet(CONNACK).reason_code == 0
    raw.collect()  # and the SUBACK (test_suback_before_close)
    wait_until(lambda: clients.offline(cid), what="the connection's end")
    assert _online(gw) == 0

    publisher = clients.connect(5)
    publisher.publish("pw/t", b"queued", qos=1)
    again = clients.raw_connect(proto, cid, clean_session=False, properties=_persistent(proto))
    assert again.connack is not None and again.connack.session_present
    assert again.recv_publish().payload == b"queued"
    assert _online(gw) == 2
    assert _errors(caplog) == []
