"""Addresses the gateway listens on: a port it cannot have, named in one clear line.

``BindError`` names the listener (or the API) and its ``bind`` key, so the CLI prints
``edgebus.yaml:4 listeners[0].bind: listener 'tcp:127.0.0.1:1883' cannot listen on
127.0.0.1:1883: the address is already in use (another edgebus or MQTT broker?)``
instead of a raw ``[Errno 98]``.

``unavailable_addresses`` tries each configured address before ``edgebus run`` opens the
store or creates the API key, so a busy port stops it with nothing written; the real
bind reports the same way if the port is taken in between.
"""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING

from broker_core.listeners.binding import host_to_resolve
from gateway.config.address import BindAddress

if TYPE_CHECKING:
    from gateway.config import GatewayConfig
    from gateway.config.introspect import Loc

__all__ = ["BindError", "bind_error", "unavailable_addresses"]

_REASONS = {
    errno.EADDRINUSE: "the address is already in use (another edgebus or MQTT broker?)",
    errno.EACCES: "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
    errno.EADDRNOTAVAIL: "no network interface of this machine has that address",
}


class BindError(OSError):
    """Something configured at ``path`` (a ``bind`` key) could not listen."""

    def __init__(self, path: Loc, message: str, code: int | None) -> None:
        super().__init__(code, message)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return self.message


def _who(path: Loc, name: str | None) -> str:
    return "the HTTP API" if path[:1] == ("api",) else f"listener {name!r}"


def bind_error(path: Loc, name: str | None, address: BindAddress, exc: OSError) -> BindError:
    """``exc`` (from binding ``address``) as a ``BindError`` naming who and why."""
    reason = _REASONS.get(exc.errno or 0) or exc.strerror or str(exc)
    return BindError(path, f"{_who(path, name)} cannot listen on {address}: {reason}", exc.errno)


def _try_bind(address: BindAddress) -> OSError | None:
    try:
        infos = socket.getaddrinfo(
            host_to_resolve(address.host),
            address.port,
            type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE,
        )
    except OSError as exc:
        return exc
    family, kind, proto, _, sockaddr = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
    except OSError as exc:
        return exc
    return None


def unavailable_addresses(config: GatewayConfig) -> list[BindError]:
    """A ``BindError`` for every listener and API address that cannot be bound now."""
    wanted: list[tuple[Loc, str | None, BindAddress]] = [
        (("listeners", index, "bind"), listener.name, listener.bind)
        for index, listener in enumerate(config.listeners)
    ]
    if config.api.enabled:
        wanted.append((("api", "bind"), None, config.api.bind))
    errors = []
    for path, name, address in wanted:
        if address.port == 0:
            continue
        exc = _try_bind(address)
        if exc is not None:
            errors.append(bind_error(path, name, address, exc))
    return errors
