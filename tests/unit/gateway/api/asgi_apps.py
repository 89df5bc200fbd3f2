"""Small ASGI applications for the unit tests of the API's middleware."""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

__all__ = ["echo_length"]


async def echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that reads the whole body and answers its length."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})
