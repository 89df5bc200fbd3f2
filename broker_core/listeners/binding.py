"""Listening sockets bound by the project itself rather than by ``loop.create_server``:
the ``tcp`` listener, the ``tls`` listener (which accepts its own sockets,
``listeners.tls``) and the listeners whose server library loads with their first
connection (``gateway.lazy_listener``)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

__all__ = ["addresses", "bind_listening", "host_to_resolve", "listening_sockets"]

AddrInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, Any]


def host_to_resolve(host: str) -> str | bytes | None:
    """``host`` as ``getaddrinfo`` takes it: None for any address, an ASCII name or
    address as bytes. (A str is encoded with the IDNA codec, whose modules and Unicode
    tables, ~340 KB, a running gateway would then keep for nothing.)"""
    if not host:
        return None
    return host.encode("ascii") if host.isascii() else host


async def addresses(host: str, port: int) -> list[AddrInfo]:
    """What ``host:port`` resolves to for a passive TCP socket, each address once."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host_to_resolve(host), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    return list(dict.fromkeys(infos))


def bind_listening(info: AddrInfo, backlog: int, *, v6only: bool = False) -> socket.socket:
    """A listening, non-blocking socket on one resolved address; ``OSError`` when it
    cannot be bound (the socket is closed then)."""
    family, kind, proto, _, address = info
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if v6only and family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """A listening socket on every address ``host`` resolves to, as ``loop.create_server``
    binds them (IPv6 ones IPv6-only); with port 0, all on the port the first one got."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, name, address in await addresses(host, port):
            if sockets and port == 0:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sockets.append(
                bind_listening((family, kind, proto, name, address), backlog, v6only=True)
            )
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
