"""The authenticator chain (broker_core.auth) and the password file provider."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker_core.auth import AuthChain, AuthRequest, AuthResult, ListenerPolicy
from broker_core.auth_file import PasswordFileProvider
from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.passwords import PasswordFile, hash_password, write_password_file

OPEN = ListenerSettings("open", allow_anonymous=True)
CLOSED = ListenerSettings("closed", allow_anonymous=False)
CERT = ListenerSettings("cert", allow_anonymous=False, use_identity_as_username=True)


def request(
    username: str | None = None,
    password: bytes | None = None,
    listener: ListenerSettings = CLOSED,
    **extra: object,
) -> AuthRequest:
    return AuthRequest("c1", username, password, "10.0.0.7:4711", listener, 4, **extra)  # type: ignore[arg-type]


class Knows:
    """A provider that knows some users and records who it was asked about."""

    def __init__(self, users: dict[str, bytes]) -> None:
        self.users = users
        self.asked: list[str | None] = []

    async def check(self, req: AuthRequest) -> AuthResult | None:
        self.asked.append(req.username)
        if req.username not in self.users:
            return None
        if self.users[req.username] != req.password:
            return AuthResult.refuse(ReasonCode.BAD_USER_NAME_OR_PASSWORD)
        return AuthResult(True, username=req.username)


def decide(chain: AuthChain, req: AuthRequest) -> AuthResult:
    return asyncio.run(chain.authenticate(req))


@pytest.mark.parametrize(
    ("req", "allowed", "code", "username"),
    [
        (request(listener=OPEN), True, 0, None),
        (request(listener=CLOSED), False, ReasonCode.NOT_AUTHORIZED, None),
        # Without providers a username is only a name: the listener decides.
        (request("bob", b"x", listener=OPEN), True, 0, "bob"),
        (request("bob", b"x", listener=CLOSED), False, ReasonCode.NOT_AUTHORIZED, None),
        (request(listener=CERT, certificate_identity="dev1"), True, 0, "dev1"),
        (request(listener=CERT), False, ReasonCode.NOT_AUTHORIZED, None),
        (
            request(listener=OPEN, auth_method="GS2-KRB5"),
            False,
            ReasonCode.BAD_AUTHENTICATION_METHOD,
            None,
        ),
    ],
)
def test_listener_policy(req: AuthRequest, allowed: bool, code: int, username: str | None) -> None:
    result = decide(ListenerPolicy(), req)
    assert (result.allowed, result.reason_code, result.username) == (allowed, code, username)


def test_first_provider_that_knows_the_user_decides() -> None:
    first = Knows({"alice": b"a"})
    second = Knows({"alice": b"other", "bob": b"b"})
    chain = AuthChain([first, second])
    assert decide(chain, request("alice", b"a")).allowed is True
    assert decide(chain, request("alice", b"other")).reason_code == 0x86  # first decided
    assert decide(chain, request("bob", b"b")).allowed is True
    assert first.asked == ["alice", "alice", "bob"]
    assert second.asked == ["bob"]


def test_unknown_user_is_refused_even_where_anonymous_is_allowed() -> None:
    chain = AuthChain([Knows({"alice": b"a"})])
    result = decide(chain, request("mallory", b"x", listener=OPEN))
    assert result.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    assert decide(chain, request(listener=OPEN)).allowed is True  # anonymous: the listener
    assert decide(chain, request(listener=CLOSED)).reason_code == ReasonCode.NOT_AUTHORIZED


def test_certificate_identity_needs_no_password() -> None:
    provider = Knows({})
    chain = AuthChain([provider])
    result = decide(chain, request("ignored", b"x", listener=CERT, certificate_identity="dev1"))
    assert (result.allowed, result.username) == (True, "dev1")
    assert provider.asked == []
    # Without a certificate the username and password are checked as usual.
    assert decide(chain, request("ignored", b"x", listener=CERT)).reason_code == 0x86


class Method:
    method = "TEST"

    async def authenticate(self, req: AuthRequest) -> AuthResult:
        return AuthResult(True, username="m", auth_data=b"done")


class NoExchange:
    async def challenge(self, data: bytes | None) -> bytes | None:
        raise AssertionError("not used")


def test_enhanced_methods_are_looked_up_by_name() -> None:
    chain = AuthChain([], {"TEST": Method()})
    result = decide(chain, request(auth_method="TEST", exchange=NoExchange()))
    assert (result.allowed, result.username, result.auth_data) == (True, "m", b"done")
    other = decide(chain, request(auth_method="OTHER", exchange=NoExchange()))
    assert other.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD


@pytest.fixture
def provider(tmp_path: Path) -> PasswordFileProvider:
    path = tmp_path / "passwd"
    write_password_file(path, {"alice": hash_password("wonderland", 4096)})
    return PasswordFileProvider(PasswordFile(path))


@pytest.mark.parametrize(
    ("username", "password", "expected"),
    [
        ("alice", b"wonderland", (True, 0, "alice")),
        ("alice", b"wrong", (False, 0x86, None)),
        ("alice", None, (False, 0x86, None)),
        ("mallory", b"wonderland", None),
        (None, b"wonderland", None),
    ],
)
def test_password_file_provider(
    provider: PasswordFileProvider,
    username: str | None,
    password: bytes | None,
    expected: tuple[bool, int, str | None] | None,
) -> None:
    result = asyncio.run(provider.check(request(username, password)))
    if expected is None:
        assert result is None
    else:
        assert result is not None
        assert (result.allowed, result.reason_code, result.username) == expected


def test_peer_host() -> None:
    assert request().peer_host == "10.0.0.7"
    assert AuthRequest("c", None, None, "::1:5000", OPEN, 5).peer_host == "::1"
    assert AuthRequest("c", None, None, None, OPEN, 5).peer_host is None
