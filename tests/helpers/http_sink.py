"""A real HTTP server on 127.0.0.1:0, in its own thread, that records what is posted to it.

    with HttpSink() as sink:               # answers 200 to every POST
        url = sink.url("/hook")
        ...
        requests = sink.wait_for(3)        # bounded wait for 3 requests
        requests[0].json(), requests[0].headers["X-Edgebus-Signature"]

``status`` sets the answer (e.g. 500 to make the sender retry), ``headers`` headers
added to it (``{"Location": ...}`` with a 302); ``tls`` (a server ``ssl.SSLContext``)
serves HTTPS. Every method is recorded (``Request.method``), not only POST. ``StalledSink`` accepts
connections and never answers: a dead endpoint for timeouts.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers.timeouts import unit

__all__ = ["HttpSink", "Request", "StalledSink"]


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    method: str = "POST"

    def json(self) -> Any:
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client closing its keep-alive connection is not news


class HttpSink:
    def __init__(
        self,
        status: int = 200,
        tls: ssl.SSLContext | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.headers = dict(headers or {})
        self.scheme = "http" if tls is None else "https"
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or "0")
                body = self.rfile.read(length)
                with sink._lock:
                    request = Request(self.path, dict(self.headers), body, self.command)
                    sink.requests.append(request)
                    status = sink.status
                self.send_response(status)
                for name, value in sink.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = _Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str = "/") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def received(self, path: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def wait_for(self, count: int, path: str | None = None, timeout: float = 5) -> list[Request]:
        deadline = time.monotonic() + unit(timeout)
        while time.monotonic() < deadline:
            found = self.received(path)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{len(self.received(path))} requests to {path}, expected {count}")

    def __enter__(self) -> HttpSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class StalledSink:
    """Accepts TCP connections and never reads or answers."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(1000)
        self.port = self._socket.getsockname()[1]

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> StalledSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self._socket.close()
