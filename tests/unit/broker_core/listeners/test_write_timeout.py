"""``Connections``' write timeout, on a clock the test sets: a paused connection that
drains nothing for ``write_timeout_s`` is aborted; one that drains some starts again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from broker_core.listeners import connections as connections_module
from broker_core.listeners.connections import Connections
from broker_core.mqtt.session_state import Counters


@dataclass
class FakeTransport:
    waiting: int

    def get_write_buffer_size(self) -> int:
        return self.waiting

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket: the transport's buffer alone is looked at


@dataclass
class FakeSession:
    state: Any = None
    peer: str = "127.0.0.1:1"
    closed: bool = False

    def next_deadline(self) -> float | None:
        return None


@dataclass(eq=False)
class FakeConnection:
    transport: FakeTransport | None
    session: FakeSession = field(default_factory=FakeSession)
    aborted: int = 0
    counted: bool = True
    listener: Any = None

    def abort(self) -> None:
        self.aborted += 1
        self.transport = None


def paused(connections: Connections, waiting: int, now: float) -> FakeConnection:
    conn = FakeConnection(FakeTransport(waiting))
    connections._open.add(cast(Any, conn))
    connections.write_paused(cast(Any, conn), now)
    return conn


def test_nothing_drained_for_the_timeout_aborts() -> None:
    counters = Counters()
    connections = Connections(counters, write_timeout_s=10.0)
    conn = paused(connections, 100_000, now=0.0)
    connections.sweep(9.9)
    assert conn.aborted == 0
    connections.sweep(10.0)
    assert conn.aborted == 1
    assert counters.limit_hits["write_timeout"] == 1
    connections.sweep(30.0)  # counted once
    assert conn.aborted == 1
    assert counters.limit_hits["write_timeout"] == 1


def test_a_client_that_reads_some_starts_again() -> None:
    counters = Counters()
    connections = Connections(counters, write_timeout_s=10.0)
    conn = paused(connections, 100_000, now=0.0)
    assert conn.transport is not None
    for t in (8.0, 16.0, 24.0, 32.0):
        conn.transport.waiting -= 1000  # a slow reader
        connections.sweep(t)
    assert conn.aborted == 0
    connections.sweep(41.9)
    assert conn.aborted == 0
    connections.sweep(42.0)
    assert conn.aborted == 1


def test_resumed_or_closed_connections_are_not_timed() -> None:
    counters = Counters()
    connections = Connections(counters, write_timeout_s=10.0)
    connections._counted["tcp"] = 1
    resumed = paused(connections, 100_000, now=0.0)
    connections.write_resumed(cast(Any, resumed))
    closed = paused(connections, 100_000, now=0.0)
    closed.listener = type("Listener", (), {"name": "tcp"})()
    connections.closed(cast(Any, closed))
    connections.sweep(100.0)
    assert resumed.aborted == closed.aborted == 0
    assert counters.limit_hits["write_timeout"] == 0


def test_the_kernels_unacknowledged_bytes_falling_is_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The transport's buffer stands still (the kernel's send buffer is not free enough
    to take from it), the kernel's unacknowledged bytes fall: the client reads. A rise
    (the transport moved bytes into the kernel) is no reading of its own, and when the
    kernel's count cannot be had the transport's buffer alone decides."""
    kernel: dict[int, int | None] = {}
    monkeypatch.setattr(
        connections_module, "kernel_unacked", lambda transport: kernel[id(transport)]
    )
    counters = Counters()
    connections = Connections(counters, write_timeout_s=10.0)
    slow = FakeConnection(FakeTransport(100_000))
    kernel[id(slow.transport)] = 3_000_000
    connections._open.add(cast(Any, slow))
    connections.write_paused(cast(Any, slow), 0.0)
    for t in (8.0, 16.0, 24.0, 32.0):
        kernel[id(slow.transport)] = cast(int, kernel[id(slow.transport)]) - 16_000
        connections.sweep(t)
    kernel[id(slow.transport)] = 3_500_000  # up: the transport wrote more into it
    connections.sweep(40.0)
    assert slow.aborted == 0
    connections.sweep(41.9)
    assert slow.aborted == 0
    connections.sweep(42.0)  # nothing fell since 32.0
    assert slow.aborted == 1
    unknown = FakeConnection(FakeTransport(100_000))
    kernel[id(unknown.transport)] = None
    connections._open.add(cast(Any, unknown))
    connections.write_paused(cast(Any, unknown), 50.0)
    connections.sweep(60.0)
    assert unknown.aborted == 1
