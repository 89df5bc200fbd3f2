"""Helpers of the security integration tests: password files, gateways with security
configuration, raw and paho clients with credentials, and a local HTTP auth service.

Every wait is bounded and written in timeout units (``tests.helpers.timeouts.unit``).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from broker_core.passwords import MIN_ITERATIONS, hash_password, write_password_file
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient

__all__ = [
    "AuthService",
    "auth_service",
    "connect_raw",
    "paho_login",
    "password_file",
    "security_gateway",
]

# The lowest cost the file format accepts keeps the tests fast; the format is the same.
FAST = MIN_ITERATIONS


def password_file(path: Path, users: dict[str, str]) -> Path:
    write_password_file(path, {user: hash_password(pw, FAST) for user, pw in users.items()})
    return path


@contextlib.contextmanager
def security_gateway(tmp_path: Path, config: dict[str, Any]) -> Iterator[RunningGateway]:
    """A gateway with ``config`` (a dict, written as JSON, a subset of YAML) merged in.

    These tests fail logins from 127.0.0.1 on purpose, many times: unless ``config``
    says otherwise, failed logins are not throttled (test_login_throttle.py tests that).
    """
    auth = config.get("auth", {})
    if "login_throttle" not in auth:
        config = {**config, "auth": {**auth, "login_throttle": {"enabled": False}}}
    with running_gateway(tmp_path / "gw", json.dumps(config)) as gw:
        yield gw


def connect_raw(
    gw: RunningGateway,
    proto: int,
    client_id: str,
    *,
    listener: str | None = None,
    expect_code: int | None = 0,
    **connect_args: Any,
) -> tuple[RawClient, mb.Packet]:
    """A raw client that sent CONNECT; returns it and the CONNACK (code asserted)."""
    host, port = gw.address(listener)
    client = RawClient(host, port, protocol_level=proto)
    connack = client.do_connect(client_id, proto_ver=proto, expect_code=expect_code, **connect_args)
    return client, connack


@contextlib.contextmanager
def paho_login(
    gw: RunningGateway,
    proto: int,
    client_id: str,
    username: str | None,
    password: str | None,
    listener: str | None = None,
) -> Iterator[PahoClient]:
    """A paho client that has sent CONNECT with these credentials (not asserted)."""
    host, port = gw.address(listener)
    client = PahoClient(host, port, proto, client_id)
    if username is not None:
        client.client.username_pw_set(username, password)
    try:
        yield client
    finally:
        client.close()


@dataclass
class AuthService:
    """A local HTTP authentication service: answers by username, records requests."""

    url: str
    answers: dict[str, int]
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)


@contextlib.contextmanager
def auth_service(answers: dict[str, int], default: int = 401) -> Iterator[AuthService]:
    """``answers`` maps usernames to the HTTP status to answer; others get ``default``."""
    service: AuthService

    def record_and_answer(handler: BaseHTTPRequestHandler, fields: dict[str, Any]) -> None:
        with service.lock:
            service.requests.append(
                {"method": handler.command, "headers": dict(handler.headers), **fields}
            )
        status = service.answers.get(str(fields.get("username")), default)
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            record_and_answer(self, json.loads(self.rfile.read(length) or b"{}"))

        def do_GET(self) -> None:
            record_and_answer(self, dict(parse_qsl(urlsplit(self.path).query)))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    service = AuthService(f"http://127.0.0.1:{port}/mqtt/auth", answers)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
        thread.join(unit(5))
