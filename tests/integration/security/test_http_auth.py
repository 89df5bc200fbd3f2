"""Authentication by an HTTP service: the request, allow / deny / unavailable, the cache."""

from __future__ import annotations

import asyncio
import itertools
import socket
from pathlib import Path

import pytest

from broker_core.auth import AuthRequest
from broker_core.auth_http import HttpAuthProvider
from broker_core.listeners.settings import ListenerSettings
from tests.integration.security.support import (
    AuthService,
    auth_service,
    connect_raw,
    password_file,
    security_gateway,
)

BOTH = pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])
ANSWERS = {"good": 200, "nocontent": 204, "bad": 401, "forbidden": 403, "broken": 500}

_ids = itertools.count(1)


def cid() -> str:
    return f"http{next(_ids)}"


def http_config(service_url: str, **http: object) -> dict[str, object]:
    return {
        "listeners": [
            {"type": "tcp", "name": "closed", "bind": "127.0.0.1:0", "allow_anonymous": False}
        ],
        "auth": {"http": {"url": service_url, "timeout": "5s", **http}},
    }


@BOTH
@pytest.mark.parametrize(
    ("username", "v311", "v5"),
    [
        ("good", 0, 0),
        ("nocontent", 0, 0),
        ("bad", 4, 0x86),
        ("forbidden", 5, 0x87),
        ("broken", 3, 0x88),
    ],
)
def test_status_decides(tmp_path: Path, proto: int, username: str, v311: int, v5: int) -> None:
    with (
        auth_service(ANSWERS) as service,
        security_gateway(tmp_path, http_config(service.url)) as gw,
    ):
        client, _ = connect_raw(
            gw,
            proto,
            cid(),
            username=username,
            password="pw",
            expect_code=v5 if proto == 5 else v311,
        )
        client.close()


@BOTH
def test_post_carries_the_client_as_json(tmp_path: Path, proto: int) -> None:
    config = http_config("", headers={"Authorization": "Bearer t0ken"})
    with auth_service(ANSWERS) as service:
        config["auth"]["http"]["url"] = service.url  # type: ignore[index]
        with security_gateway(tmp_path, config) as gw:
            client, _ = connect_raw(gw, proto, "dev-7", username="good", password="s3cret")
            client.disconnect()
        [seen] = service.seen()
    assert seen["method"] == "POST"
    assert seen["headers"]["Content-Type"].startswith("application/json")
    assert seen["headers"]["Authorization"] == "Bearer t0ken"
    fields = {k: v for k, v in seen.items() if k not in ("method", "headers")}
    assert fields == {
        "clientid": "dev-7",
        "username": "good",
        "password": "s3cret",
        "peerhost": "127.0.0.1",
        "protocol": proto,
        "listener": "closed",
    }


