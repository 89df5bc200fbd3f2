"""CONNECT and CONNACK: MQTT 3.1.1 and 5.0 sections 3.1 and 3.2."""

from __future__ import annotations

import pytest

from tests.conformance.support import (
    BOTH,
    MALFORMED_OR_PROTOCOL,
    Clients,
    expect_connect_refused,
    known_deviation,
    short_wait,
)
from tests.helpers import mqtt_builder as mb
from tests.helpers.mqtt_builder import ConnackCode, PacketType, ReasonCode

FIRST_PACKETS = {
    "pingreq": lambda proto: mb.gen_pingreq(),
    "publish": lambda proto: mb.gen_publish("cf/first", b"x", proto_ver=proto),
    "subscribe": lambda proto: mb.gen_subscribe(1, "cf/first", proto_ver=proto),
}


@BOTH
@pytest.mark.parametrize("first", sorted(FIRST_PACKETS))
def test_first_packet_must_be_connect(clients: Clients, proto: int, first: str) -> None:
    """MQTT-3.1.0-1: the first packet from the Client MUST be CONNECT; the Server sends
    nothing before CONNACK (MQTT-3.2.0-1, MQTT-3.14.0-1) and closes the connection."""
    client = clients.raw(proto)
    client.send(FIRST_PACKETS[first](proto))
    client.expect_closed(packet_type=None)


@BOTH
def test_second_connect_is_a_protocol_error(clients: Clients, proto: int) -> None:
    """MQTT-3.1.0-2: a second CONNECT is a protocol violation and the Server closes the
    connection; it never sends a second CONNACK (MQTT-3.2.0-2)."""
    client = clients.connect(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto))
    client.expect_closed(reason_code=ReasonCode.PROTOCOL_ERROR)


