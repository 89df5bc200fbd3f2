"""Addresses bound twice in one configuration: an adapter's ``bind`` URL on the port of a
listener, of the HTTP API, or of another adapter's ``bind``.

The listeners and the API check each other (``GatewayConfig``); this adds the adapters'
``bind`` URLs (``tcp://host:port``, NNG's ``ws://host:port/path``, ``ipc://path``), which
the gateway would otherwise find taken only when the adapter starts, then retry forever.
It reads the adapters as written (every list entry of an adapter with a ``bind`` key), so
that it runs even when some other key of the file has a problem.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.config.address import BindAddress
from gateway.config.introspect import Loc
from gateway.config.shown import format_path

__all__ = ["Bound", "adapter_binds", "bind_problems"]

#: URL schemes whose ``bind`` takes a TCP port.
_TCP_SCHEMES = frozenset({"tcp", "ws"})
#: ZeroMQ's ``*`` and NNG's empty host: every address.
_EVERY_ADDRESS = {"*": "0.0.0.0", "": "0.0.0.0"}


@dataclass(frozen=True)
class Bound:
    """One thing bound: at YAML ``path``, shown as ``shown``; a TCP address or a path."""

    path: Loc
    shown: str
    address: BindAddress | None = None
    ipc_path: str | None = None

    def collides(self, other: Bound) -> bool:
        if self.address is not None and other.address is not None:
            return self.address.overlaps(other.address)
        return self.ipc_path is not None and self.ipc_path == other.ipc_path


def _endpoint(path: Loc, url: str) -> Bound | None:
    """The address ``url`` binds, or None (a URL with problems of its own, or another
    scheme)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme == "ipc" and "://" in url:
        where = url.removeprefix("ipc://")
        return Bound(path, url, ipc_path=os.path.abspath(where)) if where else None
    if parts.scheme not in _TCP_SCHEMES or port is None:
        return None
    host = parts.hostname or ""
    return Bound(path, url, address=BindAddress(_EVERY_ADDRESS.get(host, host), port))


def adapter_binds(adapters: object) -> Iterator[Bound]:
    """Every ``bind`` URL of the enabled adapters as written, in file order."""
    if not isinstance(adapters, Sequence) or isinstance(adapters, str):
        return
    for index, adapter in enumerate(adapters):
        if not isinstance(adapter, Mapping) or adapter.get("enabled") is False:
            continue  # a disabled adapter binds nothing
        for key, entries in adapter.items():
            if not isinstance(entries, list | tuple):
                continue
            for number, entry in enumerate(entries):
                if not isinstance(entry, Mapping):
                    continue
                bind: Any = entry.get("bind")
                at: Loc = ("adapters", index, key, number, "bind")
                if isinstance(bind, str):
                    found = _endpoint(at, bind)
                    if found is not None:
                        yield found
                elif isinstance(bind, list | tuple):
                    for position, url in enumerate(bind):
                        if isinstance(url, str):
                            found = _endpoint((*at, position), url)
                            if found is not None:
                                yield found


def bind_problems(servers: Sequence[Bound], adapters: Sequence[Bound]) -> list[tuple[Loc, str]]:
    """An adapter ``bind`` colliding with one of ``servers`` (the listeners and the API,
    checked between themselves elsewhere) or with an earlier adapter ``bind``; each at the
    adapter's key, naming the other place."""
    problems: list[tuple[Loc, str]] = []
    for position, bound in enumerate(adapters):
        other = next(
            (o for o in (*servers, *adapters[:position]) if bound.collides(o)),
            None,
        )
        if other is not None:
            shown = "" if other.shown == bound.shown else f" ({other.shown})"
            problems.append(
                (
                    bound.path,
                    f"address {bound.shown} is already used by {format_path(other.path)}{shown}",
                )
            )
    return problems
