"""Shared by the stream log tests: a gateway with the log enabled, reading it over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from tests.helpers.gateway import RunningGateway
from tests.integration.api.support import KEY, Http, Reply, bearer

__all__ = ["LOOPBACK", "STREAM", "arrow_of", "header", "http_of", "offsets_of", "records_of"]

STREAM = f"""
api:
  keys: ["{KEY}"]
stream:
  enabled: true
"""

#: A loopback adapter republishing ``raw/{room}`` to ``rooms/{room}``: messages of
#: another protocol than MQTT.
LOOPBACK = """
adapters:
  - type: loopback
    name: units
    mappings:
      - source: raw/{room}
        target: rooms/{room}
"""


def http_of(gw: RunningGateway) -> Http:
    address = gw.gateway.api_address
    assert address is not None
    return Http(f"http://{address[0]}:{address[1]}", bearer(KEY))


def offsets_of(http: Http) -> dict[str, int]:
    reply = http.get("/api/v1/stream/offsets")
    assert reply.status == 200, reply.text
    found: dict[str, int] = reply.json()
    return found


def records_of(http: Http, **query: Any) -> list[dict[str, Any]]:
    """``/stream/records`` as JSON lines, parsed."""
    reply = _records(http, {"limit": 1_000_000, **query})
    return [json.loads(line) for line in reply.text.splitlines()]


def arrow_of(http: Http, **query: Any) -> tuple[Reply, pa.Table]:
    reply = _records(http, {"limit": 1_000_000, **query, "format": "arrow"})
    assert header(reply, "content-type") == "application/vnd.apache.arrow.stream"
    return reply, pa.ipc.open_stream(reply.body).read_all()


def header(reply: Reply, name: str) -> str:
    """A response header, whatever the case of its name."""
    found = {key.lower(): value for key, value in reply.headers.items()}
    return found[name.lower()]


def _records(http: Http, query: dict[str, Any]) -> Reply:
    text = "&".join(f"{key}={value}" for key, value in query.items())
    reply = http.get(f"/api/v1/stream/records?{text}")
    assert reply.status == 200, reply.text
    return reply
