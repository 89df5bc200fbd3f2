"""Username and password against the password file; anonymous access per listener."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.helpers.gateway import RunningGateway
from tests.integration.security.support import (
    connect_raw,
    paho_login,
    password_file,
    security_gateway,
)

BAD_CREDENTIALS = {4: 4, 5: 0x86}  # 3.1.1 CONNACK return code / MQTT 5 reason code
NOT_AUTHORIZED = {4: 5, 5: 0x87}
BOTH = pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])

_ids = itertools.count(1)


def cid() -> str:
    return f"pw{next(_ids)}"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    tmp = tmp_path_factory.mktemp("password-auth")
    users = password_file(tmp / "passwd", {"alice": "wonderland", "bob": "builder"})
    config = {
        "listeners": [
            {"type": "tcp", "name": "open", "bind": "127.0.0.1:0", "allow_anonymous": True},
            {"type": "tcp", "name": "closed", "bind": "127.0.0.1:0", "allow_anonymous": False},
        ],
        "auth": {"password_file": str(users)},
    }
    with security_gateway(tmp, config) as gateway:
        yield gateway


@BOTH
@pytest.mark.parametrize("listener", ["open", "closed"])
def test_good_user_connects_with_paho(gw: RunningGateway, proto: int, listener: str) -> None:
    with paho_login(gw, proto, cid(), "alice", "wonderland", listener) as client:
        assert client.connect().reason_code == 0
        assert client.subscribe("t/x", 1) == [1]


@BOTH
@pytest.mark.parametrize("listener", ["open", "closed"])
def test_wrong_password(gw: RunningGateway, proto: int, listener: str) -> None:
    client, _ = connect_raw(
        gw,
        proto,
        cid(),
        listener=listener,
        username="alice",
        password="builder",
        expect_code=BAD_CREDENTIALS[proto],
    )
    client.expect_closed(packet_type=None)


@BOTH
@pytest.mark.parametrize("listener", ["open", "closed"])
def test_unknown_user(gw: RunningGateway, proto: int, listener: str) -> None:
    """Even where anonymous clients are welcome, a username must be a valid one."""
    client, _ = connect_raw(
        gw,
        proto,
        cid(),
        listener=listener,
        username="mallory",
        password="wonderland",
        expect_code=BAD_CREDENTIALS[proto],
    )
    client.expect_closed(packet_type=None)


@BOTH
def test_known_user_without_password(gw: RunningGateway, proto: int) -> None:
    client, _ = connect_raw(
        gw, proto, cid(), listener="closed", username="bob", expect_code=BAD_CREDENTIALS[proto]
    )
    client.expect_closed(packet_type=None)


@BOTH
def test_paho_sees_bad_credentials(gw: RunningGateway, proto: int) -> None:
    with paho_login(gw, proto, cid(), "alice", "nope", "closed") as client:
        connack = client.connect(expect_success=False)
        assert connack.reason_code == 0x86  # paho maps 3.1.1 return code 4 to 0x86


@BOTH
def test_anonymous_access_is_per_listener(gw: RunningGateway, proto: int) -> None:
    client, _ = connect_raw(gw, proto, cid(), listener="open")
    client.disconnect()
    refused, _ = connect_raw(gw, proto, cid(), listener="closed", expect_code=NOT_AUTHORIZED[proto])
    refused.expect_closed(packet_type=None)


def test_authenticated_username_is_the_origin(gw: RunningGateway) -> None:
    with paho_login(gw, 5, "whoami", "bob", "builder", "closed") as client:
        client.connect()
        origins = gw.call(
            lambda: [
                conn.session.origin
                for conn in gw.broker.connections
                if conn.session.origin.name == "whoami"
            ]
        )
        assert [origin.username for origin in origins] == ["bob"]


def test_embedded_defaults_listen_on_loopback_only() -> None:
    from gateway.config import GatewayConfig

    listeners = GatewayConfig().listeners
    assert [(listener.bind.host, listener.allow_anonymous) for listener in listeners] == [
        ("127.0.0.1", True),
        ("127.0.0.1", True),
    ]