def test_get_carries_the_client_as_query_parameters(tmp_path: Path) -> None:
    with auth_service(ANSWERS) as service:
        with security_gateway(tmp_path, http_config(service.url, method="get")) as gw:
            client, _ = connect_raw(gw, 4, "dev-8", username="good", password="pw")
            client.disconnect()
        [seen] = service.seen()
    assert seen["method"] == "GET"
    fields = {k: v for k, v in seen.items() if k not in ("method", "headers")}
    assert fields == {
        "clientid": "dev-8",
        "username": "good",
        "password": "pw",
        "peerhost": "127.0.0.1",
        "protocol": "4",
        "listener": "closed",
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@BOTH
def test_unreachable_service_is_server_unavailable(tmp_path: Path, proto: int) -> None:
    url = f"http://127.0.0.1:{closed_port()}/auth"
    with security_gateway(tmp_path, http_config(url)) as gw:
        for _ in range(2):  # not cached: asked again, unavailable again
            client, _ = connect_raw(
                gw,
                proto,
                cid(),
                username="good",
                password="pw",
                expect_code=0x88 if proto == 5 else 3,
            )
            client.close()


def test_answers_are_cached_per_credentials(tmp_path: Path) -> None:
    with (
        auth_service(ANSWERS) as service,
        security_gateway(tmp_path, http_config(service.url, cache_ttl="1h")) as gw,
    ):
        for _ in range(3):
            client, _ = connect_raw(gw, 5, "same", username="good", password="pw")
            client.disconnect()
        assert len(service.seen()) == 1
        for _ in range(2):
            client, _ = connect_raw(gw, 5, "same", username="bad", password="pw", expect_code=0x86)
            client.close()
        assert len(service.seen()) == 2  # a refusal is cached too
        client, _ = connect_raw(gw, 5, "same", username="good", password="other")
        client.disconnect()
        client, _ = connect_raw(gw, 5, "another", username="good", password="pw")
        client.disconnect()
        assert len(service.seen()) == 4  # another password, another client id: asked


def test_cache_ttl_zero_asks_every_time(tmp_path: Path) -> None:
    with (
        auth_service(ANSWERS) as service,
        security_gateway(tmp_path, http_config(service.url, cache_ttl=0)) as gw,
    ):
        for _ in range(3):
            client, _ = connect_raw(gw, 4, "same", username="good", password="pw")
            client.disconnect()
        assert len(service.seen()) == 3


def test_password_file_first_then_the_service(tmp_path: Path) -> None:
    """The first provider that knows the user decides: the file's users never reach HTTP."""
    users = password_file(tmp_path / "passwd", {"good": "from-the-file"})
    config = http_config("")
    with auth_service(ANSWERS) as service:
        config["auth"] = {"password_file": str(users), "http": {"url": service.url}}
        with security_gateway(tmp_path, config) as gw:
            # in the file: the file decides, even against the service's answer
            client, _ = connect_raw(gw, 5, cid(), username="good", password="from-the-file")
            client.disconnect()
            client, _ = connect_raw(gw, 5, cid(), username="good", password="pw", expect_code=0x86)
            client.close()
            assert service.seen() == []
            # not in the file: the service decides
            client, _ = connect_raw(
                gw, 5, cid(), username="forbidden", password="pw", expect_code=0x87
            )
            client.close()
            # anonymous: the listener decides, nobody is asked
            client, _ = connect_raw(gw, 5, cid(), expect_code=0x87)
            client.close()
        assert [seen["username"] for seen in service.seen()] == ["forbidden"]


# -- the provider alone: cache expiry and bounds with a controlled clock -------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def ask(provider: HttpAuthProvider, username: str) -> int:
    request = AuthRequest("c1", username, b"pw", "127.0.0.1:1", ListenerSettings(), 5)
    return (await provider.check(request)).reason_code


def test_cache_entries_expire_and_are_bounded() -> None:
    clock = Clock()

    async def scenario(service: AuthService) -> None:
        provider = HttpAuthProvider(service.url, cache_ttl_s=60, cache_size=2, clock=clock)
        try:
            assert await ask(provider, "good") == 0
            assert await ask(provider, "good") == 0
            assert len(service.seen()) == 1
            clock.now += 61
            assert await ask(provider, "good") == 0
            assert len(service.seen()) == 2  # expired: asked again
            assert await ask(provider, "bad") == 0x86
            assert await ask(provider, "forbidden") == 0x87  # evicts "good", least recent
            assert await ask(provider, "bad") == 0x86
            assert len(service.seen()) == 4
            assert await ask(provider, "good") == 0
            assert len(service.seen()) == 5
        finally:
            await provider.aclose()

    with auth_service(ANSWERS) as service:
        asyncio.run(scenario(service))


def test_cache_is_bounded_in_bytes_whatever_the_user_names() -> None:
    # Allowed answers keep the user name; long ones fill the byte bound before the
    # entry bound, and the least recently used go. Keys are digests: a long client id
    # or user name costs the key nothing.
    clock = Clock()
    names = [f"{i}" + "u" * 10_000 for i in range(5)]

    async def scenario(service: AuthService) -> None:
        provider = HttpAuthProvider(
            service.url, cache_ttl_s=60, cache_size=100, cache_bytes=25_000, clock=clock
        )
        try:
            for name in names:
                assert await ask(provider, name) == 0
            entries, size = provider.cached
            assert entries == 2  # 2 x (10,001 + ENTRY_BYTES) <= 25,000
            assert size <= 25_000
            asked = len(service.seen())
            assert await ask(provider, names[-1]) == 0  # still cached
            assert await ask(provider, names[0]) == 0  # was evicted: asked again
            assert len(service.seen()) == asked + 1
            provider.clear_cache()
            assert provider.cached == (0, 0)
        finally:
            await provider.aclose()

    with auth_service(dict.fromkeys(names, 200)) as service:
        asyncio.run(scenario(service))
