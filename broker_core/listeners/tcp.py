"""Plain TCP listener: asyncio servers whose protocol is ``MqttConnection``, one on each
address the listener's host resolves to (``listeners.binding``)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from typing import Any

from broker_core.listeners.binding import listening_sockets
from broker_core.listeners.connection import MqttConnection, Server
from broker_core.listeners.settings import ListenerSettings

__all__ = ["TcpListener", "start_tcp"]

log = logging.getLogger(__name__)


class TcpListener:
    """The servers of one ``tcp`` listener (``Listening``)."""

    def __init__(self, servers: Sequence[asyncio.Server]) -> None:
        self.servers = servers

    @property
    def sockets(self) -> list[Any]:
        return [sock for server in self.servers for sock in server.sockets]

    def close(self) -> None:
        for server in self.servers:
            server.close()

    async def wait_closed(self) -> None:
        for server in self.servers:
            await server.wait_closed()


async def start_tcp(
    broker: Server, host: str, port: int, settings: ListenerSettings, backlog: int = 1024
) -> TcpListener:
    loop = asyncio.get_running_loop()
    sockets = await listening_sockets(host, port, backlog)
    servers: list[asyncio.Server] = []
    try:
        for sock in sockets:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            servers.append(
                await loop.create_server(
                    lambda: MqttConnection(broker, settings, loop), sock=sock, backlog=backlog
                )
            )
            log.info("listener %s bound to %s", settings.name, sock.getsockname()[:2])
    except BaseException:
        for server in servers:
            server.close()
        for sock in sockets:
            sock.close()
        raise
    return TcpListener(servers)
