"""The CONNACK a client can accept: its Maximum Packet Size, MQTT 3.1's reserved byte.

MQTT 5.0 [MQTT-3.1.2-24]: the server MUST NOT send a packet larger than the client's
Maximum Packet Size; the Reason String and User Properties MUST NOT be sent when they
would make it larger (3.2.2.3.9, 3.2.2.3.10). The properties that withhold only a
feature are left out until the CONNACK fits, never the limits the client must keep;
when even the minimal one (with them and the Assigned Client Identifier) does not fit,
the connection closes without a CONNACK (as mosquitto does), counted in limit
``connack_size``.

MQTT 3.1 (protocol level 3, "MQIsdp") has no session present flag: the first byte of
its CONNACK is reserved, 0, also when a session is resumed.
"""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

# The limits the probe's gateway announces: a full CONNACK with an assigned id is 43 bytes.
LIMITS = "mqtt:\n  max_packet_size: 100000\n  receive_maximum: 5\n  max_topic_alias: 4\n"


@pytest.mark.gateway_config(LIMITS)
def test_connack_with_an_assigned_id_fits_a_small_maximum(clients: Clients) -> None:
    # 43 bytes whole; 40 without the Topic Alias Maximum (absent: the client sends none).
    client = clients.raw(5)
    client.send(mb.gen_connect("", proto_ver=5, properties={"maximum_packet_size": 40}))
    connack = client.expect_packet(mb.PacketType.CONNACK, unit(5))
    assert connack.reason_code == 0
    assert len(connack.raw) <= 40
    assert connack.properties["assigned_client_identifier"]
    assert "topic_alias_maximum" not in connack.properties
    client.ping()  # the connection is usable


@pytest.mark.gateway_config(LIMITS)
@pytest.mark.parametrize("maximum", [8, 12])
def test_the_limits_a_client_must_keep_are_never_left_out(
    gw: RunningGateway, clients: Clients, maximum: int
) -> None:
    """Without Receive Maximum the client may send 65535 QoS 1 and 2 PUBLISH unacknowledged
    (3.2.2.3.3) and would be ended with 0x93 for it: a CONNACK that cannot carry the
    server's limits is not sent (before: a 5-byte CONNACK without properties, then 0x93
    after the 33rd unacknowledged PUBLISH of 40)."""
    client = clients.raw(5)
    client.send(
        mb.gen_connect("mps-small", proto_ver=5, properties={"maximum_packet_size": maximum})
    )
    client.expect_closed(unit(5), packet_type=None)

    def counted() -> bool:
        return gw.call(lambda: gw.broker.counters.limit_hits["connack_size"]) >= 1

    wait_until(counted, unit(5))


@pytest.mark.gateway_config(LIMITS)
def test_connack_kept_whole_when_it_fits(clients: Clients) -> None:
    client = clients.raw(5)
    client.send(mb.gen_connect("", proto_ver=5, properties={"maximum_packet_size": 1000}))
    connack = client.expect_packet(mb.PacketType.CONNACK, unit(5))
    assert connack.properties["receive_maximum"] == 5
    assert connack.properties["topic_alias_maximum"] == 4
    assert connack.properties["maximum_packet_size"] == 100000
    assert "assigned_client_identifier" in connack.properties


@pytest.mark.gateway_config(LIMITS)
def test_no_connack_fits_closes_without_one(gw: RunningGateway, clients: Clients) -> None:
    # An assigned id alone makes the CONNACK 32 bytes: a maximum of 20 leaves no CONNACK.
    client = clients.raw(5)
    client.send(mb.gen_connect("", proto_ver=5, properties={"maximum_packet_size": 20}))
    client.expect_closed(unit(5), packet_type=None)

    def counted() -> bool:
        return gw.call(lambda: gw.broker.counters.limit_hits["connack_size"]) == 1

    wait_until(counted, unit(5))
    assert gw.call(lambda: (len(gw.broker.sessions), gw.broker.sessions.online)) == (0, 0)


@pytest.mark.gateway_config(LIMITS)
def test_no_connack_fits_a_resumed_session_stays(gw: RunningGateway, clients: Clients) -> None:
    # The session resumed by a CONNECT that gets no CONNACK stays offline, not online.
    first = clients.raw(5)
    first.do_connect(
        "resume-small", proto_ver=5, clean_session=False,
        properties={"session_expiry_interval": 300},
    )  # fmt: skip
    first.disconnect()
    third = clients.raw(5)
    third.send(
        mb.gen_connect(
            "resume-small", proto_ver=5, clean_session=False,
            properties={"maximum_packet_size": 4, "session_expiry_interval": 300},
        )
    )  # fmt: skip
    third.expect_closed(unit(5), packet_type=None)

    def settled() -> bool:
        return gw.call(lambda: gw.broker.counters.limit_hits["connack_size"]) == 1

    wait_until(settled, unit(5))
    state = gw.call(lambda: gw.broker.sessions.get("resume-small"))
    assert state is not None
    assert gw.call(lambda: (state.connection, gw.broker.sessions.online)) == (None, 0)
    resumed = clients.raw(5)
    connack = resumed.do_connect(
        "resume-small", proto_ver=5, clean_session=False,
        properties={"session_expiry_interval": 300},
    )  # fmt: skip
    assert connack.session_present is True


def test_mqtt31_resumed_session_connack_byte_is_reserved(clients: Clients) -> None:
    first = clients.raw(3)
    connack = first.do_connect("v31resume", proto_ver=3, clean_session=False)
    assert connack.raw[2:] == b"\x00\x00"
    first.disconnect()
    again = clients.raw(3)
    connack = again.do_connect("v31resume", proto_ver=3, clean_session=False)
    assert connack.raw == b"\x20\x02\x00\x00"  # 3.1: no session present flag
    # 3.1.1 resumes with the flag set [MQTT-3.2.2-2]
    v311 = clients.raw(4)
    v311.do_connect("v311resume", proto_ver=4, clean_session=False)
    v311.disconnect()
    again311 = clients.raw(4)
    assert again311.do_connect("v311resume", proto_ver=4, clean_session=False).raw == (
        b"\x20\x02\x01\x00"
    )