@BOTH
def test_wrong_protocol_name_is_refused(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-1: with a protocol name other than "MQTT" the Server MAY disconnect or
    continue per another specification, never accept the connection per this one
    (5.0: it MAY send CONNACK 0x84 first)."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, proto_name="MQTX"))
    expect_connect_refused(
        client,
        proto,
        v5_codes={ReasonCode.UNSUPPORTED_PROTOCOL_VERSION},
        v311_codes={ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION},
    )


@pytest.mark.parametrize("level", [0, 2, 6])
def test_unsupported_protocol_level_gets_connack_0x01(clients: Clients, level: int) -> None:
    """MQTT-3.1.2-2 (3.1.1): for an unsupported Protocol Level the Server MUST answer CONNACK
    0x01 (unacceptable protocol level) and close; a 5.0 Server MAY use CONNACK 0x84."""
    client = clients.raw(5)  # parses both CONNACK layouts
    client.send(mb.gen_connect(clients.client_id(), proto_ver=level, proto_name="MQTT"))
    connack = client.expect_closed(packet_type=PacketType.CONNACK, require_reason=True)
    assert connack is not None
    if connack.remaining_length == 2:
        assert connack.raw == mb.gen_connack(False, ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION)
    else:
        assert connack.reason_code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION
        assert connack.session_present is False


@BOTH
def test_connect_reserved_flag_must_be_zero(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-3: the Server MUST validate that the reserved Connect Flag is 0 and close
    the connection if not (5.0: Malformed Packet)."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, reserved_flag=True))
    expect_connect_refused(client, proto, v5_codes={ReasonCode.MALFORMED_PACKET})


@BOTH
def test_connect_fixed_header_flags_must_be_zero(clients: Clients, proto: int) -> None:
    """MQTT-2.2.2-1/-2 (3.1.1), MQTT-2.1.3-1 (5.0): reserved fixed-header flags of CONNECT
    are 0000; other values close the connection."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, header_flags=0x01))
    expect_connect_refused(client, proto, v5_codes={ReasonCode.MALFORMED_PACKET})


@BOTH
def test_will_qos_3_is_refused(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-14 (3.1.1) / MQTT-3.1.2-12 (5.0): Will QoS MUST NOT be 3."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, will_topic="cf/w", will_qos=3))
    expect_connect_refused(client, proto, v5_codes={ReasonCode.MALFORMED_PACKET})


@BOTH
def test_will_qos_without_will_flag_is_refused(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-13 (3.1.1) / MQTT-3.1.2-11 (5.0): with Will Flag 0, Will QoS MUST be 0."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, connect_flags=0x02 | 0x08))
    expect_connect_refused(client, proto, v5_codes={ReasonCode.MALFORMED_PACKET})


@BOTH
def test_will_retain_without_will_flag_is_refused(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-15 (3.1.1) / MQTT-3.1.2-13 (5.0): with Will Flag 0, Will Retain MUST be 0."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, connect_flags=0x02 | 0x20))
    expect_connect_refused(client, proto, v5_codes={ReasonCode.MALFORMED_PACKET})


@BOTH
def test_user_name_flag_without_user_name_is_refused(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-19 (3.1.1) / MQTT-3.1.2-17 (5.0): with the User Name Flag set, a User Name
    MUST be present in the payload."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=proto, connect_flags=0x82))
    expect_connect_refused(client, proto, v5_codes={ReasonCode.MALFORMED_PACKET})


@BOTH
def test_password_flag_without_password_is_refused(clients: Clients, proto: int) -> None:
    """MQTT-3.1.2-21 (3.1.1) / MQTT-3.1.2-19 (5.0): with the Password Flag set, a Password
    MUST be present in the payload."""
    client = clients.raw(proto)
    client.send(
        mb.gen_connect(clients.client_id(), proto_ver=proto, username="u", connect_flags=0xC2)
    )
    expect_connect_refused(
        client,
        proto,
        v5_codes={ReasonCode.MALFORMED_PACKET},
        v311_codes=None,
    )


def test_password_without_user_name_is_refused_in_311(clients: Clients) -> None:
    """MQTT-3.1.2-22 (3.1.1): if the User Name Flag is 0, the Password Flag MUST be 0."""
    client = clients.raw(4)
    client.send(mb.gen_connect(clients.client_id(), password=b"secret"))
    expect_connect_refused(client, 4)


def test_password_without_user_name_is_allowed_in_v5(clients: Clients) -> None:
    """5.0 3.1.2.9: MQTT 5 allows a Password without a User Name; it is not a protocol error
    (the Server may still refuse the credentials)."""
    client = clients.raw(5)
    connack = client.do_connect(
        clients.client_id(), proto_ver=5, password=b"secret", expect_code=None
    )
    assert connack.reason_code in {
        ReasonCode.SUCCESS,
        ReasonCode.BAD_USER_NAME_OR_PASSWORD,
        ReasonCode.NOT_AUTHORIZED,
    }


@BOTH
def test_23_character_alphanumeric_client_id_is_accepted(clients: Clients, proto: int) -> None:
    """MQTT-3.1.3-5: the Server MUST allow 1 to 23 byte client identifiers of 0-9a-zA-Z."""
    cid = ("Az09" + clients.uid + "x" * 23)[:23]
    client = clients.raw(proto)
    client.do_connect(cid, proto_ver=proto)
    client.ping()


def test_zero_length_client_id_with_clean_session(clients: Clients) -> None:
    """MQTT-3.1.3-6 / MQTT-3.1.3-9 (3.1.1): a Server MAY accept a zero-byte ClientId with
    CleanSession 1 (assigning a unique id); if it rejects it, CONNACK 0x02 then close."""
    client = clients.raw(4)
    connack = client.do_connect("", expect_code=None)
    if connack.reason_code == ConnackCode.ACCEPTED:
        client.ping()
    else:
        assert connack.reason_code == ConnackCode.IDENTIFIER_REJECTED
        client.expect_closed(packet_type=None)


def test_zero_length_client_id_without_clean_session_is_rejected(clients: Clients) -> None:
    """MQTT-3.1.3-8 (3.1.1): a zero-byte ClientId with CleanSession 0 gets CONNACK 0x02
    (identifier rejected), Session Present 0, and the connection is closed."""
    client = clients.raw(4)
    client.send(mb.gen_connect("", clean_session=False))
    connack = client.expect_closed(
        packet_type=PacketType.CONNACK,
        require_reason=True,
        reason_code=ConnackCode.IDENTIFIER_REJECTED,
    )
    assert connack is not None
    assert connack.raw == mb.gen_connack(False, ConnackCode.IDENTIFIER_REJECTED)


def test_v5_zero_length_client_id_gets_assigned_identifier(clients: Clients) -> None:
    """MQTT-3.1.3-6/-7, MQTT-3.2.2-16 (5.0): a Server accepting a zero-length ClientId MUST
    return an Assigned Client Identifier, unique among sessions; if it rejects it, CONNACK
    0x85 and close (MQTT-3.1.3-8)."""
    assigned = []
    for _ in range(2):
        client = clients.raw(5)
        client.send(mb.gen_connect("", proto_ver=5))
        connack = client.expect_packet(PacketType.CONNACK)
        if connack.reason_code != ReasonCode.SUCCESS:
            assert connack.reason_code == ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
            client.expect_closed(packet_type=None)
            return
        assert connack.session_present is False
        identifier = connack.properties.get("assigned_client_identifier")
        assert isinstance(identifier, str)
        assert identifier != ""
        assigned.append(identifier)
    assert assigned[0] != assigned[1]


def test_v5_zero_length_client_id_with_clean_start_0_is_allowed(clients: Clients) -> None:
    """MQTT-3.1.3-6/-7 (5.0): unlike 3.1.1, Clean Start 0 with a zero-length ClientId is not a
    protocol error; accepted, the CONNACK carries an Assigned Client Identifier."""
    client = clients.raw(5)
    connack = client.do_connect("", proto_ver=5, clean_session=False, expect_code=None)
    if connack.reason_code == ReasonCode.SUCCESS:
        assert connack.properties.get("assigned_client_identifier")
        assert connack.session_present is False
    else:
        assert connack.reason_code == ReasonCode.CLIENT_IDENTIFIER_NOT_VALID


@BOTH
@pytest.mark.parametrize(
    "raw_id", [b"ab\xff", b"\xed\xa0\x80", b"\xc0\x80"], ids=["0xff", "surrogate", "overlong-nul"]
)
def test_ill_formed_utf8_client_id_closes(clients: Clients, proto: int, raw_id: bytes) -> None:
    """MQTT-1.5.3-1 (3.1.1) / MQTT-1.5.4-1 (5.0), MQTT-3.1.3-4: the ClientId is a UTF-8
    string; ill-formed UTF-8 closes the connection (5.0: Malformed Packet)."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(raw_id, proto_ver=proto))
    expect_connect_refused(
        client,
        proto,
        v5_codes={ReasonCode.MALFORMED_PACKET, ReasonCode.CLIENT_IDENTIFIER_NOT_VALID},
        v311_codes={ConnackCode.IDENTIFIER_REJECTED},
    )


@BOTH
def test_null_character_in_client_id_closes(clients: Clients, proto: int) -> None:
    """MQTT-1.5.3-2 (3.1.1) / MQTT-1.5.4-2 (5.0): a UTF-8 string MUST NOT include U+0000;
    the receiver closes the connection."""
    client = clients.raw(proto)
    client.send(mb.gen_connect(b"ab\x00cd", proto_ver=proto))
    expect_connect_refused(
        client,
        proto,
        v5_codes={ReasonCode.MALFORMED_PACKET, ReasonCode.CLIENT_IDENTIFIER_NOT_VALID},
        v311_codes={ConnackCode.IDENTIFIER_REJECTED},
    )


@BOTH
def test_connack_acknowledge_flags(clients: Clients, proto: int) -> None:
    """MQTT-3.2.2-1 (5.0): CONNACK flag bits 7-1 are 0; MQTT-3.2.0-1: CONNACK is the first
    packet the Server sends; 3.1.1: CONNACK is exactly 20 02 00 00 for a clean session."""
    client = clients.raw(proto)
    connack = client.do_connect(clients.client_id(), proto_ver=proto)
    assert connack.raw[2] & 0xFE == 0
    if proto == 4:
        assert connack.raw == mb.gen_connack(False, 0)


@BOTH
def test_clean_session_gives_session_present_0(clients: Clients, proto: int) -> None:
    """MQTT-3.2.2-1 (3.1.1) / MQTT-3.2.2-2 (5.0): accepting Clean Session/Start 1, the Server
    sets Session Present 0, even when a session existed; MQTT-3.1.2-6 (3.1.1) /
    MQTT-3.1.2-4 (5.0): that session is discarded."""
    cid = clients.client_id()
    persistent = {"properties": {"session_expiry_interval": 60}} if proto == 5 else {}
    first = clients.connect(proto, cid, clean=False, **persistent)
    first.subscribe(f"cf/{clients.uid}/t", 1)
    first.disconnect()
    second = clients.connect(proto, cid, clean=True, session_present=False)
    publisher = clients.connect(proto)
    publisher.publish(f"cf/{clients.uid}/t", b"m", qos=1)
    second.expect_no_packet(short_wait())


@BOTH
def test_resumed_session_gives_session_present_1(clients: Clients, proto: int) -> None:
    """MQTT-3.2.2-2/-3 (3.1.1) / MQTT-3.2.2-3 (5.0): with Clean Session/Start 0, Session
    Present is 0 for a new session and 1 when the Server has one (MQTT-3.1.2-4 (3.1.1) /
    MQTT-3.1.2-5/-6 (5.0))."""
    cid = clients.client_id()
    persistent = {"properties": {"session_expiry_interval": 60}} if proto == 5 else {}
    first = clients.connect(proto, cid, clean=False, session_present=False, **persistent)
    first.disconnect()
    second = clients.connect(proto, cid, clean=False, session_present=True, **persistent)
    second.disconnect()
    clients.connect(proto, cid, clean=True)  # leave nothing behind


@BOTH
def test_session_takeover_closes_the_existing_connection(clients: Clients, proto: int) -> None:
    """MQTT-3.1.4-2 (3.1.1) / MQTT-3.1.4-3 (5.0): a CONNECT with the ClientId of a connected
    Client makes the Server close the existing connection; in 5.0 it sends that Client a
    DISCONNECT with Reason Code 0x8E (Session taken over)."""
    cid = clients.client_id()
    first = clients.connect(proto, cid)
    second = clients.connect(proto, cid)
    final = first.expect_closed(reason_code=ReasonCode.SESSION_TAKEN_OVER)
    second.ping()
    if proto == 5 and final is None:
        known_deviation(
            clients.broker,
            "closes a taken-over v5 connection without DISCONNECT 0x8E (MQTT-3.1.4-3)",
        )
    assert proto == 4 or final is not None


def test_rejected_connect_stops_processing_311(clients: Clients) -> None:
    """MQTT-3.1.4-5 (3.1.1): a Server rejecting CONNECT MUST NOT process data the Client sent
    after it (here a retained PUBLISH behind a CONNECT refused with 0x02)."""
    topic = f"cf/{clients.uid}/after-reject"
    client = clients.raw(4)
    client.send(
        mb.gen_connect("", clean_session=False)
        + mb.gen_publish(topic, b"must not be stored", retain=True)
    )
    client.expect_closed(packet_type=PacketType.CONNACK, reason_code=2)
    probe = clients.connect(4)
    probe.subscribe(topic, 0)
    probe.expect_no_packet(short_wait())


def test_v5_rejected_connect_stops_processing(clients: Clients) -> None:
    """MQTT-3.1.4-6 (5.0): a Server rejecting CONNECT MUST NOT process data sent after it
    (here a retained PUBLISH behind a CONNECT with an unsupported Authentication Method)."""
    topic = f"cf/{clients.uid}/after-reject"
    client = clients.raw(5)
    client.send(
        mb.gen_connect(
            clients.client_id(),
            proto_ver=5,
            properties={"authentication_method": "cf-no-such-method"},
        )
        + mb.gen_publish(topic, b"must not be stored", retain=True, proto_ver=5)
    )
    client.expect_closed(packet_type=PacketType.CONNACK)
    probe = clients.connect(5)
    probe.subscribe(topic, 0)
    probe.expect_no_packet(short_wait())


def test_v5_unsupported_authentication_method_is_refused(clients: Clients) -> None:
    """MQTT-4.12.0-1 (5.0): a Server not supporting the Authentication Method MAY send CONNACK
    0x8C (Bad authentication method) or 0x87 (Not authorized) and MUST close."""
    client = clients.raw(5)
    client.send(
        mb.gen_connect(
            clients.client_id(),
            proto_ver=5,
            properties={"authentication_method": "cf-no-such-method"},
        )
    )
    expect_connect_refused(
        client,
        5,
        v5_codes={ReasonCode.BAD_AUTHENTICATION_METHOD, ReasonCode.NOT_AUTHORIZED},
    )


def test_v5_auth_without_authentication_method_is_a_protocol_error(clients: Clients) -> None:
    """MQTT-4.12.0-7 (5.0): without an Authentication Method in CONNECT the Client MUST NOT
    send AUTH; the Server treats it as a Protocol Error and closes (MQTT-4.13.1-1)."""
    client = clients.connect(5)
    client.send(mb.gen_auth(ReasonCode.RE_AUTHENTICATE, properties={"authentication_method": "x"}))
    client.expect_closed(reason_code=MALFORMED_OR_PROTOCOL)


@pytest.mark.parametrize(
    "properties",
    [
        mb.props(receive_maximum=0),
        mb.props(maximum_packet_size=0),
        mb.props(request_problem_information=2),
        mb.props(request_response_information=2),
        mb.props(("session_expiry_interval", 1), ("session_expiry_interval", 2)),
        mb.props(topic_alias=1),
    ],
    ids=[
        "receive-maximum-0",
        "maximum-packet-size-0",
        "request-problem-information-2",
        "request-response-information-2",
        "duplicate-session-expiry",
        "topic-alias-in-connect",
    ],
)
def test_v5_invalid_connect_properties_are_refused(clients: Clients, properties: bytes) -> None:
    """5.0 3.1.2.11: a zero Receive Maximum or Maximum Packet Size, a Request Problem /
    Response Information other than 0 or 1, a repeated property, or a property not allowed in
    CONNECT is a Protocol Error / Malformed Packet; the Server closes (MQTT-4.13.1-1)."""
    client = clients.raw(5)
    client.send(mb.gen_connect(clients.client_id(), proto_ver=5, properties=properties))
    expect_connect_refused(client, 5)


def test_v5_response_information_only_when_requested(clients: Clients) -> None:
    """MQTT-3.1.2-28 (5.0): without Request Response Information 1 the Server MUST NOT return
    Response Information."""
    client = clients.connect(5)
    assert client.connack is not None
    assert "response_information" not in client.connack.properties
    client.disconnect()


def test_v5_request_problem_information_0(clients: Clients) -> None:
    """MQTT-3.1.2-29 (5.0): with Request Problem Information 0 the Server MUST NOT send a
    Reason String or User Properties on packets other than PUBLISH, CONNACK or DISCONNECT."""
    client = clients.connect(5, properties={"request_problem_information": 0})
    topic = f"cf/{clients.uid}/rpi"
    packets = [
        client.subscribe([(topic, 1), (f"{topic}/+", 2)]),
        client.unsubscribe([topic, f"{topic}/never-subscribed"]),
    ]
    puback = client.publish(f"{topic}/nobody", b"x", qos=1)
    pubcomp = client.publish(f"{topic}/nobody", b"x", qos=2)
    assert puback is not None
    assert pubcomp is not None
    packets += [puback, pubcomp]
    for packet in packets:
        assert "reason_string" not in packet.properties
        assert "user_property" not in packet.properties
