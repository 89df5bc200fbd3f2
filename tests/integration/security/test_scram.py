"""MQTT 5 enhanced authentication with SCRAM-SHA-256 over AUTH packets, on the wire.

paho-mqtt 2.x cannot answer an AUTH packet, so these tests drive the exchange with the
raw client and ``broker_core.scram.ScramClient`` (checked against RFC 7677's example in
the unit tests).
"""

from __future__ import annotations

import gc
import itertools
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.scram import METHOD, ScramClient
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.mqtt_builder import PacketType
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import wait_until
from tests.integration.security.support import password_file, security_gateway

_ids = itertools.count(1)


def cid() -> str:
    return f"scram{next(_ids)}"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    tmp = tmp_path_factory.mktemp("scram")
    users = password_file(tmp / "passwd", {"alice": "wonderland", "bob": "builder"})
    config = {
        "listeners": [
            {"type": "tcp", "name": "closed", "bind": "127.0.0.1:0", "allow_anonymous": False}
        ],
        "auth": {"password_file": str(users)},
    }
    with security_gateway(tmp, config) as gateway:
        yield gateway


def raw(gw: RunningGateway) -> RawClient:
    host, port = gw.address()
    return RawClient(host, port, protocol_level=5)


def auth_props(data: bytes, method: str = METHOD) -> dict[str, object]:
    return {"authentication_method": method, "authentication_data": data}


def start(client: RawClient, scram: ScramClient, **connect_args: object) -> mb.Packet:
    """CONNECT with the client-first-message; returns the server's AUTH 0x18."""
    client.send(
        mb.gen_connect(cid(), proto_ver=5, properties=auth_props(scram.first()), **connect_args)  # type: ignore[arg-type]
    )
    challenge = client.expect_packet(PacketType.AUTH, reason_code=0x18)
    assert challenge.properties["authentication_method"] == METHOD
    return challenge


def answer(client: RawClient, scram: ScramClient, challenge: mb.Packet) -> None:
    final = scram.final(challenge.properties["authentication_data"])
    client.send(mb.gen_auth(0x18, properties=auth_props(final)))


def scram_connect(gw: RunningGateway, user: str, password: str) -> RawClient:
    client = raw(gw)
    scram = ScramClient(user, password)
    answer(client, scram, start(client, scram))
    connack = client.expect_packet(PacketType.CONNACK, reason_code=0)
    assert connack.properties["authentication_method"] == METHOD
    assert scram.verify(connack.properties["authentication_data"]) is True
    client.connack = connack
    return client


def test_success_proves_both_sides_and_sets_the_username(gw: RunningGateway) -> None:
    client = scram_connect(gw, "alice", "wonderland")
    try:
        assert client.subscribe("scram/t", 1).reason_codes == [1]
        client.publish("scram/t", b"hello", qos=1)
        assert client.recv_publish().payload == b"hello"
        usernames = gw.call(
            lambda: sorted(str(conn.session.origin.username) for conn in gw.broker.connections)
        )
        assert "alice" in usernames
    finally:
        client.disconnect()


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "wonderland")])
def test_failure_is_bad_credentials_after_the_challenge(
    gw: RunningGateway, user: str, password: str
) -> None:
    client = raw(gw)
    scram = ScramClient(user, password)
    answer(client, scram, start(client, scram))
    client.expect_closed(packet_type=PacketType.CONNACK, reason_code=0x86, require_reason=True)


def test_connect_username_must_be_the_scram_user(gw: RunningGateway) -> None:
    client = raw(gw)
    scram = ScramClient("alice", "wonderland")
    client.send(
        mb.gen_connect(cid(), proto_ver=5, username="bob", properties=auth_props(scram.first()))
    )
    client.expect_closed(packet_type=PacketType.CONNACK, reason_code=0x86, require_reason=True)


def test_malformed_client_first_is_refused_at_once(gw: RunningGateway) -> None:
    client = raw(gw)
    client.send(mb.gen_connect(cid(), proto_ver=5, properties=auth_props(b"p=tls-unique,,n=a,r=x")))
    client.expect_closed(packet_type=PacketType.CONNACK, reason_code=0x86, require_reason=True)


def test_unknown_method_is_bad_authentication_method(gw: RunningGateway) -> None:
    client = raw(gw)
    client.send(mb.gen_connect(cid(), proto_ver=5, properties=auth_props(b"x", "SCRAM-SHA-1")))
    client.expect_closed(packet_type=PacketType.CONNACK, reason_code=0x8C, require_reason=True)


