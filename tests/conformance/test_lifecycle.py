"""PINGREQ, keep alive, DISCONNECT and Will Messages: MQTT 3.1.1 and 5.0 sections 3.1.2.5,
3.1.2.10, 3.12 to 3.14."""

from __future__ import annotations

import time

import pytest

from tests.conformance.support import (
    BOTH,
    MALFORMED_OR_PROTOCOL,
    Clients,
    deviation,
    short_wait,
)
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import ReasonCode
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


@pytest.mark.parametrize("proto", [3, 4, 5], ids=["v31", "v311", "v5"])
def test_pingreq_gets_pingresp(clients: Clients, proto: int) -> None:
    """MQTT-3.12.4-1: the Server MUST answer PINGREQ with PINGRESP (exactly D0 00)."""
    client = clients.connect(proto)
    for _ in range(3):
        client.send(mb.gen_pingreq())
        client.expect(mb.gen_pingresp())


@BOTH
def test_pingreq_with_flags_closes_the_connection(clients: Clients, proto: int) -> None:
    """MQTT-2.2.2-1/-2 (3.1.1) / MQTT-2.1.3-1 (5.0): PINGREQ flags are reserved (0000)."""
    client = clients.connect(proto)
    client.send(mb.raw_packet(0xC1))
    with deviation(clients.broker, "answers a PINGREQ with reserved flags set (MQTT-2.2.2-2)"):
        client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)


def _keepalive_s(client: RawClient, requested: int) -> int:
    assert client.connack is not None
    return int(client.connack.properties.get("server_keep_alive", requested))


