"""SCRAM-SHA-256 (broker_core.scram) against RFC 7677's example, and its failures."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path

import pytest

from broker_core.auth import AuthRequest
from broker_core.auth_scram import ScramAuthenticator
from broker_core.listeners.settings import ListenerSettings
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.passwords import (
    DEFAULT_ITERATIONS,
    PasswordFile,
    PasswordHash,
    hash_password,
    write_password_file,
)
from broker_core.scram import (
    ScramClient,
    ScramError,
    ScramServer,
    decode_saslname,
    encode_saslname,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_user() -> PasswordHash:
    salt = base64.b64decode(RFC_SALT)
    return PasswordHash(4096, salt, hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096))


def rfc_server(users: dict[str, PasswordHash] | None = None) -> ScramServer:
    table = {"user": rfc_user()} if users is None else users
    return ScramServer(table.get, nonce_factory=lambda: RFC_SERVER_NONCE)


def test_password_file_hash_is_the_rfc_salted_password() -> None:
    salt = base64.b64decode(RFC_SALT)
    assert hash_password("pencil", 4096, salt) == rfc_user()


def test_server_side_of_the_rfc_7677_example() -> None:
    server = rfc_server()
    assert server.client_first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.username == "user"
    assert server.client_final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL


def test_client_side_of_the_rfc_7677_example() -> None:
    client = ScramClient("user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.verify(RFC_SERVER_FINAL) is True
    assert client.verify(b"v=" + base64.b64encode(bytes(32))) is False


def test_client_and_server_agree() -> None:
    users = {"alice,=x": hash_password("pässword", 4096)}
    client = ScramClient("alice,=x", "pässword")
    server = ScramServer(users.get)
    server_final = server.client_final(client.final(server.client_first(client.first())))
    assert client.verify(server_final) is True
    assert server.username == "alice,=x"


def test_wrong_password_fails_at_the_proof() -> None:
    client = ScramClient("user", "pen", nonce=RFC_CLIENT_NONCE)
    server = rfc_server()
    final = client.final(server.client_first(client.first()))
    with pytest.raises(ScramError) as caught:
        server.client_final(final)
    assert caught.value.error == "invalid-proof"


def test_unknown_user_gets_a_plausible_challenge_then_fails() -> None:
    server = rfc_server({})
    first = server.client_first(b"n,,n=nobody,r=abc").decode()
    attrs = dict(part.split("=", 1) for part in first.split(","))
    assert len(base64.b64decode(attrs["s"])) == 16
    assert attrs["i"] == str(DEFAULT_ITERATIONS)
    again = rfc_server({}).client_first(b"n,,n=nobody,r=abc").decode()
    assert again.split(",")[1] == first.split(",")[1]  # the same made-up salt each time
    client = ScramClient("nobody", "x", nonce="abc")
    with pytest.raises(ScramError) as caught:
        server.client_final(client.final(first.encode()))
    assert caught.value.error == "invalid-proof"


@pytest.mark.parametrize(
    ("client_first", "error"),
    [
        (b"p=tls-unique,,n=user,r=abc", "channel-binding-not-supported"),
        (b"n,,m=ext,n=user,r=abc", "extensions-not-supported"),
        (b"x,,n=user,r=abc", "other-error"),
        (b"n,,r=abc,n=user", "other-error"),
        (b"n,,n=user", "other-error"),
        (b"n,,n=,r=abc", "other-error"),
        (b"n,,n=us=2Xer,r=abc", "invalid-username-encoding"),
        (b"n,a=admin,n=user,r=abc", "other-error"),
        (b"n,,n=user,r=", "other-error"),
        (b"\xff\xfe", "invalid-encoding"),
        (b"", "other-error"),
    ],
)
def test_bad_client_first(client_first: bytes, error: str) -> None:
    with pytest.raises(ScramError) as caught:
        rfc_server().client_first(client_first)
    assert caught.value.error == error


@pytest.mark.parametrize(
    ("client_final", "error"),
    [
        (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel-bindings-dont-match"),
        (RFC_CLIENT_FINAL.replace(b"hNlF$k0", b"hNlF$k1"), "other-error"),
        (RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=!Hzb"), "invalid-encoding"),
        (RFC_CLIENT_FINAL.split(b",p=")[0], "other-error"),
        (b"p=" + RFC_CLIENT_FINAL.split(b",p=")[1], "other-error"),
        (RFC_CLIENT_FINAL[:-8] + b"AAAA", "invalid-proof"),
    ],
)
def test_bad_client_final(client_final: bytes, error: str) -> None:
    server = rfc_server()
    server.client_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError) as caught:
        server.client_final(client_final)
    assert caught.value.error == error


def test_client_first_with_y_flag_and_matching_authzid() -> None:
    server = rfc_server()
    server.client_first(b"y,a=user,n=user,r=" + RFC_CLIENT_NONCE.encode())
    assert server.username == "user"


def test_saslname_escaping() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ScramError):
        decode_saslname("a=")


# -- the MQTT binding: ScramAuthenticator with a scripted AUTH exchange ---------------------


class ScriptedExchange:
    """Answers the server's challenge with what the client computes from it."""

    def __init__(self, client: ScramClient) -> None:
        self.client = client
        self.challenges: list[bytes | None] = []

    async def challenge(self, data: bytes | None) -> bytes | None:
        self.challenges.append(data)
        assert data is not None
        return self.client.final(data)


def scram_request(client: ScramClient, username: str | None = None) -> AuthRequest:
    return AuthRequest(
        "c1",
        username,
        None,
        "127.0.0.1:5000",
        ListenerSettings(allow_anonymous=False),
        5,
        auth_method="SCRAM-SHA-256",
        auth_data=client.first(),
        exchange=ScriptedExchange(client),
    )


@pytest.fixture
def passwords(tmp_path: Path) -> PasswordFile:
    path = tmp_path / "passwd"
    write_password_file(path, {"alice": hash_password("wonderland", 4096)})
    return PasswordFile(path)


def test_authenticator_accepts_and_returns_the_server_final(passwords: PasswordFile) -> None:
    client = ScramClient("alice", "wonderland")
    request = scram_request(client)
    result = asyncio.run(ScramAuthenticator(passwords).authenticate(request))
    assert result.allowed is True
    assert result.username == "alice"
    assert result.auth_data is not None
    assert client.verify(result.auth_data) is True


@pytest.mark.parametrize(
    ("user", "password", "connect_username"),
    [
        ("alice", "wrong", None),
        ("mallory", "wonderland", None),
        ("alice", "wonderland", "bob"),  # CONNECT names another user
    ],
)
def test_authenticator_refuses_with_0x86(
    passwords: PasswordFile, user: str, password: str, connect_username: str | None
) -> None:
    request = scram_request(ScramClient(user, password), connect_username)
    result = asyncio.run(ScramAuthenticator(passwords).authenticate(request))
    assert result.allowed is False
    assert result.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