@pytest.mark.parametrize(
    ("reason", "method"),
    [(0x19, METHOD), (0x00, METHOD), (0x18, "SCRAM-SHA-1")],
    ids=["reauthenticate", "success", "other-method"],
)
def test_wrong_answer_to_the_challenge_is_a_protocol_error(
    gw: RunningGateway, reason: int, method: str
) -> None:
    client = raw(gw)
    scram = ScramClient("alice", "wonderland")
    challenge = start(client, scram)
    final = scram.final(challenge.properties["authentication_data"])
    client.send(mb.gen_auth(reason, properties=auth_props(final, method)))
    client.expect_closed(packet_type=PacketType.CONNACK, reason_code=0x82, require_reason=True)


def test_reauthentication(gw: RunningGateway) -> None:
    client = scram_connect(gw, "alice", "wonderland")
    try:
        scram = ScramClient("alice", "wonderland")
        client.send(mb.gen_auth(0x19, properties=auth_props(scram.first())))
        challenge = client.expect_packet(PacketType.AUTH, reason_code=0x18)
        answer(client, scram, challenge)
        done = client.expect_packet(PacketType.AUTH, reason_code=0x00)
        assert done.properties["authentication_method"] == METHOD
        assert scram.verify(done.properties["authentication_data"]) is True
        client.ping()  # still connected
    finally:
        client.disconnect()


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("bob", "builder")])
def test_failed_reauthentication_disconnects_with_0x87(
    gw: RunningGateway, user: str, password: str
) -> None:
    """A wrong password, or another user than the connection's."""
    client = scram_connect(gw, "alice", "wonderland")
    scram = ScramClient(user, password)
    client.send(mb.gen_auth(0x19, properties=auth_props(scram.first())))
    answer(client, scram, client.expect_packet(PacketType.AUTH, reason_code=0x18))
    client.expect_closed(reason_code=0x87, require_reason=True)


def test_reauthentication_with_another_method_is_a_protocol_error(gw: RunningGateway) -> None:
    client = scram_connect(gw, "alice", "wonderland")
    client.send(mb.gen_auth(0x19, properties=auth_props(b"n,,n=alice,r=x", "OTHER")))
    client.expect_closed(reason_code=0x82, require_reason=True)


@pytest.mark.parametrize("writes", [1, 2], ids=["one-write", "two-writes"])
def test_a_second_reauthentication_while_one_runs_is_a_protocol_error(
    gw: RunningGateway, writes: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Two AUTH 0x19 in a row: the second, whether it arrives in the same read (the
    first's task not started yet) or after the first's challenge, is a protocol error
    (DISCONNECT 0x82, MQTT 5.0 4.12.1), not an internal error."""
    client = scram_connect(gw, "alice", "wonderland")
    scram = ScramClient("alice", "wonderland")
    reauth = mb.gen_auth(0x19, properties=auth_props(scram.first()))
    if writes == 1:
        client.send(reauth + reauth)
    else:
        client.send(reauth)
        client.expect_packet(PacketType.AUTH, reason_code=0x18)
        client.send(reauth)
    client.expect_closed(reason_code=0x82, require_reason=True)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def test_a_connect_closed_before_its_deferred_decision_starts_leaves_no_warning(
    gw: RunningGateway,
) -> None:
    """A SCRAM CONNECT is decided in a task; a second CONNECT in the same read closes the
    connection (CONNACK 0x82) before that task first runs. Its decision is dropped
    without 'RuntimeWarning: coroutine ... was never awaited'."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            client = raw(gw)
            scram = ScramClient("alice", "wonderland")
            connect = mb.gen_connect(cid(), proto_ver=5, properties=auth_props(scram.first()))
            client.send(connect + connect)
            client.expect_closed(
                packet_type=PacketType.CONNACK, reason_code=0x82, require_reason=True
            )
            client.close()
        wait_until(
            lambda: gw.call(lambda: len(gw.broker.connections)) == 0, what="connections closed"
        )
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


def test_auth_0x18_outside_an_exchange_is_a_protocol_error(gw: RunningGateway) -> None:
    client = scram_connect(gw, "alice", "wonderland")
    client.send(mb.gen_auth(0x18, properties=auth_props(b"c=biws")))
    client.expect_closed(reason_code=0x82, require_reason=True)


@pytest.mark.parametrize(
    "auth",
    [{"scram": False}, {}],
    ids=["scram-off", "no-password-file"],
)
def test_scram_not_offered(tmp_path: Path, auth: dict[str, object]) -> None:
    if auth:
        auth["password_file"] = str(password_file(tmp_path / "passwd", {"alice": "x"}))
    with security_gateway(tmp_path, {"auth": auth}) as gateway:
        client = raw(gateway)
        scram = ScramClient("alice", "x")
        client.send(mb.gen_connect(cid(), proto_ver=5, properties=auth_props(scram.first())))
        client.expect_closed(packet_type=PacketType.CONNACK, reason_code=0x8C, require_reason=True)
