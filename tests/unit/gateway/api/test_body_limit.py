"""``BodyLimit``: request bodies over the limit are refused with 413, unread."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import Message, Scope

from gateway.api.app import DRAIN_LIMIT, BodyLimit, body_limit
from tests.unit.gateway.api.asgi_apps import echo_length


def call(
    chunks: list[bytes],
    content_length: int | None,
    limit: int = 10,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, Any, int]:
    """Status, JSON body and the number of body chunks left unread."""
    headers = [] if content_length is None else [(b"content-length", str(content_length).encode())]
    headers += extra or []
    scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    inbox = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return inbox.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(BodyLimit(echo_length, limit)(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, json.loads(body), len(inbox)


TOO_LARGE = {"detail": "request body larger than 10 bytes"}


def test_small_bodies_pass() -> None:
    assert call([b"12345", b"67890"], 10) == (200, 10, 0)
    assert call([b"12345", b"67890"], None) == (200, 10, 0)


def test_a_large_content_length_is_refused_and_the_body_drained() -> None:
    """Read and discarded, so that a client still sending it is not reset."""
    assert call([b"123456", b"78901"], 11) == (413, TOO_LARGE, 0)


def test_a_body_past_the_drain_limit_is_refused_unread() -> None:
    assert call([b"x"], DRAIN_LIMIT + 1) == (413, TOO_LARGE, 1)


def test_a_client_expecting_100_continue_is_refused_unread() -> None:
    assert call([b"x"], 11, extra=[(b"expect", b"100-Continue")]) == (413, TOO_LARGE, 1)


def test_a_bad_content_length_is_refused() -> None:
    assert call([b"x"], -1) == (413, TOO_LARGE, 1)


def test_a_chunked_body_growing_past_the_limit_is_refused_and_drained() -> None:
    assert call([b"123456", b"789012"], None) == (413, TOO_LARGE, 0)
    assert call([b"123456", b"789012", b"345"], None) == (413, TOO_LARGE, 0)


def test_the_limit_fits_one_largest_message_in_base64() -> None:
    assert body_limit(1_000_000) == 2_000_000 + 1024 * 1024
