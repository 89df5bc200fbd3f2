"""``ApiServer``: uvicorn serving the API inside the gateway's event loop.

No thread and no process of its own: the constructor reads or creates the API key,
``start()`` binds the socket (so a busy port is an ``OSError`` at start-up, like a
listener's) and ``serve()`` runs as one task of the gateway's TaskGroup until
``stop()``. Uvicorn configures no logging (the CLI does), installs no signal handlers
(the CLI does) and runs no lifespan.

FastAPI, uvicorn and the app are loaded when the first connection arrives (the
listening socket becomes readable), not at start-up: they are about 13 MB of the
gateway's memory, which a device nobody queries does not pay. The import and the app's
construction run in a worker thread, so the event loop keeps serving MQTT meanwhile (it
shares the interpreter with the import, at Python's thread switch interval, instead of
stopping for it: about half a second on the 2-core dev machine, seconds on a loaded
one). That first request waits for it; uvicorn then accepts it from the same socket.
``load()`` does it at once (tests, the API's own documentation).

Connections are bounded (``api.max_connections``) and so is the time a request takes to
arrive (``api.request_timeout``): ``gateway.api.http_protocol`` serves them in place of
uvicorn's own h11 protocol. Requests still running (a client may go while its request
runs) are bounded too, by uvicorn's ``limit_concurrency``: past ``max_connections + 1``
of them a new request is answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gateway.api.connections import ApiConnections
from gateway.api.credentials import build_credentials
from gateway.config.address import BindAddress
from gateway.lazy_listener import FirstConnection, listening_socket

if TYPE_CHECKING:
    from gateway.api.components import GatewayView

__all__ = ["ApiServer", "bind_socket"]

log = logging.getLogger(__name__)

#: How long requests in progress may take to finish when the gateway stops.
GRACEFUL_SHUTDOWN_S = 5

#: Largest request line and headers (a longer one is refused with 400).
MAX_REQUEST_HEAD = 128 * 1024


async def bind_socket(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port`` (port 0: any free one)."""
    where = str(BindAddress(host, port))
    try:
        return await listening_socket(host, port, backlog)
    except OSError as exc:
        raise OSError(exc.errno, f"api.bind {where}: {exc.strerror or exc}") from exc


class ApiServer:
    def __init__(self, gateway: GatewayView) -> None:
        """Reads the API key file, or creates it (``ConfigError`` when it cannot), so
        that a problem shows before anything starts."""
        self.gateway = gateway
        config = gateway.config
        self.credentials = build_credentials(config.api, config.data_dir)
        self.connections = ApiConnections(
            max_connections=config.api.max_connections,
            request_timeout_s=config.api.request_timeout,
        )
        self.app: Any = None  # the FastAPI app, once loaded
        self.address: tuple[str, int] | None = None
        self._socket: socket.socket | None = None
        self._server: Any = None  # the uvicorn.Server, once loaded
        self._stopping = False
        self._first_connection = FirstConnection()

    async def start(self) -> None:
        """Binds the socket (``OSError`` when it cannot); ``serve()`` then serves."""
        bind = self.gateway.config.api.bind
        self._socket = sock = await bind_socket(bind.host, bind.port)
        host, port = sock.getsockname()[:2]
        self.address = (host, port)
        log.info("HTTP API listening on http://%s/api/v1", BindAddress(host, port))

    def load(self) -> None:
        """Imports FastAPI and uvicorn and builds the app and the server (once)."""
        if self._server is not None:
            return
        import uvicorn

        from gateway.api.app import create_app
        from gateway.api.http_protocol import protocol_class

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield  # the gateway's CLI owns SIGTERM / SIGINT / SIGHUP

        self.app = create_app(self.gateway, self.credentials, self.connections)
        self._server = Server(
            uvicorn.Config(
                self.app,
                http=protocol_class(self.connections),
                log_config=None,
                access_log=False,
                lifespan="off",
                ws="none",
                proxy_headers=False,
                server_header=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
                # Connections are bounded by the protocol; this bounds the requests
                # still running for clients gone (uvicorn counts its own open
                # connections too, at most max_connections here, hence the + 1).
                limit_concurrency=self.connections.max_connections + 1,
            )
        )

    async def serve(self) -> None:
        sock = self._socket
        if sock is None:
            raise RuntimeError("ApiServer.serve() before start()")
        try:
            if self._server is None:
                await self._first_connection.wait(sock)
                if self._stopping:
                    return
                await asyncio.to_thread(self.load)
            server = self._server
            try:
                await server.serve(sockets=[sock])
            finally:
                # Cancelled (the TaskGroup failed) rather than stopped: close what is open.
                for listening in getattr(server, "servers", ()):
                    listening.close()
        finally:
            sock.close()

    def stop(self) -> None:
        """Stops accepting requests; ``serve()`` returns once those in progress are done."""
        self._stopping = True
        self._first_connection.release()
        if self._server is not None:
            self._server.should_exit = True
