"""Broker memory per idle connection: RSS growth per connected, subscribed client.

``warm`` clients connect and subscribe first, so that one-time costs (lazy imports,
first-use allocations, listener buffers) are in the baseline; then the broker's RSS
(VmRSS) is read, ``count`` more clients connect and each subscribes to its own topic,
and after a settling pause RSS is read again. The figure is the growth divided by
``count``. Clients use a 600 s keep-alive, so nothing is sent while they idle.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.client import mqtt_connect, mqtt_subscribe
from bench.errors import LoadError
from bench.frames import StreamError
from bench.procstat import rss_kib

__all__ = ["IdleResult", "raise_fd_limit", "run_idle"]

_KEEPALIVE_S = 600


@dataclass(frozen=True)
class IdleResult:
    connections: int
    rss_before_kib: int
    rss_after_kib: int

    @property
    def kib_per_connection(self) -> float:
        return (self.rss_after_kib - self.rss_before_kib) / self.connections


def raise_fd_limit(wanted: int) -> int:
    """Raise RLIMIT_NOFILE towards ``wanted`` (capped by the hard limit); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _open(port: int, prefix: str, n: int, level: int, into: list[socket.socket]) -> None:
    for i in range(n):
        try:
            sock = mqtt_connect(port, f"{prefix}-{i}", level, keepalive_s=_KEEPALIVE_S)
            into.append(sock)
            mqtt_subscribe(sock, f"bench/idle/{prefix}/{i}", 1, level)
        except (OSError, StreamError) as exc:
            raise LoadError(f"idle client {prefix}-{i} (after {len(into)} open): {exc}") from exc


def run_idle(
    port: int,
    pid: int,
    check_broker: Callable[[], None],
    count: int,
    warm: int = 50,
    level: int = 4,
    settle_s: float = 1.0,
) -> IdleResult:
    """Connect ``warm`` then ``count`` idle subscribed clients; RSS growth of the second set."""
    socks: list[socket.socket] = []
    try:
        _open(port, "warm", warm, level, socks)
        time.sleep(settle_s)
        check_broker()
        before = rss_kib(pid)
        _open(port, "idle", count, level, socks)
        time.sleep(settle_s)
        check_broker()
        after = rss_kib(pid)
    finally:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()
    return IdleResult(connections=count, rss_before_kib=before, rss_after_kib=after)
