"""Connection lifecycle: keep alive, server keep alive, client takeover, assigned client
identifiers."""

from __future__ import annotations

import time

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import BOTH, Clients, connect_props

KEEP_ALIVE = 1  # seconds; protocol time, not scaled


@BOTH
def test_silent_client_is_disconnected_after_keep_alive(clients: Clients, proto: int) -> None:
    # [MQTT-3.1.2-22] (5.0) / [MQTT-3.1.2-24] (3.1.1): no packet within 1.5 x Keep Alive:
    # the Server MUST close the connection; MQTT 5 says why with DISCONNECT 0x8D (4.13).
    # The Will is published then, as for any close without DISCONNECT (3.1.2.5).
    other = clients.subscriber(proto, "will/#", 1)  # keep alive 60
    silent = clients.raw_connect(
        proto, keepalive=KEEP_ALIVE, will_topic="will/silent", will_payload=b"timed out"
    )
    if proto == 5:
        silent.expect_closed(
            unit(4), reason_code=mb.ReasonCode.KEEP_ALIVE_TIMEOUT, require_reason=True
        )
    else:
        silent.expect_closed(unit(4), packet_type=None)
    will = other.expect_message()
    assert (will.topic, will.payload) == ("will/silent", b"timed out")
    assert other.is_connected


@BOTH
def test_client_talking_within_keep_alive_stays_connected(clients: Clients, proto: int) -> None:
    # The Server allows one and a half times the Keep Alive: a client silent for a little
    # more than the Keep Alive itself, pinging in between, is never disconnected.
    client = clients.raw_connect(proto, keepalive=KEEP_ALIVE)
    for _ in range(2):
        time.sleep(1.1 * KEEP_ALIVE)  # the silence under test
        client.ping()


def test_paho_clients_with_a_short_keep_alive_stay_connected(clients: Clients) -> None:
    # paho pings on its own (it checks about once a second, hence 2 s here); the broker
    # answers and keeps both connections past 1.5 x Keep Alive.
    keep_alive = 2
    subs = [clients.subscriber(proto, "ka/t", 1, keepalive=keep_alive) for proto in (4, 5)]
    pub = clients.connect(5)
    time.sleep(1.6 * keep_alive)  # the time under test
    pub.publish("ka/t", b"still here", 1)
    for sub in subs:
        assert sub.is_connected
        assert sub.expect_message().payload == b"still here"


@pytest.mark.gateway_config("mqtt:\n  server_keep_alive: 1\n")
def test_server_keep_alive_is_imposed_on_mqtt5_clients(clients: Clients) -> None:
    # [MQTT-3.2.2-21]: the Client MUST use the Server Keep Alive the CONNACK carries.
    paho = clients.connect(5, keepalive=60)
    assert paho.connack is not None
    assert paho.connack.prop("ServerKeepAlive") == 1
    raw5 = clients.raw(5)
    connack = raw5.do_connect("sk5", proto_ver=5, keepalive=60)
    assert connack.properties.get("server_keep_alive") == 1
    raw4 = clients.raw(4)
    connack4 = raw4.do_connect("sk4", proto_ver=4, keepalive=60)
    assert connack4.properties == {}
    # The server enforces its own value: the silent MQTT 5 client goes at 1.5 x 1 s ...
    raw5.expect_closed(unit(4), reason_code=mb.ReasonCode.KEEP_ALIVE_TIMEOUT, require_reason=True)
    # ... while the 3.1.1 client keeps the keep alive it asked for.
    raw4.ping()


@pytest.mark.gateway_config("mqtt:\n  max_keepalive: 10\n")
def test_mqtt5_keep_alive_above_the_maximum_is_lowered(clients: Clients) -> None:
    client = clients.connect(5, keepalive=100)
    assert client.connack is not None
    assert client.connack.prop("ServerKeepAlive") == 10


@BOTH
def test_second_connect_with_same_client_id_takes_over(clients: Clients, proto: int) -> None:
    # [MQTT-3.1.4-3] (5.0) / [MQTT-3.1.4-2] (3.1.1): the Server MUST close the existing
    # connection; MQTT 5: after DISCONNECT 0x8E Session taken over.
    first = clients.connect(proto, "same")
    second = clients.connect(proto, "same")
    info = first.wait_disconnected()
    if proto == 5:
        assert info.from_server is True
        assert info.reason_code == mb.ReasonCode.SESSION_TAKEN_OVER
    assert second.subscribe("to/t", 1) == [1]
    second.publish("to/t", b"mine", 1)
    assert second.expect_message().payload == b"mine"
    assert second.is_connected


@BOTH
def test_taken_over_connection_sees_exactly_the_disconnect(clients: Clients, proto: int) -> None:
    first = clients.raw_connect(proto, "dup-id")
    clients.raw_connect(proto, "dup-id")
    if proto == 5:
        first.expect_closed(reason_code=mb.ReasonCode.SESSION_TAKEN_OVER, require_reason=True)
    else:
        first.expect_closed(packet_type=None)


