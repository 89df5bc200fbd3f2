"""Plain TCP listener: an asyncio server whose protocol is ``MqttConnection``."""

from __future__ import annotations

import asyncio
import logging
import socket

from broker_core.listeners.connection import MqttConnection, Server
from broker_core.listeners.settings import ListenerSettings

__all__ = ["start_tcp"]

log = logging.getLogger(__name__)


async def start_tcp(
    broker: Server, host: str, port: int, settings: ListenerSettings, backlog: int = 1024
) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: MqttConnection(broker, settings, loop),
        host,
        port,
        backlog=backlog,
        reuse_address=True,
    )
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log.info("listener %s bound to %s", settings.name, sock.getsockname()[:2])
    return server
