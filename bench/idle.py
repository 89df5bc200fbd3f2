"""Broker memory per idle connection: RSS growth per connected, subscribed client.

``warm`` clients connect and subscribe first, so that one-time costs (lazy imports,
first-use allocations, listener buffers) are in the baseline; then,
``baseline_settle_s`` later, the broker's RSS (VmRSS) is read, ``count`` more clients
connect and each subscribes to its own topic, and after a settling pause RSS is read
again. The figure is the growth divided by
``count``. Clients use a 600 s keep-alive, so nothing is sent while they idle.

The baseline waits 6 s: edgebus hands freed heap back to the system (``malloc_trim``)
at most every 5 s once connections have closed, and the harness's own readiness check
closed one. With a 1 s wait that trim of start-up garbage sometimes fell between the
two readings, and the figure came out ~0.9 KiB lower than the clients' real cost.
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
    baseline_settle_s: float = 6.0,
) -> IdleResult:
    """Connect ``warm`` then ``count`` idle subscribed clients; RSS growth of the second set."""
    socks: list[socket.socket] = []
    try:
        _open(port, "warm", warm, level, socks)
        time.sleep(baseline_settle_s)
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