@BOTH
def test_takeover_of_a_persistent_session_keeps_it(clients: Clients, proto: int) -> None:
    props = connect_props(SessionExpiryInterval=60) if proto == 5 else None
    first = clients.connect(proto, "keep", clean=False, properties=props)
    assert first.subscribe("keep/t", 1) == [1]
    second = clients.paho(proto, "keep", clean_session=False)
    connack = second.connect(clean_start=False, properties=props)
    assert connack.session_present is True
    first.wait_disconnected()
    pub = clients.connect(proto)
    pub.publish("keep/t", b"for the new connection", 1)
    assert second.expect_message().payload == b"for the new connection"


def test_mqtt5_empty_client_id_gets_an_assigned_identifier(
    clients: Clients, gw: RunningGateway
) -> None:
    # [MQTT-3.2.2-16]: the CONNACK carries the Assigned Client Identifier.
    one = clients.paho(5, "")
    two = clients.paho(5, "")
    assigned = [client.connect().prop("AssignedClientIdentifier") for client in (one, two)]
    assert all(isinstance(cid, str) and cid for cid in assigned)
    assert assigned[0] != assigned[1]
    assert gw.call(lambda: [gw.broker.sessions.get(cid) is not None for cid in assigned]) == [
        True,
        True,
    ]
    assert one.subscribe("as/t", 1) == [1]
    two.publish("as/t", b"to the assigned one", 1)
    assert one.expect_message().payload == b"to the assigned one"


def test_mqtt5_given_client_id_gets_no_assigned_identifier(clients: Clients) -> None:
    client = clients.connect(5, "given")
    assert client.connack is not None
    assert client.connack.prop("AssignedClientIdentifier") is None


def test_v311_empty_client_id_with_clean_session_is_accepted(clients: Clients) -> None:
    # [MQTT-3.1.3-6]: the Server MAY allow a zero-byte ClientId and assign a unique one.
    one = clients.raw_connect(4, "")
    two = clients.raw_connect(4, "")
    one.subscribe("e/t", 1)
    two.publish("e/t", b"x", qos=1)
    assert one.recv_publish().payload == b"x"


def test_v311_empty_client_id_without_clean_session_is_refused(clients: Clients) -> None:
    # [MQTT-3.1.3-8]: CONNACK 0x02 Identifier rejected, then close.
    client = clients.raw(4)
    client.send(mb.gen_connect("", clean_session=False))
    final = client.expect_closed(
        reason_code=mb.ConnackCode.IDENTIFIER_REJECTED,
        require_reason=True,
        packet_type=mb.PacketType.CONNACK,
    )
    assert final is not None
    assert final.session_present is False


@pytest.mark.gateway_config("mqtt:\n  max_client_id_length: 23\n")
@BOTH
def test_an_assigned_identifier_is_not_bound_by_max_client_id_length(
    clients: Clients, proto: int
) -> None:
    # 23 is the least the setting allows: clients that send no id still connect, under
    # an id the broker assigns (longer than 23), while a given id over 23 is refused.
    one = clients.raw_connect(proto, "")
    two = clients.raw_connect(proto, "")
    one.subscribe("assigned/t", 1)
    two.publish("assigned/t", b"x", qos=1)
    assert one.recv_publish().payload == b"x"
    client = clients.raw(proto)
    client.send(mb.gen_connect("c" * 24, proto_ver=proto))
    code = (
        mb.ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
        if proto == 5
        else (mb.ConnackCode.IDENTIFIER_REJECTED)
    )
    final = client.expect_closed(
        reason_code=code, require_reason=True, packet_type=mb.PacketType.CONNACK
    )
    assert final is not None


@pytest.mark.gateway_config("mqtt:\n  server_keep_alive: 0\n")
def test_server_keep_alive_0_is_sent_when_it_differs(clients: Clients) -> None:
    # [MQTT-3.2.2-22]: without a Server Keep Alive in CONNACK the Server MUST use the
    # client's value; a server imposing 0 (no keep alive) has to say so.
    client = clients.raw(5)
    connack = client.do_connect("ska0", proto_ver=5, keepalive=1)
    assert connack.properties.get("server_keep_alive") == 0


@pytest.mark.gateway_config("mqtt:\n  max_keepalive: 10\n")
def test_mqtt5_keep_alive_0_gets_the_maximum(clients: Clients) -> None:
    # 3.1.2.10: Keep Alive 0 switches the mechanism off; a server with a maximum tells the
    # client the value it uses instead (Server Keep Alive).
    client = clients.connect(5, keepalive=0)
    assert client.connack is not None
    assert client.connack.prop("ServerKeepAlive") == 10