@BOTH
def test_keep_alive_expiry_closes_the_connection(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.1.2-24 (3.1.1) / MQTT-3.1.2-22 (5.0): without any packet for one and a half times
    the Keep Alive, the Server MUST close the connection as if the network failed, so the Will
    is published; MQTT-3.2.2-21/-22 (5.0): a Server Keep Alive in CONNACK replaces the value."""
    will_topic = f"{root}/will"
    observer = clients.subscriber(will_topic, 1, proto)
    client = clients.connect(proto, keepalive=1, will_topic=will_topic, will_payload=b"gone")
    keepalive = _keepalive_s(client, 1)
    if keepalive == 0 or keepalive > 3:
        pytest.skip(f"the Server imposes a keep alive of {keepalive}s")
    with deviation(
        clients.broker,
        "checks keep alives only every few seconds: an idle connection with Keep Alive 1 is "
        "closed after about 6 s, not 1.5 s (MQTT-3.1.2-24 / MQTT-3.1.2-22)",
    ):
        client.expect_closed(
            timeout=keepalive * 1.5 + unit(1.5), reason_code=ReasonCode.KEEP_ALIVE_TIMEOUT
        )
    assert observer.recv_publish().payload == b"gone"


def test_pingreq_keeps_the_connection_alive(clients: Clients) -> None:
    """MQTT-3.1.2-23/-24 (3.1.1): a Client sending PINGREQ within the Keep Alive stays
    connected past one and a half times the Keep Alive."""
    client = clients.connect(4, keepalive=1)
    # Protocol time, not timeouts: a PINGREQ every 0.4 s for more than 1.5 Keep Alives.
    deadline = time.monotonic() + 2.2
    while time.monotonic() < deadline:
        client.ping()
        client.expect_no_packet(0.4)
    client.ping()


# ---------------------------------------------------------------------------------------------
# DISCONNECT and the Will Message
# ---------------------------------------------------------------------------------------------


def _will_client(clients: Clients, proto: int, topic: str, **args: object) -> RawClient:
    return clients.connect(proto, will_topic=topic, will_payload=b"will", **args)


@BOTH
def test_disconnect_discards_the_will(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.1.2-10, MQTT-3.14.4-3 (3.1.1) / MQTT-3.1.2-10, MQTT-3.14.4-3 (5.0): on DISCONNECT
    (5.0: Reason Code 0x00) the Server discards the Will without publishing it, and closes
    the connection if the Client has not (3.14.4)."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, proto)
    client = _will_client(clients, proto, topic)
    client.send(mb.gen_disconnect(proto_ver=proto))
    client.expect_closed(packet_type=None)
    observer.expect_no_packet(short_wait())


@BOTH
def test_will_is_published_when_the_connection_drops(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.1.2-8 (3.1.1 and 5.0): the Will is published when the connection closes without
    DISCONNECT; MQTT-3.1.2-16 (3.1.1) / MQTT-3.1.2-14 (5.0): with Will Retain 0 as a
    non-retained message, at the Will QoS."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 2, proto)
    client = _will_client(clients, proto, topic, will_qos=1)
    client.close()
    message = observer.recv_publish()
    assert (message.topic, message.payload, message.qos, message.retain) == (
        topic,
        b"will",
        1,
        False,
    )


@BOTH
def test_will_is_published_after_a_protocol_error(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.1.2-8 (3.1.1 and 5.0; 3.1.1 lists "the Server closes the Network Connection
    because of a protocol error"): the Will is published when the Server closes on a bad
    packet."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, proto)
    client = _will_client(clients, proto, topic)
    client.send(mb.raw_packet(0x00, b""))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    assert observer.recv_publish().payload == b"will"


@BOTH
def test_malformed_disconnect_does_not_discard_the_will(
    clients: Clients, root: str, proto: int
) -> None:
    """MQTT-3.14.1-1 (3.1.1 and 5.0; in 5.0 the receiver sends DISCONNECT 0x81): a DISCONNECT
    with reserved flags set is malformed, not a normal disconnection, so the Will is published
    (MQTT-3.1.2-8)."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, proto)
    client = _will_client(clients, proto, topic)
    client.send(mb.gen_disconnect(proto_ver=proto, flags=0x01))
    client.expect_closed(reason_code=ReasonCode.MALFORMED_PACKET)
    assert observer.recv_publish().payload == b"will"


@BOTH
def test_will_retain(clients: Clients, root: str, proto: int) -> None:
    """MQTT-3.1.2-17 (3.1.1) / MQTT-3.1.2-15 (5.0): with Will Retain 1 the Will is published
    as a retained message."""
    topic = f"{root}/will"
    client = _will_client(clients, proto, topic, will_retain=True, will_qos=1)
    client.close()
    late = clients.connect(proto)
    late.subscribe(topic, 1)
    message = late.recv_publish(timeout=unit(3))
    assert (message.payload, message.retain) == (b"will", True)
    late.publish(topic, b"", retain=True)


def test_v5_disconnect_with_will_message(clients: Clients, root: str) -> None:
    """5.0 3.14.2.1: DISCONNECT with Reason Code 0x04 (Disconnect with Will Message) makes the
    Server publish the Will (MQTT-3.1.2-8)."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 5)
    client = _will_client(clients, 5, topic)
    client.send(mb.gen_disconnect(ReasonCode.DISCONNECT_WITH_WILL_MESSAGE, proto_ver=5))
    client.expect_closed(packet_type=None)
    assert observer.recv_publish().payload == b"will"


def test_v5_will_properties_are_forwarded(clients: Clients, root: str) -> None:
    """MQTT-3.1.3-10 (5.0): the Server keeps the order of the Will's User Properties; the
    Payload Format Indicator, Content Type, Response Topic and Correlation Data of the Will
    are forwarded unaltered (MQTT-3.3.2-4/-15/-16/-20)."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 5)
    users = [("z", "1"), ("a", "2"), ("z", "3")]
    client = clients.connect(
        5,
        will_topic=topic,
        will_payload="caf\u00e9".encode(),
        will_properties=mb.props(
            payload_format_indicator=1,
            content_type="text/plain",
            response_topic=f"{root}/reply",
            correlation_data=b"\x00\x01",
            user_property=users,
        ),
    )
    client.close()
    message = observer.recv_publish()
    assert message.user_properties == users
    assert message.properties["payload_format_indicator"] == 1
    assert message.properties["content_type"] == "text/plain"
    assert message.properties["response_topic"] == f"{root}/reply"
    assert message.properties["correlation_data"] == b"\x00\x01"


def test_v5_will_delay(clients: Clients, root: str) -> None:
    """MQTT-3.1.3-9 (5.0): a reconnection before the Will Delay Interval cancels the Will;
    MQTT-3.1.2-8: otherwise it is published once the delay has elapsed, not before."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 5)
    cid = clients.client_id("wd")
    args = {
        "clean": False,
        "will_topic": topic,
        "will_payload": b"late",
        "will_properties": {"will_delay_interval": 1},
        "properties": {"session_expiry_interval": 30},
    }
    first = clients.connect(5, cid, **args)
    first.close()
    # Protocol time, not a timeout: these absences must be checked within the 1 s delay.
    observer.expect_no_packet(0.5)
    second = clients.connect(5, cid, session_present=True, **args)
    observer.expect_no_packet(1.0 + short_wait())
    second.close()
    observer.expect_no_packet(0.5)
    assert observer.recv_publish(timeout=unit(3)).payload == b"late"
    clients.connect(5, cid, clean=True)


def test_v5_will_is_published_when_the_session_ends_first(clients: Clients, root: str) -> None:
    """MQTT-3.1.2-8 (5.0): the Will is published when the Will Delay Interval elapses OR the
    Session ends, whichever is first (Session Expiry 0 ends it with the connection)."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 5)
    client = _will_client(clients, 5, topic, will_properties={"will_delay_interval": 3600})
    client.close()
    with deviation(
        clients.broker,
        "waits for the Will Delay Interval even when the Session (expiry 0) ended with the "
        "connection (MQTT-3.1.2-8)",
    ):
        assert observer.recv_publish().payload == b"will"


def test_v5_will_is_published_on_session_takeover(clients: Clients, root: str) -> None:
    """MQTT-3.1.4-3 (5.0): on takeover the existing connection is closed and its Will (without
    delay) is published as described in 3.1.2.5."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 5)
    cid = clients.client_id("tk")
    _will_client(clients, 5, topic, client_id=cid)
    clients.connect(5, cid)
    assert observer.recv_publish().payload == b"will"


@BOTH
def test_server_closes_after_disconnect(clients: Clients, proto: int) -> None:
    """3.14.4 (3.1.1 and 5.0): after a Client's DISCONNECT the Server closes the connection
    (SHOULD) without sending anything more on it."""
    client = clients.connect(proto)
    client.send(mb.gen_disconnect(proto_ver=proto))
    client.expect_closed(packet_type=None)


def test_v5_disconnect_session_expiry_from_zero_is_a_protocol_error(
    clients: Clients, root: str
) -> None:
    """5.0 3.14.2.2.2: with Session Expiry 0 in CONNECT, a non-zero Session Expiry in the
    Client's DISCONNECT is a Protocol Error: the session is not kept and, the disconnection
    not being normal, the Will is published."""
    topic = f"{root}/will"
    observer = clients.subscriber(topic, 1, 5)
    cid = clients.client_id("dz")
    client = _will_client(clients, 5, topic, client_id=cid, clean=False)
    client.send(mb.gen_disconnect(0, proto_ver=5, properties={"session_expiry_interval": 60}))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)
    clients.connect(5, cid, clean=False, session_present=False)
    with deviation(
        clients.broker,
        "discards the Will on a DISCONNECT that is a Protocol Error (3.14.2.2.2, MQTT-3.1.2-8)",
    ):
        assert observer.recv_publish().payload == b"will"
