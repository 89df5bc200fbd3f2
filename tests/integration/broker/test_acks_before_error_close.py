"""A persistent session's acknowledgements held for the store's commit still go out
before a protocol-error close: SUBSCRIBE + QoS 1 PUBLISH + a malformed packet in one read
get SUBACK and PUBACK, then DISCONNECT 0x81 (3.1.1: the close), with the SQLite store as
with the memory store. The DISCONNECT and the close wait for them (``Session.acks_due``,
``MqttConnection._flush``); before, they were dropped once the DISCONNECT was written.
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import BOTH, Clients, wait_until

CONNACK = mb.PacketType.CONNACK
MALFORMED = b"\x36\x02\x00\x00"  # PUBLISH with QoS 3


def _persistent(proto: int) -> dict[str, int] | None:
    return {"session_expiry_interval": 3600} if proto == 5 else None


@pytest.mark.gateway_config("persistence: sqlite\n")
@BOTH
@pytest.mark.parametrize("behind_connect", [True, False], ids=["behind-connect", "established"])
def test_held_acknowledgements_go_before_a_protocol_error_close(
    gw: RunningGateway, clients: Clients, proto: int, behind_connect: bool
) -> None:
    cid = clients.client_id("ae")
    before = (
        mb.gen_subscribe(1, ["ae/a", "ae/b"], 1, proto_ver=proto)
        + mb.gen_publish("ae/p", b"m", qos=1, mid=2, proto_ver=proto)
        + MALFORMED
    )
    if behind_connect:
        raw = clients.raw(proto)
        raw.send(
            mb.gen_connect(cid, proto_ver=proto, clean_session=False, properties=_persistent(proto))
            + before
        )
        assert raw.expect_packet(CONNACK).reason_code == 0
    else:
        raw = clients.raw_connect(proto, cid, clean_session=False, properties=_persistent(proto))
        raw.send(before)
    assert raw.expect_packet(mb.PacketType.SUBACK, packet_id=1).reason_codes == [1, 1]
    raw.expect_packet(mb.PacketType.PUBACK, packet_id=2)
    if proto == 5:
        raw.expect_closed(reason_code=0x81, require_reason=True)
    else:
        raw.expect_closed(packet_type=None)
    wait_until(lambda: clients.offline(cid), what="the connection's end")
    assert gw.call(lambda: gw.broker.sessions.online) == 0
