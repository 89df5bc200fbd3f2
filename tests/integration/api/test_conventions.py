"""What docs/api.md "Conventions" says of edge cases, over HTTP:

- a publish ``topic`` is 422 (the request description) when empty, with NUL or longer
  than 65535 characters, and 400 when over 65535 bytes of UTF-8 in fewer characters;
- query-string booleans take FastAPI's forms (``yes``, ``1``, ``on``...);
- a head the server cannot parse is uvicorn's text/plain 400, the connection closed;
- a topic level ``..`` sent as ``%2E%2E`` reaches the API as it is.
"""

from __future__ import annotations

import socket

import pytest

from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.api.support import Http


@pytest.mark.parametrize(
    ("topic", "status"),
    [("", 422), ("a\0b", 422), ("a" * 65536, 422), ("é" * 32768, 400), ("é" * 40000, 400)],
)
def test_a_publish_topic_is_422_or_400_as_documented(http: Http, topic: str, status: int) -> None:
    reply = http.post("/api/v1/publish", {"topic": topic, "payload": "x"})
    assert reply.status == status
    if status == 400:
        assert "at most 65535 bytes of UTF-8" in reply.json()["detail"]


def test_query_booleans_take_fastapis_forms(http: Http) -> None:
    for value in ("true", "1", "yes", "on", "t", "y", "YES", "false", "0", "no", "off", "f", "n"):
        assert http.get(f"/api/v1/clients?connected={value}").status == 200, value
    assert http.get("/api/v1/clients?connected=maybe").status == 422


def _exchange(gw: RunningGateway, data: bytes) -> bytes:
    address = gw.gateway.api_address
    assert address is not None
    with socket.create_connection(address, timeout=unit(10)) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):  # the server closes the connection
            answer += chunk
    return answer


def test_a_head_the_server_cannot_parse_is_a_text_400(gw: RunningGateway) -> None:
    for head in (b"GARBAGE\r\n\r\n", b"GET /api/v1/broker HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n"):
        answer = _exchange(gw, head)
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert b"content-type: text/plain" in answer.lower()
        assert answer.endswith(b"Invalid HTTP request received.")


def test_a_dot_segment_level_is_sent_percent_encoded(http: Http) -> None:
    reply = http.post("/api/v1/publish", {"topic": "a/../b", "payload": "x", "retain": True})
    assert reply.status == 200
    reply = http.get("/api/v1/retained/a/%2E%2E/b")
    assert (reply.status, reply.json()["topic"]) == (200, "a/../b")
    assert http.get("/api/v1/retained/b").status == 404
