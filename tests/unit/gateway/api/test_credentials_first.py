"""``CredentialsFirst``: a request without credentials is answered 401 from its head,
its body read only when small (and then discarded), the connection closed otherwise."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from starlette.types import Message, Scope

from gateway.api.app import UNAUTHENTICATED_DRAIN_LIMIT, CredentialsFirst
from gateway.api.credentials import Credentials
from tests.unit.gateway.api.asgi_apps import echo_length

KEY = "unit-key-0123456789abcdef"


def call(
    chunks: list[bytes], headers: list[tuple[bytes, bytes]], path: str = "/api/v1/publish"
) -> tuple[int, dict[bytes, bytes], Any, int]:
    """Status, headers, JSON body and the number of body chunks left unread."""
    app = SimpleNamespace(state=SimpleNamespace(credentials=Credentials({KEY: "key-0"}, {})))
    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": headers,
        "query_string": b"",
        "app": app,
    }
    inbox = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return inbox.pop(0) if inbox else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(CredentialsFirst(echo_length, frozenset({"/metrics"}))(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return sent[0]["status"], dict(sent[0]["headers"]), json.loads(body), len(inbox)


def length(n: int) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(n).encode())]


DENIED = {"detail": "missing or wrong credentials"}


def test_credentials_pass_the_request_on() -> None:
    auth = [(b"authorization", f"Bearer {KEY}".encode())]
    assert call([b"12345"], length(5) + auth)[::2] == (200, 5)


def test_a_large_body_is_not_read_and_the_connection_closed() -> None:
    status, headers, body, unread = call([b"x"], length(UNAUTHENTICATED_DRAIN_LIMIT + 1))
    assert (status, body, unread) == (401, DENIED, 1)
    assert headers[b"connection"] == b"close"
    assert headers[b"www-authenticate"] == b'Bearer realm="edgebus"'


def test_a_small_body_is_discarded_and_the_connection_kept() -> None:
    status, headers, body, unread = call([b"123", b"45"], length(5))
    assert (status, body, unread) == (401, DENIED, 0)
    assert b"connection" not in headers


def test_a_chunked_body_is_read_up_to_the_limit_only() -> None:
    chunked = [(b"transfer-encoding", b"chunked")]
    big = b"x" * (UNAUTHENTICATED_DRAIN_LIMIT // 2 + 1)
    status, headers, _, unread = call([big, big, big], chunked)
    assert (status, headers[b"connection"], unread) == (401, b"close", 1)
    status, headers, _, unread = call([b"abc"], chunked)
    assert (status, unread) == (401, 0)
    assert b"connection" not in headers


def test_a_client_expecting_100_continue_is_not_waited_for() -> None:
    status, headers, _, unread = call([b"x"], [*length(1), (b"expect", b"100-continue")])
    assert (status, headers[b"connection"], unread) == (401, b"close", 1)


def test_open_paths_need_no_credentials() -> None:
    assert call([b"12345"], length(5), path="/metrics")[::2] == (200, 5)
