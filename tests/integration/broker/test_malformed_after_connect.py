"""A packet that fails to decode behind a CONNECT, in the same read, is not blamed on
the CONNECT (MQTT 5.0 4.13.1: a CONNACK carries an error in the CONNECT only): the
CONNECT gets its own answer, then the malformed packet closes the connection as it would
any connected client's, with DISCONNECT 0x81 for MQTT 5, and the will goes out
(``Session._fail``, ``Session.handle_held``). mosquitto answers the same way.
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import BOTH, Clients, wait_until

CONNACK = mb.PacketType.CONNACK


def _online(gw: RunningGateway) -> int:
    return gw.call(lambda: gw.broker.sessions.online)


@BOTH
def test_a_malformed_packet_behind_a_connect_is_not_blamed_on_the_connect(
    gw: RunningGateway, clients: Clients, proto: int
) -> None:
    """CONNECT (with a will) + a malformed PUBLISH (QoS 3) in one write: the CONNECT is
    accepted (CONNACK 0x00), then the malformed packet closes the connection, with
    DISCONNECT 0x81 for MQTT 5 [MQTT 5.0 4.13.1], and the will is published."""
    watcher = clients.subscriber(5, "pw/#")
    before = _online(gw)
    cid = clients.client_id("pw")
    raw = clients.raw(proto)
    raw.send(
        mb.gen_connect(cid, proto_ver=proto, will_topic="pw/will", will_payload=b"gone")
        + mb.gen_pingreq()
        + b"\x36\x02\x00\x00"  # PUBLISH with QoS 3
    )
    assert raw.expect_packet(CONNACK).reason_code == 0
    raw.expect_packet(mb.PacketType.PINGRESP)
    if proto == 5:
        raw.expect_closed(reason_code=0x81, require_reason=True)
    else:
        raw.expect_closed(packet_type=None)
    message = watcher.expect_message()
    assert (message.topic, message.payload) == ("pw/will", b"gone")
    wait_until(lambda: clients.offline(cid), what="the connection's end")
    assert _online(gw) == before


@BOTH
def test_a_refused_connect_with_a_malformed_packet_behind_it_gets_its_refusal(
    gw: RunningGateway, clients: Clients, proto: int
) -> None:
    """The CONNECT's own answer comes first also when it refuses: a will on a ``$SYS``
    topic is Not authorized (3.1.1: return code 5), whatever follows it."""
    raw = clients.raw(proto)
    raw.send(
        mb.gen_connect(clients.client_id("pw"), proto_ver=proto, will_topic="$SYS/x")
        + b"\x36\x02\x00\x00"
    )
    connack = raw.expect_closed(packet_type=CONNACK, require_reason=True)
    assert connack is not None
    assert connack.reason_code == (0x87 if proto == 5 else 5)


@BOTH
@pytest.mark.parametrize("behind_connect", [True, False], ids=["behind-connect", "established"])
def test_packets_before_a_malformed_one_are_answered_before_the_close(
    gw: RunningGateway, clients: Clients, proto: int, behind_connect: bool
) -> None:
    """SUBSCRIBE + QoS 1 PUBLISH + a malformed packet in one write: SUBACK and PUBACK,
    then the close (MQTT 5: DISCONNECT 0x81), as when each comes in its own write, and
    as mosquitto answers each packet in turn."""
    cid = clients.client_id("pw")
    before = (
        mb.gen_subscribe(1, "pw/s", 1, proto_ver=proto)
        + mb.gen_publish("pw/p", b"m", qos=1, mid=2, proto_ver=proto)
        + b"\x36\x02\x00\x00"  # PUBLISH with QoS 3
    )
    if behind_connect:
        raw = clients.raw(proto)
        raw.send(mb.gen_connect(cid, proto_ver=proto) + before)
        assert raw.expect_packet(CONNACK).reason_code == 0
    else:
        raw = clients.raw_connect(proto, cid)
        raw.send(before)
    assert raw.expect_packet(mb.PacketType.SUBACK, packet_id=1).reason_codes == [1]
    raw.expect_packet(mb.PacketType.PUBACK, packet_id=2)
    if proto == 5:
        raw.expect_closed(reason_code=0x81, require_reason=True)
    else:
        raw.expect_closed(packet_type=None)
    wait_until(lambda: clients.offline(cid), what="the connection's end")
