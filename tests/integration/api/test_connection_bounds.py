"""The API's connections are bounded, through a running gateway and raw sockets: at most
``api.max_connections`` open (one more is answered 503 at once), a request's head and
body within ``api.request_timeout`` (408, closed), and no body read before the
credentials (401 as soon as the head has arrived)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import KEY, Http

AUTH = f"Authorization: Bearer {KEY}\r\n"


def connect(gw: RunningGateway) -> socket.socket:
    address = gw.gateway.api_address
    assert address is not None
    sock = socket.create_connection(address, timeout=unit(10))
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one response; ``(0, {}, b"")``
    when the connection closes, or nothing comes within the socket's timeout, first."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return 0, {}, b""
            data += chunk
    except TimeoutError:
        return 0, {}, b""
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(status_line.split()[1]), headers, body


def closed(sock: socket.socket) -> bool:
    """The server closed the connection (within the socket's timeout)."""
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def scrape(http: Http, name: str) -> float:
    """The value of the Prometheus sample ``name`` (labels included), retrying while
    the API refuses connections."""
    deadline = time.monotonic() + unit(10)
    while True:
        reply = http.get("/metrics")
        if reply.status == 200 or time.monotonic() > deadline:
            break
        time.sleep(unit(0.05))
    assert reply.status == 200
    for line in reply.text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {name}")


def hold(gw: RunningGateway) -> socket.socket:
    """A connection that made one request and holds a second one half sent (kept open
    by the server as long as its head may still come)."""
    sock = connect(gw)
    sock.sendall(f"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n".encode())
    status, _, _ = read_response(sock)
    assert status == 200
    sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
    return sock


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[RunningGateway]:
    config = API_CONFIG + "  max_connections: 3\n  request_timeout: 60s\n"
    with running_gateway(tmp_path, config) as gateway:
        assert http_of(gateway).get("/api/v1/health").status == 200  # loads the API
        yield gateway


def test_a_connection_past_max_connections_is_answered_503_and_closed(
    limited: RunningGateway,
) -> None:
    held = [hold(limited) for _ in range(3)]
    try:
        extra = connect(limited)
        with extra:
            status, headers, body = read_response(extra)  # nothing sent: answered at once
            assert status == 503
            assert headers["connection"] == "close"
            assert b"api.max_connections: 3" in body
            assert closed(extra)
        # The held ones are still served.
        held[0].sendall(f"{AUTH}\r\n".encode())
        assert read_response(held[0])[0] == 200
        held.pop().close()  # room for the scrape
        http = http_of(limited)
        assert scrape(http, "edgebus_api_connections_refused_total") >= 1
        assert scrape(http, "edgebus_api_max_connections") == 3
        assert scrape(http, "edgebus_api_connections") == 3  # two held, the scrape
    finally:
        for sock in held:
            sock.close()


@pytest.fixture
def impatient(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, API_CONFIG + "  request_timeout: 1s\n") as gateway:
        assert http_of(gateway).get("/api/v1/health").status == 200  # loads the API
        yield gateway


def test_a_stalled_head_is_answered_408_and_closed(impatient: RunningGateway) -> None:
    with connect(impatient) as sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaa")
        status, headers, body = read_response(sock)
        assert status == 408
        assert headers["connection"] == "close"
        assert b"api.request_timeout" in body
        assert closed(sock)
    with connect(impatient) as silent:  # sends nothing: closed without an answer
        assert read_response(silent) == (0, {}, b"")
    assert scrape(http_of(impatient), 'edgebus_api_request_timeouts_total{part="head"}') == 2


def test_a_stalled_body_is_answered_408_and_closed(impatient: RunningGateway) -> None:
    with connect(impatient) as sock:
        sock.sendall(
            f"POST /api/v1/publish HTTP/1.1\r\nHost: x\r\n{AUTH}"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            '{"topic": "a", '.encode()
        )
        status, headers, _ = read_response(sock)
        assert status == 408
        assert headers["connection"] == "close"
        assert closed(sock)
    assert scrape(http_of(impatient), 'edgebus_api_request_timeouts_total{part="body"}') == 1


def test_a_kept_alive_connection_is_timed_for_its_next_head(impatient: RunningGateway) -> None:
    with connect(impatient) as sock:
        for _ in range(2):  # each request within the timeout: served
            sock.sendall(f"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n".encode())
            assert read_response(sock)[0] == 200
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\n")
        assert read_response(sock)[0] == 408
        assert closed(sock)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, API_CONFIG) as gateway:
        assert http_of(gateway).get("/api/v1/health").status == 200  # loads the API
        yield gateway


@pytest.mark.parametrize("auth", ["", "Authorization: Bearer wrong-key-0123456789abcdef\r\n"])
def test_an_unauthenticated_body_is_answered_401_before_it_is_sent(
    gateway: RunningGateway, auth: str
) -> None:
    """Only the head goes out: the 401 comes without the server waiting for the 3 MB."""
    with connect(gateway) as sock:
        sock.sendall(
            f"POST /api/v1/publish HTTP/1.1\r\nHost: x\r\n{auth}"
            "Content-Type: application/json\r\nContent-Length: 3000000\r\n\r\n".encode()
        )
        status, headers, body = read_response(sock)
        assert status == 401
        assert body == b'{"detail":"missing or wrong credentials"}'
        assert headers["www-authenticate"].startswith('Bearer realm="edgebus"')
        assert headers["connection"] == "close"
        assert closed(sock)


def test_an_unauthenticated_small_body_is_read_and_the_connection_kept(
    gateway: RunningGateway,
) -> None:
    """A small body is discarded before the 401, as a client sending it first expects,
    and the connection serves the next request."""
    with connect(gateway) as sock:
        body = b'{"topic": "a", "payload": "x"}'
        sock.sendall(
            b"POST /api/v1/publish HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status, headers, _ = read_response(sock)
        assert status == 401
        assert "connection" not in headers
        sock.sendall(f"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n".encode())
        assert read_response(sock)[0] == 200


def test_an_authenticated_body_is_still_served(gateway: RunningGateway) -> None:
    with connect(gateway) as sock:
        body = b'{"topic": "a", "payload": "x"}'
        sock.sendall(
            f"POST /api/v1/publish HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert read_response(sock)[0] == 200
